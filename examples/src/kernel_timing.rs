//! How the benchmarks time a kernel: its device time, best of several launches.

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

/// The shortest device time (`LaunchReport::kernel_time`) over `repeats` calls of `launch`,
/// each one plain launch, after `WARM_UP` of them.
pub fn best_kernel_time(
    repeats: usize,
    mut launch: impl FnMut() -> offload::Result<()>,
) -> offload::Result<Duration> {
    warm_up(&mut launch)?;
    let mut best = Duration::MAX;
    for _ in 0..repeats {
        launch()?;
        best = best.min(offload::last_launch().expect("a launch").kernel_time);
    }
    Ok(best)
}
