//! Every example kernel on the host backend, against plain CPU loops.

mod common;

use offload::Device;
use offload_examples::{kernels, reference};

fn host() -> Device {
    Device::host()
}

macro_rules! host_test {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                common::$name(&host());
            }
        )*
    };
    (in $module:ident: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                common::$module::$name(&host());
            }
        )*
    };
}

host_test!(
    saxpy_matches_cpu,
    stencil_matches_cpu,
    integer_kernel_with_two_outputs_matches_cpu,
    every_launch_shape_covers_every_element,
    global_ids_are_dense_and_unique,
    invalid_launches_are_errors_naming_the_limit,
    generic_axpy_matches_cpu,
    const_generic_matmul_matches_cpu,
    raw_pointer_kernel_maps_the_pointee,
);

host_test!(in atomics: histogram_counts_equal_cpu, atomic_operations_match_cpu);
host_test!(
    in outputs: tuple_of_three_outputs_matches_cpu,
    tuple_of_four_output_views_matches_cpu,
    wide_update_with_three_inputs_matches_cpu,
    wide_map_to_three_outputs_matches_cpu,
    wide_update_of_two_outputs_matches_cpu,
);
host_test!(
    in warps: warp_operations_match_a_cpu_model,
);

/// Host launches run warps of 32 lanes, or of 64 (AMD's wavefronts) under
/// `OFFLOAD_HOST_WARP_SIZE=64`, which scripts/test sets for a second run of the warp tests.
#[test]
fn host_warps_have_the_configured_width() {
    let expected = match std::env::var("OFFLOAD_HOST_WARP_SIZE").as_deref() {
        Ok("64") => 64,
        _ => 32,
    };
    assert_eq!(common::warps::warp_size(&host()), expected);
}

/// A warp operation that some live lanes skip (waiting at a block barrier instead) is a failed
/// launch naming the deadlock, not a hang.
#[test]
fn divergent_warp_operation_is_an_error() {
    let mut out = vec![7i32; 32];
    let host = host();
    let launch = offload::Launch::on(&host).grid(1).block(32);
    match kernels::warps::divergent_warp_sum::launch(launch, &mut out) {
        Err(offload::Error::KernelFailed { message, .. }) => {
            assert!(message.contains("deadlock"), "{message}")
        }
        other => panic!("expected KernelFailed, got {other:?}"),
    }
    assert_eq!(out, vec![7; 32], "the output is untouched");
}
host_test!(
    in streams: two_streams_give_the_cpu_result,
    device_slices_chain_kernels_on_streams,
    events_order_and_time_streams,
    panic_on_a_stream_is_an_error,
    aliased_device_slices_are_refused,
    a_reader_on_another_stream_waits_for_the_writer,
    device_vecs_serve_loops_on_streams,
    freeing_a_device_vec_waits_for_its_streams,
    stream_copies_need_device_data,
    plain_launches_report_device_time,
    prepared_launches_give_the_enqueue_result,
);

host_test!(
    in graphs: replays_give_the_launches_result,
    host_data_and_copies_are_refused_while_recording,
    a_replay_is_ordered_across_streams,
    a_panic_in_a_replay_is_an_error,
);

#[test]
fn every_device_at_once_gives_the_cpu_result() {
    common::streams::every_device_at_once_gives_the_cpu_result(offload::devices());
}

#[test]
fn device_index_out_of_range_is_an_error() {
    common::streams::device_index_out_of_range_is_an_error();
}

#[test]
fn math_kernel_is_accurate() {
    common::math_kernel_is_accurate(&host());
}

/// A kernel that panics (a bounds check) makes the launch an `Err` carrying the panic message,
/// and leaves the output slice as it was.
#[test]
fn kernel_panic_is_an_error_and_outputs_are_untouched() {
    let message = common::kernel_panic_is_an_error_and_outputs_are_untouched(&host());
    assert!(message.contains("index out of bounds"), "{message}");
}

#[test]
fn last_launch_reports_the_shape_and_no_copies() {
    let x = vec![1.0f32; 1000];
    let mut y = vec![0.0f32; 1000];
    kernels::saxpy::launch(offload::Launch::on(&host()), 2.0, &x, &mut y).unwrap();
    let report = offload::last_launch().unwrap();
    assert_eq!(report.kernel, "saxpy");
    assert_eq!(
        report.grid,
        Some(offload::Dim3::new(4, 1, 1)),
        "1000 elements, one per thread, in blocks of 256"
    );
    assert_eq!(
        report.bytes_to_device, 0,
        "the host backend reads host memory in place"
    );
}

