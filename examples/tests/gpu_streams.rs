//! Streams and several devices on the GPUs, against plain CPU loops.
//!
//! A binary of its own, and one test running the checks in turn: a kernel panic is recorded per
//! device image, so the panic this suite provokes on a stream must not meet launches of other
//! tests running in parallel (see `offload::stream`). Skips visibly without a GPU; fails instead
//! with `OFFLOAD_REQUIRE_GPU=1`.

mod common;

use common::gpu::gpu;
use common::{graphs, streams};
use offload::{Device, DeviceVec, Error, Launch, NativeQueue};
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
    launches_bind_again_when_another_context_was_made_current(&gpu);

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

/// Launches do not ask the driver for the current context while the thread's last bind was of
/// their own (`CudaBackend::on_bound`): after another library made no context current, or a
/// context of its own, the same launches still run, in order, on their stream and plainly.
fn launches_bind_again_when_another_context_was_made_current(gpu: &Device) {
    use cudarc::driver::{result, sys};
    let n = 10_000;
    let x = common::floats(n, 80);
    let y0 = common::floats(n, 81);
    let (mut queued, mut plain) = (vec![0.0f32; n], vec![0.0f32; n]);
    let dx = DeviceVec::from_slice(gpu, &x).unwrap();
    let mut dy = DeviceVec::from_slice(gpu, &y0).unwrap();
    let mut launches = 0;
    offload::scope(|s| {
        let stream = s.stream(gpu)?;
        let Some(NativeQueue::Cuda { context, .. }) = stream.native_queue() else {
            let _ = writeln!(std::io::stderr(), "not through the CUDA plugin: skipped");
            return Ok(());
        };
        let context = context as sys::CUcontext;
        let (sx, sy) = (stream.upload(&x)?, stream.upload(&y0)?);
        let mut prepared = kernels::saxpy::prepare(&stream, Launch::auto())?;
        let mut launch_all = |current: Option<sys::CUcontext>| {
            if let Some(current) = current {
                // SAFETY: as another library would; the launches' context is not ours to keep.
                unsafe { result::ctx::set_current(current) }.unwrap();
            }
            launches += 1;
            saxpy_three_ways(&stream, &mut prepared, (sx, sy), (&dx, &mut dy))
        };
        launch_all(None)?;
        launch_all(Some(std::ptr::null_mut()))?;
        let mut device = 0;
        let mut own = std::ptr::null_mut();
        // SAFETY: asks the launches' context its device, then makes a context of it (current
        // on this thread), destroyed below once the launches queued while it was current ran.
        unsafe {
            result::ctx::set_current(context).unwrap();
            sys::cuCtxGetDevice(&mut device).result().unwrap();
            sys::cuCtxCreate_v2(&mut own, 0, device).result().unwrap();
        }
        launch_all(None)?;
        launch_all(Some(own))?;
        stream.synchronize()?;
        // SAFETY: made above; nothing runs in it.
        unsafe { sys::cuCtxDestroy_v2(own).result().unwrap() };
        launch_all(None)?;
        stream.download(sy, &mut queued)?;
        Ok(())
    })
    .unwrap();
    if launches == 0 {
        return;
    }
    dy.copy_to_host(&mut plain).unwrap();
    let (mut on_stream, mut plainly) = (y0.clone(), y0.clone());
    for _ in 0..launches {
        offload_examples::reference::saxpy(0.5, &x, &mut on_stream);
        offload_examples::reference::saxpy(0.25, &x, &mut on_stream);
        offload_examples::reference::saxpy(0.5, &x, &mut plainly);
    }
    assert_eq!(launches, 5);
    assert!(queued == on_stream, "queued launches on {}", gpu.name());
    assert!(plain == plainly, "plain launches on {}", gpu.name());
}

/// `y += 0.5 x` then `y += 0.25 x` on `stream` through the generic `enqueue` (first: the first
/// launch after a change of context) and the prepared handle, and `y += 0.5 x` plainly.
fn saxpy_three_ways<'s>(
    stream: &offload::Stream<'s>,
    prepared: &mut kernels::saxpy::Prepared<'s>,
    (x, y): (offload::DeviceSlice<'s, f32>, offload::DeviceSlice<'s, f32>),
    (plain_x, plain_y): (&DeviceVec<f32>, &mut DeviceVec<f32>),
) -> offload::Result<()> {
    kernels::saxpy::enqueue(stream, Launch::auto(), 0.5, x, y)?;
    prepared.enqueue(0.25, x, y)?;
    kernels::saxpy::launch(Launch::auto(), 0.5, plain_x, plain_y)
}
