//! How long each image of a device pass took to build, printed into the build script's output
//! (`target/*/build/*/output`, and cargo's `-vv`): where a slow build's time goes. The test
//! command sums these lines per step.

use std::time::Instant;

/// Runs `build`, then prints `offload: device build <what>: <seconds> s`.
pub(crate) fn timed<R>(what: &str, build: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let result = build();
    println!(
        "offload: device build {what}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    result
}
