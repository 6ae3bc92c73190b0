//! Backend plugins. A GPU backend implements [`Backend`]: memory, copies, launching an entry
//! point of a device image, its panic records, queues of its own with events (for streams) and
//! release; `transfer`, `region` and `stream` drive it, so a new plugin needs no change
//! elsewhere. `cuda` is the CUDA driver (pageable copies staged through `cuda_staging`'s pinned
//! buffers); `liboffload` is LLVM's offload runtime (NVIDIA and AMD GPUs); `mock` is an in-memory
//! GPU for the runtime's own tests. The host CPU (`host`) is the built-in fallback and runs
//! kernels in place on host memory.
//!
//! One GPU may be reachable through two plugins (an NVIDIA GPU through `cuda` and `liboffload`):
//! [`discover_all`] lists it once, through the preferred plugin, and keeps the other handle apart.

pub mod cuda;
mod cuda_staging;
pub mod host;
pub mod liboffload;
#[cfg(test)]
pub(crate) mod mock;

use crate::kernel::Kernel;
use crate::launch::{Limits, Shape};
use crate::Result;
use std::any::Any;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

/// Devices of GPU plugins.
type Handles = Vec<Arc<dyn Backend>>;

/// A plugin's discovery: its devices, or why it has none.
type Discover = fn() -> Result<Handles, String>;

/// The GPU plugins, in the order their devices are listed. A new plugin is one more entry.
/// CUDA comes first: its driver context is then set up before liboffload's CUDA plugin shares it.
const PLUGINS: &[(&str, Discover)] = &[
    ("CUDA", cuda::discover),
    ("liboffload", liboffload::discover),
];

/// What discovery found.
pub(crate) struct Discovered {
    /// Each GPU once, through its preferred plugin, in plugin order.
    pub listed: Handles,
    /// The other plugins' handles of listed GPUs.
    pub alternates: Handles,
    /// For each plugin that found no device, why.
    pub reasons: Vec<String>,
}

/// The devices of every plugin, each physical GPU listed once: through `prefer` where that
/// plugin drives it, else NVIDIA GPUs through the CUDA plugin and the others through liboffload.
pub(crate) fn discover_all(prefer: Option<BackendKind>) -> Discovered {
    let mut found = Vec::new();
    let mut reasons = Vec::new();
    for (plugin, discover) in PLUGINS {
        match discover() {
            Ok(devices) if !devices.is_empty() => found.extend(devices),
            Ok(_) => reasons.push(format!("{plugin}: the driver reports no device")),
            Err(reason) => reasons.push(format!("{plugin}: {reason}")),
        }
    }
    let (listed, alternates) = one_handle_per_gpu(found, prefer);
    Discovered {
        listed,
        alternates,
        reasons,
    }
}

/// Splits the handles of every plugin into one per physical GPU (the preferred plugin's) and the
/// rest. Two handles are one GPU when their UUIDs agree, or, where a plugin cannot tell its
/// UUID, when both are CUDA devices of the same ordinal (liboffload numbers CUDA GPUs as the
/// driver does).
fn one_handle_per_gpu(found: Handles, prefer: Option<BackendKind>) -> (Handles, Handles) {
    let preferred = |b: &Arc<dyn Backend>| match (prefer, b.platform()) {
        (Some(kind), _) if kind == b.kind() => true,
        (_, Platform::Cuda) => {
            b.kind() == BackendKind::Cuda && prefer.is_none_or(|k| k == BackendKind::Cuda)
        }
        _ => b.kind() == BackendKind::LibOffload,
    };
    let same_gpu = |a: &Arc<dyn Backend>, b: &Arc<dyn Backend>| match (a.uuid(), b.uuid()) {
        (Some(x), Some(y)) => x == y,
        _ => {
            a.platform() == Platform::Cuda
                && b.platform() == Platform::Cuda
                && a.ordinal() == b.ordinal()
        }
    };
    let mut listed: Handles = Vec::new();
    let mut alternates = Vec::new();
    for device in found {
        match listed
            .iter()
            .position(|l| l.kind() != device.kind() && same_gpu(l, &device))
        {
            Some(i) if preferred(&device) && !preferred(&listed[i]) => {
                alternates.push(std::mem::replace(&mut listed[i], device));
            }
            Some(_) => alternates.push(device),
            None => listed.push(device),
        }
    }
    (listed, alternates)
}

