//! Streams and several devices on the GPUs, against plain CPU loops.
//!
//! A binary of its own, and one test running the checks in turn: a kernel panic is recorded per
//! device image, so the panic this suite provokes on a stream must not meet launches of other
//! tests running in parallel (see `offload::stream`). Skips visibly without a GPU; fails instead
//! with `OFFLOAD_REQUIRE_GPU=1`.

mod common;

use common::gpu::gpu;
use common::streams;
use offload::{Device, Error, Launch};
use offload_examples::kernels;
use std::io::Write;

#[test]
fn streams_and_devices_on_the_gpu() {
    let Some(gpu) = gpu("streams_and_devices_on_the_gpu") else {
        return;
    };
    streams::two_streams_give_the_cpu_result(&gpu);
    streams::device_slices_chain_kernels_on_streams(&gpu);
    streams::events_order_and_time_streams(&gpu);
    streams::panic_on_a_stream_is_an_error(&gpu);
    streams::aliased_device_slices_are_refused(&gpu);
    // The device is usable after the panic, on streams and with plain launches.
    streams::two_streams_give_the_cpu_result(&gpu);
    common::saxpy_matches_cpu(&gpu);
    stream_launch_on_another_device_is_an_error(&gpu);

    let gpus: Vec<Device> = offload::devices()
        .iter()
        .filter(|d| d.is_gpu())
        .cloned()
        .collect();
    let _ = writeln!(
        std::io::stderr(),
        "every GPU at once: {} GPU(s)",
        gpus.len()
    );
    streams::every_device_at_once_gives_the_cpu_result(&gpus);
    streams::every_device_at_once_gives_the_cpu_result(offload::devices());
    streams::device_index_out_of_range_is_an_error();
}

/// A launch on a GPU stream that names another device is refused before anything is queued.
fn stream_launch_on_another_device_is_an_error(gpu: &Device) {
    let x = common::floats(100, 40);
    let mut y = common::floats(100, 41);
    let host = Device::host();
    let outcome = offload::scope(|s| {
        let stream = s.stream(gpu)?;
        kernels::saxpy::enqueue(&stream, Launch::on(&host), 1.0, &x, &mut y)
    });
    match outcome {
        Err(Error::InvalidLaunch { reason, .. }) => {
            assert!(reason.contains("but its stream is on"), "{reason}")
        }
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
}
