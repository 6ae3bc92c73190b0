//! Streams and several devices on the GPUs, against plain CPU loops.
//!
//! A binary of its own, and one test running the checks in turn: a kernel panic is recorded per
//! device image, so the panic this suite provokes on a stream must not meet launches of other
//! tests running in parallel (see `offload::stream`). Skips visibly without a GPU; fails instead
//! with `OFFLOAD_REQUIRE_GPU=1`.

mod common;

use common::gpu::gpu;
use common::{graphs, streams};
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
    streams::a_reader_on_another_stream_waits_for_the_writer(&gpu);
    streams::device_vecs_serve_loops_on_streams(&gpu);
    streams::freeing_a_device_vec_waits_for_its_streams(&gpu);
    streams::stream_copies_need_device_data(&gpu);
    streams::plain_launches_report_device_time(&gpu);
    streams::prepared_launches_give_the_enqueue_result(&gpu);
    graphs::replays_give_the_launches_result(&gpu);
    graphs::host_data_and_copies_are_refused_while_recording(&gpu);
    graphs::a_replay_is_ordered_across_streams(&gpu);
    graphs::a_panic_in_a_replay_is_an_error(&gpu);
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
    // Last: it turns the trace on for the rest of the process.
    streams::stream_work_is_traced(&gpu);
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