/// Data mapping on the host backend: a no-op that keeps the GPU's results (see common/mapping.rs).
mod mapping {
    use super::{common::mapping, host};

    macro_rules! host_mapping_test {
        ($($name:ident),* $(,)?) => {
            $(
                #[test]
                fn $name() {
                    mapping::$name(&host());
                }
            )*
        };
    }

    host_mapping_test!(
        region_loop_moves_each_array_once,
        plain_arguments_and_nested_regions_find_data_present,
        map_kinds_move_only_what_they_say,
        device_vec_round_trip_without_transfers,
        device_vec_copies_part,
        jacobi_matches_cpu_with_and_without_region,
        regions_on_eight_threads,
    );
}

/// Launch shapes for the wide-access tests: the default, a single thread, odd 3D blocks and grid.
fn odd_shapes(device: &Device) -> Vec<offload::Launch<'_>> {
    vec![
        offload::Launch::on(device),
        offload::Launch::on(device).grid(1).block(1),
        offload::Launch::on(device).grid((2, 3, 1)).block((3, 1, 2)),
        offload::Launch::on(device).grid(7).block(5),
    ]
}

/// The index in `buf` whose address lies `residue` bytes past a 16-byte boundary.
fn at_residue<T>(buf: &[T], residue: usize) -> usize {
    let size = std::mem::size_of::<T>();
    (residue + 16 - buf.as_ptr() as usize % 16) % 16 / size
}

/// `update_mine_wide` updates every output element exactly once, with the input element of the
/// same index, and nothing outside the output: for every offset of the output from a 16-byte
/// boundary, inputs aligned alike and otherwise (and longer than the output), odd lengths, and
/// launch shapes down to one thread. Bytes give the finest cut (16 per chunk).
#[test]
fn wide_update_reaches_every_element_once_at_any_alignment_and_shape() {
    let device = host();
    for len in [0usize, 1, 15, 16, 17, 47, 1001] {
        let x: Vec<u8> = (0..len + 40).map(|i| (i * 7 + 1) as u8).collect();
        let y0: Vec<u8> = (0..len + 40).map(|i| (i * 13 + 5) as u8).collect();
        for out_residue in 0..16 {
            for in_residue in [0, 1, 2, 7, 8, 15, out_residue] {
                let (out_at, in_at) = (at_residue(&y0, out_residue), at_residue(&x, in_residue));
                let input = &x[in_at..in_at + len + 5];
                for launch in odd_shapes(&device) {
                    let mut y = y0.clone();
                    kernels::add_bytes::launch(launch, input, &mut y[out_at..out_at + len])
                        .unwrap();
                    for (i, (&got, &before)) in y.iter().zip(&y0).enumerate() {
                        let want = if (out_at..out_at + len).contains(&i) {
                            before.wrapping_add(input[i - out_at])
                        } else {
                            before
                        };
                        assert_eq!(
                            got, want,
                            "len {len}, output at +{out_residue}, input at +{in_residue}, element {i}"
                        );
                    }
                }
            }
        }
    }
}

/// saxpy and axpy<f16> through the wide path equal the CPU loop bit for bit (NaN, infinities and
/// subnormals among the values) whether or not `x` and `y` are aligned alike.
#[test]
fn wide_saxpy_and_half_axpy_match_cpu_at_any_alignment() {
    use offload::half::f16;
    let device = host();
    let len = 1003;
    let mut x = common::floats(len + 8, 21);
    let mut y0 = common::floats(len + 8, 22);
    x[5] = f32::NAN;
    y0[9] = f32::INFINITY;
    x[17] = f32::MIN_POSITIVE / 8.0;
    let (xh, yh0): (Vec<f16>, Vec<f16>) = (
        x.iter().map(|&v| f16::from_f32(v * 100.0)).collect(),
        y0.iter().map(|&v| f16::from_f32(v * 100.0)).collect(),
    );
    for out_residue in [0, 4, 8, 12] {
        for in_residue in [0, 4, 12] {
            let (o, i) = (at_residue(&y0, out_residue), at_residue(&x, in_residue));
            for launch in odd_shapes(&device) {
                let mut expected = y0.clone();
                reference::saxpy(1.5, &x[i..i + len], &mut expected[o..o + len]);
                let mut y = y0.clone();
                kernels::saxpy::launch(launch, 1.5, &x[i..i + len], &mut y[o..o + len]).unwrap();
                assert!(
                    common::same_bits(&y, &expected),
                    "saxpy +{out_residue} +{in_residue}"
                );
            }
        }
    }
    for out_residue in [0, 2, 6, 14] {
        for in_residue in [0, 2, 14] {
            let (o, i) = (at_residue(&yh0, out_residue), at_residue(&xh, in_residue));
            for launch in odd_shapes(&device) {
                let a = f16::from_f32(-0.75);
                let mut expected = yh0.clone();
                reference::axpy(a, &xh[i..i + len], &mut expected[o..o + len]);
                let mut y = yh0.clone();
                kernels::axpy::launch(launch, a, &xh[i..i + len], &mut y[o..o + len]).unwrap();
                let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&y),
                    bits(&expected),
                    "axpy<f16> +{out_residue} +{in_residue}"
                );
            }
        }
    }
}

