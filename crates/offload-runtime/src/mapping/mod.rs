//! The mapping layer, once for every plugin: devices and the code each has loaded, with panic
//! records (`device`, `loaded`), what a generated launcher hands the runtime (`kernel`: kernel
//! descriptors and arguments, plain data), a launch's data movement (`transfer`, through
//! `bounce` buffers, restoring host outputs from `output_backup` on failure), the `present`
//! table, arguments sharing device memory (`aliasing`), the `ordering` of device data across
//! queues, the transfer `trace` and launch `report`s. It uses only the plugins below it.

pub(crate) mod aliasing;
pub(crate) mod bounce;
pub(crate) mod device;
pub(crate) mod independent_threads;
pub mod kernel;
pub(crate) mod loaded;
#[cfg(test)]
pub(crate) mod mock_kernels;
pub mod ordering;
pub(crate) mod output_backup;
pub(crate) mod present;
pub(crate) mod report;
pub mod trace;
pub(crate) mod transfer;
