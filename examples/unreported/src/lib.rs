//! offload-examples' kernels, built with `panic_reporting(false)`: a panicking GPU thread just
//! ends. Only for the `panic_overhead` benchmark, which compares them with the reported build.

// An inline module placed at offload-examples' src/, so that `kernels.rs` finds its submodules in
// `kernels/` as it does there.
#[path = "../../src"]
mod examples_src {
    pub mod kernels;
}
pub use examples_src::kernels;

offload::embed_images!();
