//! Runtime core of `offload`: device discovery, launch configuration, automatic data movement,
//! and the backend plugins that run kernels (the CUDA driver, and the host CPU).
//!
//! Layering: `kernel::launch` (what the generated launchers call) resolves the device and the
//! launch shape (`launch`), then hands the arguments either to the host backend, which runs the
//! kernel's host entry in place on host memory (blocks on rayon, a block's threads as coroutines:
//! `backend::host::scheduler`), or to `transfer`, which moves the data through any
//! [`backend::Backend`] plugin and launches the device image there. `stream::enqueue` does the
//! same on a stream's own queue without waiting. Around them: call-site map kinds (`map`), data
//! regions (`region`) and their reference-counted present table (`present`), device-resident
//! data (`DeviceVec`, a stream scope's `DeviceSlice`), page-locked host memory (`PinnedVec`),
//! and the transfer trace (`trace`).

pub mod backend;
mod device;
mod device_slice;
mod device_vec;
mod error;
mod image;
pub mod kernel;
mod launch;
pub mod map;
mod pinned;
mod present;
mod region;
mod report;
pub mod stream;
pub mod trace;
mod transfer;

pub use backend::{BackendKind, MemoryInfo};
pub use device::{default_device, devices, plugins_without_devices, Device};
pub use device_slice::DeviceSlice;
pub use device_vec::DeviceVec;
pub use error::{Error, Result};
pub use image::{DeviceImage, ImageFormat, ImageSet};
pub use launch::{Launch, Limits};
pub use pinned::PinnedVec;
pub use region::{region, region_on, Mapped, MappedMut, Region};
pub use report::{last_launch, LaunchReport};
pub use stream::{scope, Event, Stream, StreamScope};
