//! Runtime core of `offload`: device discovery, launch configuration, automatic data movement,
//! and the plugins that run kernels (the CUDA driver, liboffload, OpenCL, and the host CPU).
//!
//! Three layers, a folder each, each using only those below it:
//! - [`plugins`]: one [`plugins::Backend`] trait, a plugin per kind of device (CUDA,
//!   liboffload, OpenCL, the host CPU), knowing devices, memory, images, packed launches, queues
//!   and events; with the plain data they share (`image`, `error`);
//! - `mapping`: once for every plugin, devices and the code they loaded (with panic records),
//!   what launchers hand the runtime ([`kernel`]), the per-launch data movement, the present
//!   table and the [`ordering`] of device data across queues, the [`trace`] and launch reports;
//! - `api`, the launch API: launches (what the generated launchers call, [`launch`],
//!   [`prepared_enqueue`]), [`map`] kinds, data regions, [`stream`]s, recorded launches
//!   ([`graph`]), device data, array views as arguments ([`nd`]).
//!
//! A launch: `launch::launch` picks the device and shape and gets the kernel's entry
//! (`mapping::device` → `mapping::loaded`), `mapping::transfer::launch` places the data and calls
//! the plugin (`plugins::cuda`, `plugins::host`, …), which launches. `stream::enqueue` does the
//! same on a stream's own queue without waiting.

#![warn(missing_docs)]

mod api;
mod mapping;
pub mod plugins;

#[cfg(feature = "cublas")]
pub use api::blas;
pub use api::{graph, launch, map, nd, prepared_enqueue, stream};
pub use mapping::{kernel, ordering, trace};

pub use api::device_slice::DeviceSlice;
pub use api::device_vec::DeviceVec;
pub use api::device_view::{DeviceView, DeviceViewMut};
pub use api::graph::Graph;
pub use api::launch::Launch;
pub use api::pinned::PinnedVec;
pub use api::region::{region, region_on, Mapped, MappedMut, Region};
pub use api::stream::{scope, Event, Stream, StreamScope};
pub use api::stream_mode::{Borrows, Records, Runs, StreamMode};
pub use mapping::device::{default_device, devices, devices_of, plugins_without_devices, Device};
pub use mapping::report::{last_launch, measure_device_time, LaunchReport};
pub use plugins::error::{Error, Result};
pub use plugins::image::{DeviceImage, ImageFormat, ImageSet};
pub use plugins::{BackendKind, Limits, MemoryInfo, NativeQueue, Platform};
