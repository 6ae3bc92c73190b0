//! Backend plugins. A GPU backend implements [`Backend`]: memory, copies, launching an entry
//! point of a device image, its panic records, queues of its own with events (for streams) and
//! release; `transfer`, `region` and `stream` drive it, so a new plugin (LLVM liboffload, AMD)
//! needs no change elsewhere. `cuda` is the CUDA driver (pageable copies staged through
//! `cuda_staging`'s pinned buffers); `mock` is an in-memory GPU for the runtime's own tests. The
//! host CPU (`host`) is the built-in fallback and runs kernels in place on host memory.

pub mod cuda;
mod cuda_staging;
pub mod host;
#[cfg(test)]
pub(crate) mod mock;

use crate::kernel::Kernel;
use crate::launch::{Limits, Shape};
use crate::Result;
use std::any::Any;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

/// A plugin's discovery: its devices, or why it has none.
type Discover = fn() -> Result<Vec<Arc<dyn Backend>>, String>;

/// The GPU plugins, in the order their devices are listed. A new plugin is one more entry.
const PLUGINS: &[(&str, Discover)] = &[("CUDA", cuda::discover)];

/// The devices of every plugin, and for each plugin that found none, why.
pub(crate) fn discover_all() -> (Vec<Arc<dyn Backend>>, Vec<String>) {
    let mut devices = Vec::new();
    let mut reasons = Vec::new();
    for (plugin, discover) in PLUGINS {
        match discover() {
            Ok(found) if !found.is_empty() => devices.extend(found),
            Ok(_) => reasons.push(format!("{plugin}: the driver reports no device")),
            Err(reason) => reasons.push(format!("{plugin}: {reason}")),
        }
    }
    (devices, reasons)
}

/// Which plugin runs a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Host,
    Cuda,
}

/// A device's memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    pub free: usize,
    pub total: usize,
}

/// An address in a device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

/// One kernel parameter in the device ABI.
#[derive(Clone, Copy, Debug)]
pub enum Param {
    /// A by-value argument's bytes, living on the host for the duration of the launch call.
    Value { ptr: *const u8, size: usize },
    /// A 64-bit word: a device pointer or a slice length.
    Word(u64),
}

/// What a GPU plugin provides. All operations are ordered on the device's queue; `synchronize`
/// waits for them.
pub trait Backend: Send + Sync + 'static {
    fn kind(&self) -> BackendKind;
    fn name(&self) -> &str;
    /// Index among the devices of this backend, in the vendor's numbering.
    fn ordinal(&self) -> usize;
    fn limits(&self) -> Limits;

    /// Free and total device memory, as the driver reports them now.
    fn memory_info(&self) -> Result<MemoryInfo>;

    /// Device memory for `bytes` (> 0) bytes. `Err(OutOfMemory)` when it does not fit.
    fn alloc(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr>;

    /// Release memory from `alloc`, once the queued work that uses it is done.
    ///
    /// # Safety
    /// `ptr` came from this backend's `alloc` and is not used afterwards.
    unsafe fn free(&self, ptr: DevicePtr);

    /// Copy `bytes` host bytes at `src` to `dst`, ordered after the queued work. From pageable
    /// memory the bytes are taken before it returns; from page-locked memory (`PinnedVec`) the
    /// copy is only queued, and reads `src` until the queue has synchronized.
    ///
    /// # Safety
    /// `src..src+bytes` is readable, stays unchanged until `synchronize` returns, and `dst` holds
    /// at least `bytes` bytes.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()>;

    /// Queue a copy of `bytes` device bytes at `src` to host memory at `dst`, after the queued
    /// work; complete once `synchronize` returns (the CUDA plugin completes copies to pageable
    /// memory on return, through its pinned staging buffers).
    ///
    /// # Safety
    /// `dst..dst+bytes` stays writable and otherwise unused until `synchronize` returns, and
    /// `src` holds at least `bytes` bytes.
    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()>;

    /// Queue setting `bytes` bytes at `dst` to zero.
    ///
    /// # Safety
    /// `dst` holds at least `bytes` bytes.
    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()>;

    /// Queue `kernel`'s entry point from its crate's device images with these parameters.
    fn launch(&self, kernel: &Kernel, shape: Shape, params: &[Param]) -> Result<()>;

    /// Wait for all queued work; a kernel fault surfaces here.
    fn synchronize(&self) -> Result<()>;

    /// Once a launch of `kernel` has completed (`synchronize` returned): whether a thread of it
    /// panicked, as a message naming where. Taking it re-arms the report for the next launch.
    /// `Ok(None)` also for images that cannot report panics. Called after every launch, so the
    /// no-panic answer must be cheap.
    fn take_panic(&self, kernel: &Kernel) -> Result<Option<String>>;

    /// Wait for the queue, unload every image and free what the plugin holds for them; from then
    /// on every operation is `Err(Released)`. Memory from `alloc` stays valid to `free`.
    fn release(&self) -> Result<()>;

    /// Held by the caller from `launch` until `take_panic` returned, so that when several host
    /// threads launch on one device, a panic is reported to the launch that caused it. One lock
    /// for all queues of a device: streams take it to read panic records.
    fn launch_lock(&self) -> MutexGuard<'_, ()>;

    /// The same device with a queue of its own (a CUDA stream): every operation of the returned
    /// backend is ordered on that queue only, so work on two queues may overlap.
    fn new_queue(&self) -> Result<Arc<dyn Backend>>;

    /// A mark after the work queued so far, for other queues to wait on and for timing.
    fn record_event(&self) -> Result<Box<dyn QueueEvent>>;

    /// Make the work queued from now on wait until `event` (of this device) has completed.
    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()>;

    /// Page-locked host memory for `bytes` (> 0) bytes, which copies on any queue of any device
    /// of this backend read and write without staging (so they run asynchronously).
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8>;

    /// Release memory from `alloc_pinned`.
    ///
    /// # Safety
    /// `ptr` came from this backend's `alloc_pinned`, no queued copy uses it, and it is not used
    /// afterwards.
    unsafe fn free_pinned(&self, ptr: *mut u8);
}

/// A point in a queue, recorded by [`Backend::record_event`].
pub trait QueueEvent: Send + Sync {
    /// Wait until the work before the event has completed.
    fn synchronize(&self) -> Result<()>;
    /// Device time from `start` (an earlier event of the same device) to this one; waits for both.
    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration>;
    /// For the backend to find its own event type.
    fn as_any(&self) -> &dyn Any;
}
