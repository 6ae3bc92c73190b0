//! offload with the Rust HPC ecosystem: a conjugate-gradient solver that mixes offload's kernels
//! with cuBLAS on the same device data (`cg`), and the kernels it runs (`kernels`).

pub mod cg;
pub mod kernels;

offload::embed_images!();
