//! Finding the GPU for the GPU suites, which skip visibly without one.

use offload::Device;
use std::io::Write;

/// The default device when it is a GPU (the first GPU `offload::devices()` lists, through its
/// preferred plugin; the first device of the plugin `OFFLOAD_BACKEND` names, such as an OpenCL
/// CPU runtime with `OFFLOAD_BACKEND=opencl`), or `None` (after saying why) when the test must
/// be skipped.
pub fn gpu(test: &str) -> Option<Device> {
    let reason = match offload::default_device()
        .ok()
        .filter(Device::is_gpu)
        .as_ref()
    {
        Some(_) if offload_examples::__OFFLOAD_IMAGES.images.is_empty() => format!(
            "no device images were built ({})",
            offload_examples::__OFFLOAD_IMAGES
                .unavailable
                .unwrap_or("unknown reason")
        ),
        Some(device) => return Some(device.clone()),
        None => "no GPU".to_string(),
    };
    if std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("{test}: OFFLOAD_REQUIRE_GPU=1 but {reason}");
    }
    // Straight to stderr: libtest captures eprintln!, and a skip must be visible.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    None
}
