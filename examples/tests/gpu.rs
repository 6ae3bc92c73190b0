//! Every example kernel on the first GPU, against plain CPU loops and the host backend.
//!
//! Without a GPU (or without device images) each test prints `SKIPPED` and passes; with
//! `OFFLOAD_REQUIRE_GPU=1` it fails instead.

mod common;

use offload::{BackendKind, Device, Launch};
use offload_examples::kernels;
use std::io::Write;

/// The first CUDA device, or `None` (after saying why) when the test must be skipped.
fn gpu(test: &str) -> Option<Device> {
    let reason = match offload::devices()
        .iter()
        .find(|d| d.kind() == BackendKind::Cuda)
    {
        Some(_) if offload_examples::__OFFLOAD_IMAGES.images.is_empty() => format!(
            "no device images were built ({})",
            offload_examples::__OFFLOAD_IMAGES
                .unavailable
                .unwrap_or("unknown reason")
        ),
        Some(device) => return Some(device.clone()),
        None => "no CUDA GPU".to_string(),
    };
    if std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("{test}: OFFLOAD_REQUIRE_GPU=1 but {reason}");
    }
    // Straight to stderr: libtest captures eprintln!, and a skip must be visible.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    None
}

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

/// A panicking GPU thread comes back as an error naming where it panicked (the file relative to
/// the package, as the device pass remaps it) and which thread it was.
#[test]
fn kernel_panic_is_an_error_and_outputs_are_untouched() {
    let Some(gpu) = gpu("kernel_panic_is_an_error_and_outputs_are_untouched") else {
        return;
    };
    let message = common::kernel_panic_is_an_error_and_outputs_are_untouched(&gpu);
    assert!(
        message.starts_with("panicked at src/kernels.rs:"),
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

gpu_test!(in streams: two_streams_give_the_cpu_result);
gpu_test!(in streams: events_order_and_time_streams);
gpu_test!(in streams: panic_on_a_stream_is_an_error);

/// A launch on a GPU stream that names another device is refused before anything is queued.
#[test]
fn stream_launch_on_another_device_is_an_error() {
    let Some(gpu) = gpu("stream_launch_on_another_device_is_an_error") else {
        return;
    };
    let x = common::floats(100, 40);
    let mut y = common::floats(100, 41);
    let host = Device::host();
    let outcome = offload::scope(|s| {
        let stream = s.stream(&gpu)?;
        kernels::saxpy::enqueue(&stream, Launch::on(&host), 1.0, &x, &mut y)
    });
    match outcome {
        Err(offload::Error::InvalidLaunch { reason, .. }) => {
            assert!(reason.contains("but its stream is on"), "{reason}")
        }
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
}

/// Every GPU (and the host) at once, each with its share; GPU indices past the last are errors
/// naming the count (on a one-GPU machine, `Device::gpu(1)`).
#[test]
fn every_gpu_at_once_and_index_errors() {
    if gpu("every_gpu_at_once_and_index_errors").is_none() {
        return;
    }
    let gpus: Vec<Device> = offload::devices()
        .iter()
        .filter(|d| d.is_gpu())
        .cloned()
        .collect();
    let _ = writeln!(
        std::io::stderr(),
        "every_gpu_at_once: {} GPU(s)",
        gpus.len()
    );
    common::streams::every_device_at_once_gives_the_cpu_result(&gpus);
    common::streams::every_device_at_once_gives_the_cpu_result(offload::devices());
    common::streams::device_index_out_of_range_is_an_error();
}
