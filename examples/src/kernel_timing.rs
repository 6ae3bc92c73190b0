//! How the benchmarks time a kernel: its device time, best of several launches, measured as
//! their references are (CUDA events around the kernel alone).

use std::time::{Duration, Instant};

/// How long the benchmarks run their work before timing it: the first launches load code and
/// touch memory, and a GPU's clocks rise from idle over tens of milliseconds, so a benchmark run
/// first after a machine start timed its first launches slower than later runs did.
pub const WARM_UP: Duration = Duration::from_millis(300);

/// Calls `work` (which waits for what it starts) until `WARM_UP` has passed, at least once.
pub fn warm_up(mut work: impl FnMut() -> offload::Result<()>) -> offload::Result<()> {
    let start = Instant::now();
    loop {
        work()?;
        if start.elapsed() >= WARM_UP {
            return Ok(());
        }
    }
}

/// The last plain launch's kernel time: the device's own (`LaunchReport::device_time`, a pair
/// of events around the kernel, as torch, CuPy and the memcpy reference time theirs) where the
/// plugin has events and `offload::measure_device_time` is on, else the host's
/// (`LaunchReport::kernel_time`, submit to drained queue: a few microseconds more).
pub fn last_kernel_time() -> Duration {
    let report = offload::last_launch().expect("a launch");
    report.device_time.unwrap_or(report.kernel_time)
}

/// `work`'s result with `offload::measure_device_time` on while it runs (off again after), so
/// that [`last_kernel_time`] reads events.
pub fn with_device_time<T>(work: impl FnOnce() -> offload::Result<T>) -> offload::Result<T> {
    offload::measure_device_time(true);
    let result = work();
    offload::measure_device_time(false);
    result
}

/// The shortest kernel time ([`last_kernel_time`], with events) over `repeats` calls of
/// `launch`, each one plain launch, after `WARM_UP` of them.
pub fn best_kernel_time(
    repeats: usize,
    mut launch: impl FnMut() -> offload::Result<()>,
) -> offload::Result<Duration> {
    with_device_time(|| {
        warm_up(&mut launch)?;
        let mut best = Duration::MAX;
        for _ in 0..repeats {
            launch()?;
            best = best.min(last_kernel_time());
        }
        Ok(best)
    })
}
