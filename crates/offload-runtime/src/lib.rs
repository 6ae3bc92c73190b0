//! Runtime core of `offload`: device discovery, launch configuration, automatic data movement,
//! and the plugins that run kernels (the CUDA driver, and the host CPU).
//!
//! Layers, each using only those below it:
//! - plugins (`backend`): one [`backend::Backend`] trait, a plugin per kind of device (CUDA,
//!   the host CPU), knowing devices, memory, images, packed launches, queues and events; with the
//!   plain data they share (`image`, `error`);
//! - mapping (`device`, `loaded`, `kernel`, `transfer`, `bounce`, `present`, `ordering`, `trace`,
//!   `report`): devices and the code they loaded (with panic records), what launchers hand the
//!   runtime, the per-launch data movement, the present table and the ordering of device data
//!   across queues, once for every plugin;
//! - launch API (`launch`, `map`, `region`, `stream`, `graph`, `device_vec`, `device_view`,
//!   `device_slice`, `pinned`): launches (what the generated launchers call), map kinds, data
//!   regions, streams, recorded launches, device data.
//!
//! A launch: `launch::launch` picks the device and shape and gets the kernel's entry
//! (`device` → `loaded`), `transfer::launch` places the data and calls the plugin
//! (`backend::cuda`, `backend::host`), which launches. `stream::enqueue` does the same on a
//! stream's own queue without waiting.

#![warn(missing_docs)]

mod aliasing;
pub mod backend;
#[cfg(feature = "cublas")]
pub mod blas;
mod bounce;
mod device;
mod device_slice;
mod device_vec;
mod device_view;
mod error;
pub mod graph;
mod image;
mod independent_threads;
pub mod kernel;
pub mod launch;
mod loaded;
pub mod map;
#[cfg(test)]
mod mock_kernels;
pub mod nd;
pub mod ordering;
mod output_backup;
mod param_layout;
mod pinned;
mod prepared;
pub mod prepared_enqueue;
mod present;
mod region;
mod report;
pub mod stream;
mod stream_mode;
mod tensor_map;
pub mod trace;
mod transfer;

pub use backend::{BackendKind, Limits, MemoryInfo, NativeQueue, Platform};
pub use device::{default_device, devices, devices_of, plugins_without_devices, Device};
pub use device_slice::DeviceSlice;
pub use device_vec::DeviceVec;
pub use device_view::{DeviceView, DeviceViewMut};
pub use error::{Error, Result};
pub use graph::Graph;
pub use image::{DeviceImage, ImageFormat, ImageSet};
pub use launch::Launch;
pub use pinned::PinnedVec;
pub use region::{region, region_on, Mapped, MappedMut, Region};
pub use report::{last_launch, measure_device_time, LaunchReport};
pub use stream::{scope, Event, Stream, StreamScope};
pub use stream_mode::{Borrows, Records, Runs, StreamMode};
