//! Whether a GPU runs the kernels that need Hopper's sm_90a instructions (`mma::wgmma`,
//! `tensor_copy`), and the check of their documented failure where it does not.

use offload::{Device, Error};

/// Whether `device` should run sm_90a kernels: an sm_90a image was built and the GPU is a
/// Hopper (compute capability 9.0, the only one sm_90a code runs on).
pub fn runs_sm90a(device: &Device) -> bool {
    let built = offload_examples::__OFFLOAD_IMAGES
        .images
        .iter()
        .any(|i| i.target == "sm_90a");
    built
        && ["H100", "H200", "H800", "H20"]
            .iter()
            .any(|h| device.name().contains(h))
}

/// Checks that `run` failed as documented where there is no sm_90a code: a panic in the fallback
/// of `mma::wgmma` or `tensor_copy` (a GPU reports where a thread panicked; that line says what
/// to build for).
pub fn failed_as_documented(kernel: &str, run: offload::Result<()>) {
    let e = run.expect_err("no sm_90a image for this GPU, yet the launch succeeded");
    let text = e.to_string();
    assert!(
        matches!(e, Error::KernelFailed { .. })
            && ["mma/wgmma.rs", "src/tensor_copy.rs", "sm_90a"]
                .iter()
                .any(|w| text.contains(w)),
        "{kernel}: not the documented failure: {text}"
    );
    eprintln!("{kernel}: no sm_90a code for this GPU; the launch failed as documented: {text}");
}
