//! HPC kernel shapes written once in offload (`kernels`) and once in CUDA C (`cuda/parity.cu`),
//! the inputs both get (`cases`), CPU references (`reference`), and how the benchmarks time them
//! (`timing`); compute-bound kernels built with fast math (`fast_math`, `cuda/fast_math.cu`).

pub mod cases;
pub mod fast_math;
pub mod kernels;
pub mod reference;
pub mod timing;

offload::embed_images!();
