//! offload with the Rust HPC ecosystem: a conjugate-gradient solver on every device with
//! offload's `#[reduce]` kernels, and its variant that mixes offload's kernels with cuBLAS on
//! the same device data (feature `cublas`) (`cg`); the kernels they run and kernels on ndarray
//! views (`kernels`).

pub mod cg;
pub mod kernels;

offload::embed_images!();
