//! The LLVM liboffload plugin: GPUs through LLVM's offload runtime (`libLLVMOffload.so`, the
//! runtime under OpenMP offload), loaded at run time, so a machine without it just has no
//! devices here. liboffload 22 drives NVIDIA GPUs (CUDA) and AMD GPUs (AMDGPU, through HSA).
//!
//! Layered as cudarc is: `sys` is the raw C interface and the library's symbol table (with the
//! check of which API generation it speaks), `result` the checked calls (liboffload's error
//! message in every error), `device` the plugin behind [`Backend`], with `program` (which images
//! a device runs, loading one), `event` (queue events) and `pool` (freed device memory, freed in
//! queue order and kept for reuse). Above the plugin layer, the runtime finds and reads panic
//! records through the plugin (`olGetSymbol` for the device global).
//!
//! liboffload also lists a placeholder "Virtual Host Device" (its host platform), which serves
//! only as the host side of copies: allocating on it or creating a queue on it crashes
//! liboffload 22, so it never becomes a device here.

mod device;
mod event;
mod handle;
mod pool;
mod program;
mod result;
pub(crate) mod sys;

pub use device::LibOffloadBackend;

use crate::plugins::interface::Backend;
use std::sync::{Arc, OnceLock};

/// The library, opened and initialised once per process (it stays loaded until exit).
fn library() -> Result<&'static sys::Library, String> {
    static LIBRARY: OnceLock<Result<sys::Library, String>> = OnceLock::new();
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    let library = LIBRARY
        .get_or_init(sys::open_default)
        .as_ref()
        .map_err(Clone::clone)?;
    INIT.get_or_init(|| {
        result::Ol(&library.api)
            .init()
            .map_err(|e| format!("olInit of {} failed: {e}", library.path.display()))
    })
    .clone()?;
    Ok(library)
}

/// Every GPU liboffload lists (never its host placeholder), or why there are none to use.
pub fn discover() -> Result<Vec<Arc<dyn Backend>>, String> {
    let library = library()?;
    let found = device::open_all(result::Ol(&library.api))
        .map_err(|e| format!("{}: {e}", library.path.display()))?;
    if found.is_empty() {
        return Err(format!(
            "{} ({:?}) lists no GPU, only its host placeholder (its CUDA plugin needs libcuda.so, \
             its AMDGPU plugin libhsa-runtime64.so)",
            library.path.display(),
            library.generation
        ));
    }
    Ok(found
        .into_iter()
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .collect())
}
