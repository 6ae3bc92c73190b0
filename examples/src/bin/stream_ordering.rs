//! What ordering device data across streams costs, on the default device: the host time of one
//! `enqueue` of a small `saxpy` on `DeviceVec`s, with tracking (the default) and without
//! (`offload::__private::set_tracking(false)`, where every enqueue of device data waits for the
//! device's own queue instead, as before tracking), measured in the same run:
//! - on one stream (the common case: tracking records no event);
//! - alternating two streams writing the same vector (tracking records and waits for one event
//!   per enqueue; untracked, the program orders them itself with `record` and `wait`).
//!
//! Also the cost of device-side kernel timing for plain launches
//! (`offload::measure_device_time`), and the racing program of issue 12 (a long kernel writes on
//! one stream, a reader follows at once on another) run untracked, to show what tracking
//! prevents. Each figure is the best of several batches.
//!
//! `cargo run --release -p offload-examples --bin stream_ordering`

use offload::{Device, DeviceVec, Launch, Stream};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernels::{saxpy, streams::relax};
use std::time::{Duration, Instant};

const BATCH: usize = 200;
const BATCHES: usize = 7;

type Failure = Box<dyn std::error::Error>;

/// The best host time per enqueue over `BATCHES` scopes of `BATCH` enqueues on `streams`
/// streams; `events`: order consecutive streams explicitly.
fn per_enqueue(
    device: &Device,
    streams: usize,
    events: bool,
    x: &DeviceVec<f32>,
    y: &mut DeviceVec<f32>,
) -> offload::Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..BATCHES {
        let elapsed = offload::scope(|s| {
            let queues = (0..streams)
                .map(|_| s.stream(device))
                .collect::<offload::Result<Vec<Stream<'_>>>>()?;
            let start = Instant::now();
            for i in 0..BATCH {
                let stream = &queues[i % streams];
                if events && i > 0 {
                    stream.wait(&queues[(i - 1) % streams].record()?)?;
                }
                saxpy::enqueue(stream, Launch::auto(), 1.0, x, &mut *y)?;
            }
            let elapsed = start.elapsed();
            queues.iter().try_for_each(|q| q.synchronize())?;
            Ok(elapsed)
        })?;
        best = best.min(elapsed / BATCH as u32);
    }
    Ok(best)
}

/// Whether a long writer on one stream and a reader queued at once on another give the
/// one-stream result.
fn racing_program_is_ordered(device: &Device) -> offload::Result<bool> {
    // A few milliseconds of writer on a GPU; the host runs each launch when it is queued.
    let (n, steps) = if device.is_gpu() {
        (1 << 22, 20_000)
    } else {
        (1 << 12, 10)
    };
    let x = DeviceVec::from_slice(device, &vec![0.5f32; n])?;
    let mut y = DeviceVec::<f32>::zeroed(device, n)?;
    let mut z = DeviceVec::<f32>::zeroed(device, n)?;
    offload::scope(|s| {
        let (a, b) = (s.stream(device)?, s.stream(device)?);
        relax::enqueue(&a, Launch::auto(), steps, &x, &mut y)?;
        saxpy::enqueue(&b, Launch::auto(), 1.0, &y, &mut z)?;
        Ok(())
    })?;
    Ok(y.to_vec()? == z.to_vec()?)
}

fn set_tracking(on: bool) {
    // SAFETY: while tracking is off this program orders its streams itself (`events`), except
    // in the racing program, which only reads what the race left in device memory.
    unsafe { offload::__private::set_tracking(on) }
}

fn main() -> Result<(), Failure> {
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    let n = 1024;
    let x = DeviceVec::from_slice(&device, &vec![1.0f32; n])?;
    let mut y = DeviceVec::<f32>::zeroed(&device, n)?;
    let us = |t: Duration| t.as_secs_f64() * 1e6;
    // Warm up: load the code, fill the memory pools.
    per_enqueue(&device, 2, false, &x, &mut y)?;

    let mut rows = Vec::new();
    for (label, streams) in [("one stream", 1), ("two streams, alternating", 2)] {
        let tracked = per_enqueue(&device, streams, false, &x, &mut y)?;
        set_tracking(false);
        let untracked = per_enqueue(&device, streams, streams > 1, &x, &mut y);
        set_tracking(true);
        rows.push((label, tracked, untracked?));
    }
    println!("enqueue of saxpy on {n} f32 in DeviceVecs, host time per call (best of {BATCHES} x {BATCH}):");
    for (label, tracked, untracked) in rows {
        println!(
            "  {label:<26} tracked {:7.2} us   untracked {:7.2} us   tracked / untracked {:.2}",
            us(tracked),
            us(untracked),
            tracked.as_secs_f64() / untracked.as_secs_f64()
        );
        Ratio::print(
            "stream_ordering",
            &format!("enqueue with cross-stream tracking, {label}"),
            "enqueue without tracking",
            Measure::Time,
            tracked.as_secs_f64() / untracked.as_secs_f64(),
            Goal::None,
        );
    }

    let mut yh = vec![0.0f32; n];
    let xh = vec![1.0f32; n];
    let mut plain = |timed: bool| -> offload::Result<Duration> {
        offload::measure_device_time(timed);
        let mut best = Duration::MAX;
        for _ in 0..BATCHES {
            let start = Instant::now();
            for _ in 0..BATCH {
                saxpy::launch(Launch::on(&device), 1.0, &xh, &mut yh)?;
            }
            best = best.min(start.elapsed() / BATCH as u32);
        }
        offload::measure_device_time(false);
        Ok(best)
    };
    plain(false)?;
    let (untimed, timed) = (plain(false)?, plain(true)?);
    offload::measure_device_time(true);
    saxpy::launch(Launch::on(&device), 1.0, &xh, &mut yh)?;
    offload::measure_device_time(false);
    let report = offload::last_launch().ok_or("no launch report")?;
    println!(
        "plain launch of saxpy on {n} f32 (host slices): {:.2} us, with device timing {:.2} us \
         (ratio {:.3}); kernel time from the host {:.2} us, from events {}",
        us(untimed),
        us(timed),
        timed.as_secs_f64() / untimed.as_secs_f64(),
        us(report.kernel_time),
        report
            .device_time
            .map_or("-".to_string(), |t| format!("{:.2} us", us(t)))
    );

    let ordered = racing_program_is_ordered(&device)?;
    set_tracking(false);
    let untracked = racing_program_is_ordered(&device);
    set_tracking(true);
    println!(
        "racing program (writer on stream A, reader at once on stream B): tracked {}, untracked {}",
        if ordered {
            "one-stream result"
        } else {
            "RACED"
        },
        if untracked? {
            "one-stream result (no race seen)"
        } else {
            "raced (as expected without ordering)"
        }
    );
    if !ordered {
        return Err("the tracked racing program did not give the one-stream result".into());
    }
    Ok(())
}
