//! offload-examples' saxpy (the same file), built here with panic reporting off.
#[path = "../../src/kernels/demo_saxpy.rs"]
mod demo_saxpy;
pub use demo_saxpy::*;
