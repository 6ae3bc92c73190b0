//! Every example kernel on the first GPU, against plain CPU loops and the host backend.
//!
//! Without a GPU (or without device images) each test prints `SKIPPED` and passes; with
//! `OFFLOAD_REQUIRE_GPU=1` it fails instead.

mod common;

use common::gpu::gpu;
use offload::{Device, Launch};
use offload_examples::kernels;

macro_rules! gpu_test {
    ($name:ident) => {
        #[test]
        fn $name() {
            if let Some(device) = gpu(stringify!($name)) {
                common::$name(&device);
            }
        }
    };
    (in $module:ident: $name:ident) => {
        #[test]
        fn $name() {
            if let Some(device) = gpu(stringify!($name)) {
                common::$module::$name(&device);
            }
        }
    };
}

gpu_test!(saxpy_matches_cpu);
gpu_test!(stencil_matches_cpu);
gpu_test!(integer_kernel_with_two_outputs_matches_cpu);
gpu_test!(every_launch_shape_covers_every_element);
gpu_test!(global_ids_are_dense_and_unique);
gpu_test!(invalid_launches_are_errors_naming_the_limit);
gpu_test!(in atomics: histogram_counts_equal_cpu);
gpu_test!(in atomics: atomic_operations_match_cpu);
gpu_test!(generic_axpy_matches_cpu);
gpu_test!(const_generic_matmul_matches_cpu);
gpu_test!(raw_pointer_kernel_maps_the_pointee);
gpu_test!(in warps: warp_operations_match_a_cpu_model);
gpu_test!(in outputs: tuple_of_three_outputs_matches_cpu);
gpu_test!(in outputs: tuple_of_four_output_views_matches_cpu);
gpu_test!(in outputs: wide_update_with_three_inputs_matches_cpu);
gpu_test!(in outputs: wide_map_to_three_outputs_matches_cpu);
gpu_test!(in outputs: wide_update_of_two_outputs_matches_cpu);

/// Data mapping on the GPU, bytes counted (see common/mapping.rs).
mod mapping {
    use super::{common::mapping, gpu};

    macro_rules! gpu_mapping_test {
        ($($name:ident),* $(,)?) => {
            $(
                #[test]
                fn $name() {
                    if let Some(device) = gpu(stringify!($name)) {
                        mapping::$name(&device);
                    }
                }
            )*
        };
    }

    gpu_mapping_test!(
        region_loop_moves_each_array_once,
        plain_arguments_and_nested_regions_find_data_present,
        map_kinds_move_only_what_they_say,
        device_vec_round_trip_without_transfers,
        device_vec_copies_part,
        jacobi_matches_cpu_with_and_without_region,
        regions_on_eight_threads,
        overlapping_and_absent_maps_are_errors,
        redundant_copies_are_reported,
    );
}

/// A panicking GPU thread comes back as an error naming where it panicked (the file relative to
/// the package, as the device pass remaps it) and which thread it was.
#[test]
fn kernel_panic_is_an_error_and_outputs_are_untouched() {
    let Some(gpu) = gpu("kernel_panic_is_an_error_and_outputs_are_untouched") else {
        return;
    };
    let message = common::kernel_panic_is_an_error_and_outputs_are_untouched(&gpu);
    assert!(
        message.starts_with("panicked at src/kernels/demo_saxpy.rs:"),
        "{message}"
    );
    assert!(
        message.ends_with(" (block (3, 0, 0), thread (231, 0, 0))"),
        "{message}"
    );
}

#[test]
fn default_device_is_the_gpu_and_data_moves_both_ways() {
    let Some(gpu) = gpu("default_device_is_the_gpu_and_data_moves_both_ways") else {
        return;
    };
    assert_eq!(offload::default_device().unwrap().name(), gpu.name());
    let x = common::floats(4096, 10);
    let mut y = common::floats(4096, 11);
    let mut on_host = y.clone();
    kernels::saxpy(3.0, &x, &mut y).unwrap();
    let report = offload::last_launch().unwrap();
    assert_eq!(report.device, gpu.name());
    assert_eq!(
        report.bytes_to_device,
        2 * 4096 * 4,
        "x and y go to the device"
    );
    assert_eq!(report.bytes_from_device, 4096 * 4, "only y comes back");
    kernels::saxpy::launch(Launch::on(&Device::host()), 3.0, &x, &mut on_host).unwrap();
    assert_eq!(
        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        on_host.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "GPU and host backend agree bit for bit"
    );
}

/// The math kernel gives the same bits on the GPU as on the host backend, in f32 and f64.
#[test]
fn math_kernel_matches_host_backend_bit_for_bit() {
    let Some(gpu) = gpu("math_kernel_matches_host_backend_bit_for_bit") else {
        return;
    };
    let (gpu32, gpu64) = common::math_kernel_is_accurate(&gpu);
    let (host32, host64) = common::math_kernel_is_accurate(&Device::host());
    let bits32 = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let bits64 = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(
        bits32(&gpu32) == bits32(&host32),
        "f32 results differ between GPU and host"
    );
    assert!(
        bits64(&gpu64) == bits64(&host64),
        "f64 results differ between GPU and host"
    );
}

/// Pageable copies of several staging chunks and an odd size, from and to unaligned addresses,
/// arrive whole both ways (through the CUDA plugin's pinned staging pipeline).
#[test]
fn staged_copies_of_pageable_memory_arrive_whole() {
    let Some(gpu) = gpu("staged_copies_of_pageable_memory_arrive_whole") else {
        return;
    };
    let bytes = (37 << 20) + 4099;
    let source: Vec<u8> = (0..bytes + 3).map(|i| (i % 251) as u8).collect();
    let mut resident = offload::DeviceVec::<u8>::zeroed(&gpu, bytes).unwrap();
    resident.copy_from_host(&source[3..]).unwrap();
    let mut back = vec![0u8; bytes + 5];
    resident.copy_to_host(&mut back[5..]).unwrap();
    assert!(back[5..] == source[3..], "the round trip changed bytes");
    assert!(back[..5].iter().all(|&b| b == 0), "wrote before the range");
}
