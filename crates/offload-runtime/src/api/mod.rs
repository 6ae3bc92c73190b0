//! The launch API, the top of the runtime: what the generated launchers and users call.
//! Launches (`launch`: device, shape and entry checks; kept per thread in `prepared`, with
//! their parameters' layout in `param_layout`; prepared once on a stream in
//! `prepared_enqueue`), map kinds at the call site and what a launcher's parameters accept (`map`, `arg_traits`), data regions (`region`), streams
//! and what their handles do (`stream`, `stream_mode`), recorded launches (`graph`), device
//! data (`device_vec`, `device_view`, `device_slice`, `pinned`), array views as arguments
//! (`nd`), cuBLAS on device slices (`blas`) and TMA tensor maps (`tensor_map`). It uses only the
//! mapping layer and the plugins.

pub(crate) mod arg_traits;
#[cfg(feature = "cublas")]
pub mod blas;
pub(crate) mod device_slice;
pub(crate) mod device_vec;
pub(crate) mod device_view;
pub mod graph;
pub mod launch;
pub mod map;
pub mod nd;
pub(crate) mod param_layout;
pub(crate) mod pinned;
pub(crate) mod prepared;
pub mod prepared_enqueue;
pub(crate) mod region;
pub mod stream;
pub(crate) mod stream_mode;
mod tensor_map;
