//! Every example kernel on the host backend, against plain CPU loops.

mod common;

use offload::Device;
use offload_examples::kernels;

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
    in warps: warp_operations_match_a_cpu_model,
    dot_product_with_warp_sums_and_an_atomic,
);

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
        jacobi_matches_cpu_with_and_without_region,
        regions_on_eight_threads,
    );
}