/// Kernels whose threads never wait for one another (read from the PTX image) run on the host
/// as plain calls over ranges of threads; kernels with a barrier, a warp operation or shared
/// memory, directly or through a helper, keep the block scheduler. The panicking kernels of
/// `views` are among the first, so their tests show that panics on that path still fail the
/// launch and name the kernel's line.
#[test]
fn kernels_without_block_level_operations_run_without_the_scheduler() {
    use kernels::{atomics, block, sgemm_tf32, views, warps};
    use offload::__private::Kernel;
    let images = &offload_examples::__OFFLOAD_IMAGES;
    if images.images.is_empty() {
        let reason = images.unavailable.unwrap_or("unknown reason");
        if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
            panic!("OFFLOAD_REQUIRE_DEVICE_BUILD=1 but no device images were built: {reason}");
        }
        eprintln!("SKIPPED: no device images ({reason}): every kernel keeps the scheduler");
        assert!(!kernels::saxpy::KERNEL.threads_independent());
        return;
    }
    let axpy_f32 = <kernels::axpy::Instance<f32> as kernels::axpy::Declared>::kernel();
    let independent: [&Kernel; 11] = [
        &kernels::saxpy::KERNEL,
        &kernels::stencil5::KERNEL,
        &kernels::add_sub::KERNEL,
        &kernels::thread_ids::KERNEL,
        &kernels::math_mix::KERNEL,
        &kernels::jacobi2d::KERNEL,
        axpy_f32,
        &atomics::histogram::KERNEL,
        &views::fill_range::KERNEL,
        &views::at_past_the_end::KERNEL,
        &views::slice_past_the_end::KERNEL,
    ];
    for kernel in independent {
        assert!(kernel.threads_independent(), "{}", kernel.name);
    }
    let block_level: [&Kernel; 8] = [
        &block::reverse_chunks::KERNEL,
        &block::reverse_chunks_dynamic::KERNEL,
        &block::barrier_after_early_return::KERNEL,
        &block::block_sum::KERNEL,
        &warps::warp_operations::KERNEL,
        &warps::divergent_warp_sum::KERNEL,
        &views::reverse_tiles::KERNEL,
        &sgemm_tf32::sgemm_tf32x3::KERNEL,
    ];
    for kernel in block_level {
        assert!(!kernel.threads_independent(), "{}", kernel.name);
    }
}

/// On the host a launch first runs each task's range of threads as one call, where thread ids
/// are unknown: a kernel that reads its id after updating an output in place has its outputs
/// put back and runs again one thread per call (as its later launches do at once), so every
/// launch updates each element once and every thread sees its own id.
#[test]
fn a_kernel_reading_its_thread_id_after_an_update_updates_once() {
    let host = host();
    let (n, grid, block) = (50_000usize, 10u32, 128u32);
    let threads = (grid * block) as usize;
    let mut counts = vec![7u32; n];
    let mut ids = vec![u32::MAX; n];
    for launches in 1..=2 {
        let launch = offload::Launch::on(&host).grid(grid).block(block);
        kernels::bump_then_ids::launch(launch, &mut counts, &mut ids).unwrap();
        assert!(counts.iter().all(|&c| c == 7 + launches), "{launches}");
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(id as usize, i % threads, "element {i}, launch {launches}");
        }
    }
}
