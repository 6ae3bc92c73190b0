//! offload-examples' saxpy built with `panic_reporting(false)`: a panicking GPU thread just
//! ends. Only for the `panic_overhead` benchmark, which compares it with the reported build.

/// offload-examples' `kernels/demo_saxpy.rs`, the same file its build script compiles.
#[path = "../../src/kernels/demo_saxpy.rs"]
pub mod kernels;

offload::embed_images!();
