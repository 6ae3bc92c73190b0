//! offload-examples' saxpy built with `panic_reporting(false)`: a panicking GPU thread just
//! ends. Only for the `panic_overhead` benchmark, which compares it with the reported build.

pub mod kernels;

offload::embed_images!();
