//! The GPU for the ecosystem suites, which skip visibly without one.

use offload::Device;
use std::io::Write;

/// `found` if it is there and images were built; otherwise `None` after saying why (`missing`
/// when there is no such device), or a panic under `OFFLOAD_REQUIRE_GPU=1`.
pub fn gpu_or_skip(test: &str, found: Option<&Device>, missing: &str) -> Option<Device> {
    let reason = match found {
        Some(_)
            if offload_ecosystem_examples::__OFFLOAD_IMAGES
                .images
                .is_empty() =>
        {
            "no device images were built".to_string()
        }
        Some(device) => return Some(device.clone()),
        None => missing.to_string(),
    };
    if std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("{test}: OFFLOAD_REQUIRE_GPU=1 but {reason}");
    }
    // Straight to stderr: libtest captures eprintln!, and a skip must be visible.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    None
}
