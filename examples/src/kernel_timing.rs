//! How the benchmarks time a kernel: its device time, best of several launches.

use std::time::Duration;

/// The shortest device time (`LaunchReport::kernel_time`) over `repeats` calls of `launch`,
/// each one plain launch.
pub fn best_kernel_time(
    repeats: usize,
    mut launch: impl FnMut() -> offload::Result<()>,
) -> offload::Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..repeats {
        launch()?;
        best = best.min(offload::last_launch().expect("a launch").kernel_time);
    }
    Ok(best)
}
