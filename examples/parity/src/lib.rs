//! HPC kernel shapes written once in offload (`kernels`) and once in CUDA C (`cuda/parity.cu`),
//! the inputs both get (`cases`), and CPU references (`reference`).

pub mod cases;
pub mod kernels;
pub mod reference;

offload::embed_images!();