/// Which plugin runs a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Host,
    /// The CUDA driver, directly.
    Cuda,
    /// LLVM's offload runtime.
    LibOffload,
}

/// What kind of processor a device is, whichever plugin drives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    Host,
    /// An NVIDIA GPU.
    Cuda,
    /// An AMD GPU.
    Amdgpu,
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
    /// A by-value argument's bytes, living on the host for the duration of the launch call, and
    /// its type's alignment (where a packed parameter buffer places it).
    Value {
        ptr: *const u8,
        size: usize,
        align: usize,
    },
    /// A 64-bit word: a device pointer or a slice length.
    Word(u64),
}

/// What a GPU plugin provides. All operations are ordered on the device's queue; `synchronize`
/// waits for them.
pub trait Backend: Send + Sync + 'static {
    fn kind(&self) -> BackendKind;
    fn platform(&self) -> Platform;
    /// The GPU's UUID, where the plugin can tell it: how one GPU seen by two plugins is found.
    fn uuid(&self) -> Option<[u8; 16]>;
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

#[cfg(test)]
mod tests {
    use super::mock::MockGpu;
    use super::*;

    fn gpu(
        kind: BackendKind,
        platform: Platform,
        ordinal: usize,
        uuid: Option<u8>,
    ) -> Arc<dyn Backend> {
        let mut mock = MockGpu::new(1 << 20);
        mock.identity = (kind, platform, ordinal, uuid.map(|u| [u; 16]));
        Arc::new(mock)
    }

    /// A handle's plugin and ordinal.
    type Id = (BackendKind, usize);

    fn split(found: Handles, prefer: Option<BackendKind>) -> (Vec<Id>, Vec<Id>) {
        let ids = |h: Handles| h.iter().map(|b| (b.kind(), b.ordinal())).collect();
        let (listed, alternates) = one_handle_per_gpu(found, prefer);
        (ids(listed), ids(alternates))
    }

    /// Two NVIDIA GPUs seen by both plugins (one matched by UUID, one by ordinal where
    /// liboffload could not tell the UUID) and an AMD GPU only liboffload drives.
    fn machine() -> Handles {
        use BackendKind::{Cuda, LibOffload};
        vec![
            gpu(Cuda, Platform::Cuda, 0, Some(1)),
            gpu(Cuda, Platform::Cuda, 1, Some(2)),
            gpu(LibOffload, Platform::Cuda, 0, Some(1)),
            gpu(LibOffload, Platform::Cuda, 1, None),
            gpu(LibOffload, Platform::Amdgpu, 0, Some(3)),
        ]
    }

    #[test]
    fn each_gpu_is_listed_once_through_its_preferred_plugin() {
        use BackendKind::{Cuda, LibOffload};
        let (listed, alternates) = split(machine(), None);
        assert_eq!(listed, [(Cuda, 0), (Cuda, 1), (LibOffload, 0)]);
        assert_eq!(alternates, [(LibOffload, 0), (LibOffload, 1)]);
        let (listed, alternates) = split(machine(), Some(LibOffload));
        assert_eq!(listed, [(LibOffload, 0), (LibOffload, 1), (LibOffload, 0)]);
        assert_eq!(alternates, [(Cuda, 0), (Cuda, 1)]);
        assert_eq!(split(machine(), Some(Cuda)), split(machine(), None));
    }

    #[test]
    fn different_uuids_are_different_gpus_whatever_their_ordinals() {
        use BackendKind::{Cuda, LibOffload};
        let found = vec![
            gpu(Cuda, Platform::Cuda, 0, Some(1)),
            gpu(LibOffload, Platform::Cuda, 0, Some(2)),
        ];
        let (listed, alternates) = split(found, None);
        assert_eq!(listed, [(Cuda, 0), (LibOffload, 0)]);
        assert!(alternates.is_empty());
    }
}
