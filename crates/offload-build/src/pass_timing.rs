//! How long each image of a device pass took to build, printed into the build script's output
//! (`target/*/build/*/output`, and cargo's `-vv`): where a slow build's time goes. The test
//! command sums these lines per step.

use std::time::Instant;

/// Prints `offload: device build <what>: <seconds> s` when dropped, the seconds since
/// [`start`].
pub(crate) struct PassTimer<'a> {
    what: &'a str,
    started: Instant,
}

/// Times the image `what` until the returned timer goes out of scope.
pub(crate) fn start(what: &str) -> PassTimer<'_> {
    PassTimer {
        what,
        started: Instant::now(),
    }
}

impl Drop for PassTimer<'_> {
    fn drop(&mut self) {
        println!(
            "offload: device build {}: {:.1} s",
            self.what,
            self.started.elapsed().as_secs_f64()
        );
    }
}
