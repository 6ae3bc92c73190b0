//! The OpenCL plugin: devices of an OpenCL 3.0 runtime that take SPIR-V 1.4 and have Intel's
//! unified shared memory (`cl_intel_unified_shared_memory`): Intel GPUs, and Intel's OpenCL
//! CPU runtime, which stands in for one in CI. The ICD loader (`libOpenCL.so.1`) is loaded at run
//! time, so a machine without it just has no devices here.
//!
//! `sys` is the raw C interface (the loader's entry points and each platform's USM ones),
//! `program` which images a device runs and building one (`clCreateProgramWithIL`),
//! `program_cache` the built programs kept on disk between processes, `device`
//! the plugin behind [`Backend`] (USM device memory, blocking copies, in-order queues, launches
//! from the packed parameters), `event` queue events. No launch recording: graphs replay their
//! launches one by one above the plugin.
//!
//! CPU devices are offered only when `OFFLOAD_BACKEND=opencl` asks for this plugin: an OpenCL
//! CPU runtime never becomes the default device in place of the host backend or a GPU.

mod device;
mod event;
mod platform;
mod program;
mod program_cache;
mod sys;

pub use device::OpenClBackend;

use crate::plugins::interface::Backend;
use std::sync::{Arc, OnceLock};

/// The ICD loader, opened once per process.
fn library() -> Result<&'static sys::Library, String> {
    static LIBRARY: OnceLock<Result<sys::Library, String>> = OnceLock::new();
    LIBRARY
        .get_or_init(sys::Library::open)
        .as_ref()
        .map_err(Clone::clone)
}

/// Whether `OFFLOAD_BACKEND` names this plugin: only then are CPU devices offered.
fn asked_for() -> bool {
    std::env::var("OFFLOAD_BACKEND").is_ok_and(|v| v.eq_ignore_ascii_case("opencl"))
}

/// Every device that takes SPIR-V 1.4 and has USM (CPU devices only with
/// `OFFLOAD_BACKEND=opencl`), or why there are none.
pub fn discover() -> Result<Vec<Arc<dyn Backend>>, String> {
    let library = library()?;
    // SAFETY: the loader's calls with out-pointers to locals of the right sizes.
    let (found, skipped) = unsafe { device::open_all(library, asked_for()) };
    if found.is_empty() {
        return Err(if skipped.is_empty() {
            "the ICD loader lists no device (point OCL_ICD_VENDORS at a driver)".to_string()
        } else {
            skipped.join("; ")
        });
    }
    Ok(found
        .into_iter()
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .collect())
}
