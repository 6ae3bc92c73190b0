//! Kernels shared by the demo and the tests, and their plain-CPU references.

pub mod jacobi;
pub mod kernels;
pub mod overlap;
pub mod reference;
pub mod reference_bandwidth;

offload::embed_images!();
