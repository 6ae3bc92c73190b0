//! The check of the documented failure of the kernels that need Hopper's sm_90a instructions
//! (`mma::wgmma`, `tensor_copy`) where a GPU does not run them (`tensor_launch::runs_sm90a`).

use offload::Error;

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
