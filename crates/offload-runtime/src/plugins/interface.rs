//! The plugin interface: what every plugin provides ([`Backend`], [`QueueEvent`], and where it
//! can record launches, [`RecordedWork`]) and the plain data it speaks in besides [`Code`], [`PackedArgs`], [`Shape`] and [`Limits`].

use crate::plugins::code::{Code, EntryHandle, ImageHandle};
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::packed::PackedArgs;
use crate::Result;
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

/// Which plugin runs a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The host CPU.
    Host,
    /// The CUDA driver, directly.
    Cuda,
    /// LLVM's offload runtime.
    LibOffload,
    /// An OpenCL runtime (SPIR-V images).
    OpenCl,
}

/// What kind of processor a device is, whichever plugin drives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    /// The host CPU.
    Host,
    /// An NVIDIA GPU.
    Cuda,
    /// An AMD GPU.
    Amdgpu,
    /// A device of an OpenCL runtime: an Intel GPU, or, with `OFFLOAD_BACKEND=opencl`, an OpenCL
    /// CPU runtime.
    OpenCl,
}

/// A device's memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes not in use.
    pub free: usize,
    /// Bytes in all.
    pub total: usize,
}

impl MemoryInfo {
    /// For plugins whose driver cannot say what is free: `total` less the `used` bytes the
    /// plugin itself allocated.
    pub(crate) fn less_used(total: usize, used: usize) -> MemoryInfo {
        MemoryInfo {
            free: total.saturating_sub(used),
            total,
        }
    }
}

/// An address in a device's memory (on the host CPU, a host address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

/// The vendor's own handle of a plugin's queue ([`Backend::native_queue`]), for vendor libraries
/// (cuBLAS, cuSOLVER, ...) to queue their work in order with the plugin's. The handles stay
/// valid while the queue does; they are raw driver handles, used through the vendor's API only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NativeQueue {
    /// A CUDA stream (`CUstream`) and the context it belongs to (`CUcontext`, the device's
    /// primary context): make the context current before queuing work on the stream.
    Cuda {
        /// The `CUcontext`.
        context: *mut c_void,
        /// The `CUstream`.
        stream: *mut c_void,
    },
    /// A liboffload queue (`ol_queue_handle_t`); liboffload 22 does not reveal the vendor
    /// stream beneath it.
    LibOffload {
        /// The `ol_queue_handle_t`.
        queue: *mut c_void,
    },
    /// An in-order OpenCL command queue (`cl_command_queue`).
    OpenCl {
        /// The `cl_command_queue`.
        queue: *mut c_void,
    },
}

// SAFETY: all are driver handles, valid on any thread of the process (the CUDA driver,
// liboffload and OpenCL are thread-safe); the enum only carries them.
unsafe impl Send for NativeQueue {}
// SAFETY: as for `Send`: nothing is reached through a shared `NativeQueue`.
unsafe impl Sync for NativeQueue {}

/// The outputs of a launch whose kernel writes them in place (host memory): what is saved of
/// them before the kernel writes it is put back if the launch fails.
pub trait SavedOutputs: Sync {
    /// Save every output whole (replacing what was saved).
    fn save_all(&self);

    /// Save the bytes `address..address + bytes` of an output; bytes outside every output are
    /// not saved (they are not the launch's outputs). Tasks may save disjoint ranges at once.
    ///
    /// # Safety
    /// The range was not saved before and is not being written, and nothing saves or writes it
    /// during this call.
    unsafe fn save(&self, address: usize, bytes: usize);

    /// Put back every saved byte. The kernel is not running.
    fn restore(&self);
}

