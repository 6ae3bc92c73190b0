//! The stream-overlap measurement shared by the `stream_overlap` and `plugins` benchmarks: the
//! same chunked work (copy a chunk in, run `relax` on it, copy it back) queued on one stream or
//! spread over several, timed from the host.

use crate::kernels::streams::relax;
use offload::{Device, Launch};
use std::time::{Duration, Instant};

/// The chunks of `x` and `y` queued round-robin on `streams` streams of each of `devices`,
/// `steps` relax steps per element; returns once all of it has run.
pub fn chunked_relax(
    devices: &[Device],
    streams: usize,
    chunk: usize,
    steps: u32,
    x: &[f32],
    y: &mut [f32],
) -> offload::Result<()> {
    offload::scope(|s| {
        let queues = (0..streams)
            .flat_map(|_| devices.iter().map(|d| s.stream(d)))
            .collect::<offload::Result<Vec<_>>>()?;
        for (i, (y, x)) in y.chunks_mut(chunk).zip(x.chunks(chunk)).enumerate() {
            relax::enqueue(&queues[i % queues.len()], Launch::auto(), steps, x, y)?;
        }
        Ok(())
    })
}

/// The best time of 5 runs of `work`, each from `y` all ones.
pub fn best_of_5(
    y: &mut [f32],
    mut work: impl FnMut(&mut [f32]) -> offload::Result<()>,
) -> offload::Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..5 {
        y.fill(1.0);
        let start = Instant::now();
        work(y)?;
        best = best.min(start.elapsed());
    }
    Ok(best)
}

/// Steps of `relax` for which one chunk's kernel takes about as long as copying it in and out,
/// from a plain launch's report at 256 steps.
pub fn balanced_steps(
    device: &Device,
    x: &[f32],
    y: &mut [f32],
) -> Result<u32, Box<dyn std::error::Error>> {
    const PROBE: u32 = 256;
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        relax::launch(Launch::on(device), PROBE, x, &mut *y)?;
        let report = offload::last_launch().ok_or("no launch report")?;
        let copies = report.time_to_device + report.time_from_device;
        best = (best.0.min(report.kernel_time), best.1.min(copies));
    }
    let (kernel, copies) = best;
    if copies.is_zero() {
        // The host backend copies nothing: any amount of work shows the (absent) overlap.
        return Ok(PROBE);
    }
    let steps = PROBE as f64 * copies.as_secs_f64() / kernel.as_secs_f64().max(1e-9);
    Ok(steps.clamp(1.0, 1e6) as u32)
}
