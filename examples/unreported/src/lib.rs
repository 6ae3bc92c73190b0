//! offload-examples' kernels, built with `panic_reporting(false)`: a panicking GPU thread just
//! ends. Only for the `panic_overhead` benchmark, which compares them with the reported build.

#[path = "../../src/kernels.rs"]
pub mod kernels;

offload::embed_images!();