/// One device of a plugin, or one queue of it ([`Backend::new_queue`]). Operations are ordered on
/// the queue; `synchronize` waits for them. Every operation of a released device
/// ([`Backend::release`]) is `Err(Released)`, except the frees.
///
/// Errors: a failed driver call is `Error::Driver` with the driver's message; the layer above
/// turns those of `load_image` and `find_entry` into `NoImage`, those of `launch` and
/// `synchronize` into `KernelFailed`, naming the kernel.
pub trait Backend: Send + Sync + 'static {
    // --- The device.
    /// The plugin.
    fn kind(&self) -> BackendKind;
    /// What the hardware is, whichever plugin drives it.
    fn platform(&self) -> Platform;
    /// The GPU's UUID, where the plugin can tell it: how one GPU seen by two plugins is found.
    fn uuid(&self) -> Option<[u8; 16]>;
    /// The name users see, unique among the process's devices.
    fn name(&self) -> &str;
    /// Index among the devices of this plugin, in the vendor's numbering.
    fn ordinal(&self) -> usize;
    /// What it accepts as a launch shape.
    fn limits(&self) -> Limits;
    /// Whether its memory is the host's: device addresses are host addresses, so kernels read
    /// host data in place and the layer above copies nothing in (the host CPU).
    fn memory_is_host(&self) -> bool;
    /// Free and total device memory, as the driver reports them now.
    fn memory_info(&self) -> Result<MemoryInfo>;

    // --- Memory.
    /// Device memory for `bytes` (> 0) bytes, aligned to 256 bytes. `Err(OutOfMemory)` naming
    /// `requester` (what the memory is for) when it does not fit.
    fn alloc(&self, requester: &'static str, bytes: usize) -> Result<DevicePtr>;

    /// Release memory from `alloc`, once the queued work that uses it is done.
    ///
    /// # Safety
    /// `ptr` came from `alloc` of this device and is not used afterwards.
    unsafe fn free(&self, ptr: DevicePtr);

    /// Copy `bytes` host bytes at `src` to `dst`, ordered after the queued work. From pageable
    /// memory the bytes are taken before it returns; from page-locked memory (`alloc_pinned`)
    /// the copy is only queued, and reads `src` until the queue has synchronized.
    ///
    /// # Safety
    /// `src..src+bytes` is readable, stays unchanged until `synchronize` returns, and `dst` holds
    /// at least `bytes` bytes.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()>;

    /// Queue a copy of `bytes` device bytes at `src` to host memory at `dst`, after the queued
    /// work; complete once `synchronize` returns.
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

    /// Page-locked host memory for `bytes` (> 0) bytes, page aligned, which copies on any queue
    /// of any device of this plugin read and write without staging (so they run asynchronously).
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8>;

    /// Release memory from `alloc_pinned`.
    ///
    /// # Safety
    /// `ptr` came from this plugin's `alloc_pinned`, no queued copy uses it, and it is not used
    /// afterwards.
    unsafe fn free_pinned(&self, ptr: *mut u8);

    /// The address at which kernels on this device reach `ptr`, memory from `alloc_pinned`;
    /// `None` when they cannot.
    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr>;

    // --- Code.
    /// How well this device runs `code`: `None` when it cannot load it, else a rank, higher for
    /// better code (machine code for exactly this device over code its driver compiles).
    fn code_rank(&self, code: &Code<'_>) -> Option<u32>;
    /// What code this device needs, for messages when no code fits (`"sm_90"`).
    fn target(&self) -> String;
    /// Load `code` (one with a rank) for every queue of the device; it stays loaded until
    /// `release`. `Err(Driver)` with the driver's message when the driver rejects it.
    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle>;
    /// The kernel entry `name` of a loaded image; `Err(Driver)` when it has none.
    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle>;
    /// What an entry can be launched with.
    fn entry_limits(&self, entry: EntryHandle) -> Result<EntryLimits>;
    /// How many blocks of `entry`, of `threads` threads and `dynamic_shared` bytes each, one
    /// multiprocessor runs at once, its registers and shared memory counted; `None` where the
    /// driver cannot say.
    fn resident_blocks(
        &self,
        _entry: EntryHandle,
        _threads: u32,
        _dynamic_shared: u32,
    ) -> Result<Option<u32>> {
        Ok(None)
    }
    /// The device global `name` of a loaded image, with its size in bytes; `None` if it has none.
    fn find_global(&self, image: ImageHandle, name: &str) -> Result<Option<(DevicePtr, usize)>>;

    // --- Launches and queues.
    /// Queue `entry` in `shape` with `args`. The parameter bytes are taken before it returns.
    ///
    /// # Safety
    /// `entry` came from `find_entry` of this device, and `args` are its parameters as its
    /// kernel's launcher packs them: every address in them holds what the kernel reaches through
    /// it, until the launch has completed.
    unsafe fn launch(&self, entry: EntryHandle, shape: Shape, args: &PackedArgs) -> Result<()>;

    /// As [`launch`](Self::launch), for a launch on host memory whose kernel writes its
    /// outputs in place: the plugin saves them through `outputs` before they are written (all
    /// at once, or run by run as the kernel's threads reach them), and may put them back and run
    /// the kernel again another way when the faster way turns out not to fit it partway. The
    /// host CPU plugin does so; others save everything and just launch.
    ///
    /// # Safety
    /// As `launch`.
    unsafe fn launch_restartable(
        &self,
        entry: EntryHandle,
        shape: Shape,
        args: &PackedArgs,
        outputs: &dyn SavedOutputs,
    ) -> Result<()> {
        outputs.save_all();
        // SAFETY: the caller keeps `launch`'s contract.
        unsafe { self.launch(entry, shape, args) }
    }

    /// Wait for all queued work; a kernel fault surfaces here.
    fn synchronize(&self) -> Result<()>;

    /// Wait for every queue of the device, unload every image and free what the plugin holds for
    /// them; from then on every operation is `Err(Released)`. Memory from `alloc` and
    /// `alloc_pinned` stays valid to free.
    fn release(&self) -> Result<()>;

    /// The same device with a queue of its own (a CUDA stream): every operation of the returned
    /// backend is ordered on that queue only, so work on two queues may overlap. Images loaded
    /// through any queue of the device serve all of them.
    fn new_queue(&self) -> Result<Arc<dyn Backend>>;

    /// The vendor's handle of this queue, for vendor libraries; `None` where there is none (the
    /// host CPU).
    fn native_queue(&self) -> Option<NativeQueue>;

    /// A mark after the work queued so far, for other queues of the device to wait on and for
    /// timing.
    fn record_event(&self) -> Result<Box<dyn QueueEvent>>;

    /// Make the work queued from now on wait until `event`, recorded on a queue of this device,
    /// has completed.
    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()>;

    /// Make the work queued from now on wait for the work queued so far on `other`, a queue of
    /// this device. A plugin may keep one event per queue for it (re-recorded each time: a wait
    /// already queued keeps the point it was queued for), instead of making one per call.
    fn wait_for(&self, other: &dyn Backend) -> Result<()> {
        self.wait_event(&*other.record_event()?)
    }

    // --- Recording (optional).
    /// The 16 words of a 2D tiled tensor map of `layout` over device memory at `address`, for
    /// the device's bulk tensor copies; `Ok(None)`, the default, when the plugin has no copy
    /// engine to describe it to.
    fn encode_tensor_map_2d(
        &self,
        _address: DevicePtr,
        _layout: &offload_kernel::tensor_copy::TiledLayout,
    ) -> Result<Option<[u64; 16]>> {
        Ok(None)
    }

    /// Start recording the launches queued on this queue from now on instead of running them,
    /// until `end_recording` (a CUDA stream capture). `Ok(false)`, the default, when the plugin
    /// cannot record: the layer above then keeps the launches itself and replays them one by
    /// one. Only launches are queued while recording.
    fn begin_recording(&self) -> Result<bool> {
        Ok(false)
    }

    /// End the recording `begin_recording` started, returning the recorded launches, ready to
    /// replay on this queue. Called once after every `begin_recording` that returned `true`,
    /// whatever happened in between.
    fn end_recording(&self) -> Result<Box<dyn RecordedWork>> {
        Err(crate::Error::Driver {
            device: self.name().to_string(),
            operation: "ending a recording",
            message: "this plugin does not record launches".to_string(),
        })
    }
}

/// Launches recorded by [`Backend::begin_recording`] / [`Backend::end_recording`] (a CUDA
/// graph), bound to the queue that recorded them. Dropping it waits for that queue.
pub trait RecordedWork: Send + Sync {
    /// Queue every recorded launch again, in the recorded order, on the recording queue.
    ///
    /// # Safety
    /// Everything the recorded launches reach through their parameters still holds what the
    /// kernels use, until the replay has completed.
    unsafe fn replay(&self) -> Result<()>;
}

/// A point in a queue, recorded by [`Backend::record_event`].
pub trait QueueEvent: Send + Sync {
    /// Wait until the work before the event has completed.
    fn synchronize(&self) -> Result<()>;
    /// Time from `start` (an earlier event of the same device) to this one; waits for both.
    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration>;
    /// For the plugin to find its own event type.
    fn as_any(&self) -> &dyn Any;
}
