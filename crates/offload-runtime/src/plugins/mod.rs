//! The plugin layer, the bottom of the runtime. A plugin drives one kind of device through the
//! [`Backend`] trait: its memory (device and page-locked host memory), the code it loads (images,
//! their kernel entries and device globals), launches with a packed parameter buffer, queues and
//! events. Plugins know nothing of the layers above: no kernels' Rust types, no data mapping, no
//! panic reporting; what they need arrives as plain data ([`Code`], [`PackedArgs`], [`Shape`],
//! addresses and sizes). As in LLVM offload's plugins-nextgen, the logic every device shares (the
//! present table, transfers, image caching, panic records) lives once above them.
//!
//! The plugins, each registered once in [`PLUGINS`]: `cuda` (the driver API, loaded at run time;
//! pageable copies staged through `cuda_staging`'s pinned buffers, launches recorded as CUDA
//! graphs by `cuda_graph`), `liboffload` (LLVM's offload
//! runtime, loaded at run time: NVIDIA and AMD GPUs), `opencl` (an OpenCL runtime's SPIR-V devices,
//! loaded at run time: Intel GPUs, and Intel's OpenCL CPU runtime when asked for) and `host` (the host CPU: its memory is host
//! memory, and it runs each kernel's host build, blocks on rayon, a block's threads as
//! coroutines). `mock` is an in-memory GPU for the runtime's own tests.
//!
//! One GPU may be reachable through two plugins (an NVIDIA GPU through `cuda` and `liboffload`):
//! `discover_all` lists it once, through the preferred plugin, and keeps the other handle apart.

mod code;
pub mod cuda;
mod cuda_graph;
mod cuda_staging;
mod cuda_tensor_map;
pub(crate) mod error;
pub mod host;
pub(crate) mod image;
mod interface;
pub mod liboffload;
mod limits;
#[cfg(test)]
pub(crate) mod mock;
pub mod opencl;
mod packed;
mod registry;

pub use code::{Code, EntryHandle, HostThread, HostThreads, ImageHandle};
pub use interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent, RecordedWork,
    SavedOutputs,
};
pub use limits::{EntryLimits, Limits, Shape};
pub use packed::{PackedArgs, Param};
pub(crate) use registry::discover_all;
pub use registry::{Discover, Plugin, PLUGINS};
