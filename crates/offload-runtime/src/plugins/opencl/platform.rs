//! One OpenCL platform as the plugin uses it: the context its devices share and the platform's
//! USM entry points (a file of its own so that devices and events depend on it, not on the
//! plugin's root).

use crate::plugins::opencl::sys;

/// One OpenCL platform with the devices the plugin uses: their context, in which memory, programs
/// and queues live, and the platform's USM entry points.
pub(crate) struct ClPlatform {
    pub(super) library: &'static sys::Library,
    pub(super) usm: sys::Usm,
    pub(super) context: sys::Handle,
}

// SAFETY: OpenCL contexts and the entry points are usable from any thread (OpenCL 1.1 and later).
unsafe impl Send for ClPlatform {}
// SAFETY: as for `Send`.
unsafe impl Sync for ClPlatform {}

impl ClPlatform {
    pub(super) fn api(&self) -> &sys::Api {
        &self.library.api
    }
}
