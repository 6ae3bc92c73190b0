//! Kernels shared by the demo and the tests, and their plain-CPU references.

pub mod compaction;
pub mod jacobi;
pub mod kernel_timing;
pub mod kernels;
pub mod mapped_copies;
pub mod overlap;
pub mod reference;
pub mod reference_bandwidth;
pub mod reference_gemm;
pub mod reference_launch;
pub mod reference_torch;
pub mod stencil_tma_launch;
pub mod stream_timing;
pub mod tensor_launch;

offload::embed_images!();
