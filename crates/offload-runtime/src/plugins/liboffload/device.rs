//! The plugin glue: one liboffload GPU behind [`Backend`], each instance with a queue of its own.

use crate::plugins::code::{interned, Code, EntryHandle, ImageHandle};
use crate::plugins::interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent,
};
use crate::plugins::liboffload::event::OlEvent;
use crate::plugins::liboffload::handle::Handle;
use crate::plugins::liboffload::pool::Pool;
use crate::plugins::liboffload::program::{self, Gpu};
use crate::plugins::liboffload::result::{Ol, OlError};
use crate::plugins::liboffload::sys;
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::packed::PackedArgs;
use crate::{Error, Result};
use offload_kernel::Dim3;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A liboffload GPU with a queue of its own; [`Backend::new_queue`] gives more.
pub struct LibOffloadBackend {
    shared: Arc<Shared>,
    queue: Handle<sys::ol_queue_impl_t>,
}

/// What all queues of a device share.
struct Shared {
    ol: Ol,
    device: Handle<sys::ol_device_impl_t>,
    /// liboffload's host placeholder: the host side of copies, nothing else.
    host: Handle<sys::ol_device_impl_t>,
    name: String,
    /// Which GPU it is, for choosing images.
    gpu: Gpu,
    ordinal: usize,
    uuid: Option<[u8; 16]>,
    limits: Limits,
    total_memory: usize,
    /// Device allocations not yet given back (in use or kept by `pool`) and their sizes
    /// (liboffload 22 has no free-memory query).
    allocations: Mutex<HashMap<u64, usize>>,
    /// Freed device memory kept for reuse (see `pool`).
    pool: Pool,
    /// Every image loaded, for `release` to unload.
    programs: Mutex<Vec<Handle<sys::ol_program_impl_t>>>,
    /// Kernel entries found, by symbol: their names, for launch errors.
    entries: Mutex<HashMap<u64, &'static str>>,
    released: AtomicBool,
    /// Every live queue of the device, for `release` to drain.
    queues: Mutex<Vec<Handle<sys::ol_queue_impl_t>>>,
}

/// Opens every GPU liboffload lists, skipping its host placeholder (which only serves as the
/// host side of copies).
pub fn open_all(ol: Ol) -> std::result::Result<Vec<LibOffloadBackend>, String> {
    let failed = |what: &str, e: OlError| format!("{what} failed: {e}");
    let devices = ol.devices().map_err(|e| failed("olIterateDevices", e))?;
    let mut host = None;
    let mut gpus = Vec::new();
    for device in devices {
        // SAFETY: a handle liboffload just listed; the platform is safe to ask of every device.
        let backend = unsafe { ol.platform_backend(device) }
            .map_err(|e| failed("asking a device's platform", e))?;
        match backend {
            sys::OL_PLATFORM_BACKEND_HOST => host = Some(device),
            sys::OL_PLATFORM_BACKEND_CUDA => gpus.push((device, Platform::Cuda)),
            sys::OL_PLATFORM_BACKEND_AMDGPU => gpus.push((device, Platform::Amdgpu)),
            other => tracing::debug!(
                backend = other,
                "liboffload device of an unknown platform skipped"
            ),
        }
    }
    if gpus.is_empty() {
        return Ok(Vec::new());
    }
    let host = host.ok_or("liboffload lists GPUs but no host device, which copies need")?;
    let mut opened = Vec::new();
    for (device, platform) in gpus {
        let ordinal = opened
            .iter()
            .filter(|b: &&LibOffloadBackend| b.shared.gpu.platform() == platform)
            .count();
        // SAFETY: live handles liboffload listed; `device` is a GPU of `platform`.
        let backend = unsafe { LibOffloadBackend::open(ol, device, host, platform, ordinal) }
            .map_err(|e| failed("opening a liboffload GPU", e))?;
        opened.push(backend);
    }
    Ok(opened)
}

impl LibOffloadBackend {
    /// # Safety
    /// `device` is a live GPU handle of `platform` and `host` liboffload's host placeholder.
    unsafe fn open(
        ol: Ol,
        device: sys::ol_device_handle_t,
        host: sys::ol_device_handle_t,
        platform: Platform,
        ordinal: usize,
    ) -> std::result::Result<Self, OlError> {
        // SAFETY: `device` is a live GPU handle; each property has the type `OffloadAPI.h`
        // gives it.
        let (name, product, version, uid, total_memory, limits) = unsafe {
            (
                ol.device_info_string(device, sys::OL_DEVICE_INFO_NAME)?,
                ol.device_info_string(device, sys::OL_DEVICE_INFO_PRODUCT_NAME),
                ol.platform_version(device).unwrap_or_default(),
                ol.device_info_string(device, sys::OL_DEVICE_INFO_UID),
                ol.device_info::<u64>(device, sys::OL_DEVICE_INFO_GLOBAL_MEM_SIZE)? as usize,
                limits(ol, device)?,
            )
        };
        let uuid = uid.ok().and_then(|uid| uuid_of(&uid));
        let (gpu, name) = match platform {
            // liboffload names an AMD GPU by its architecture (the HSA agent's name, `gfx942`);
            // the product name says which GPU it is.
            Platform::Amdgpu => (
                Gpu::Amdgpu { arch: name.clone() },
                format!(
                    "{} ({name}, liboffload AMDGPU device {ordinal})",
                    product.unwrap_or_else(|_| "AMD GPU".to_string())
                ),
            ),
            _ => (
                Gpu::Cuda,
                format!("{name} (liboffload CUDA device {ordinal})"),
            ),
        };
        tracing::debug!(device = %name, api = %version, ?limits, "liboffload device");
        // SAFETY: a GPU device handle, never the host placeholder.
        let queue = unsafe { ol.create_queue(device) }?;
        Ok(LibOffloadBackend {
            shared: Arc::new(Shared {
                ol,
                device: Handle(device),
                host: Handle(host),
                name,
                gpu,
                ordinal,
                uuid,
                limits,
                total_memory,
                allocations: Mutex::new(HashMap::new()),
                pool: Pool::default(),
                programs: Mutex::new(Vec::new()),
                entries: Mutex::new(HashMap::new()),
                released: AtomicBool::new(false),
                queues: Mutex::new(vec![Handle(queue)]),
            }),
            queue: Handle(queue),
        })
    }

    fn ol(&self) -> Ol {
        self.shared.ol
    }

    fn device(&self) -> sys::ol_device_handle_t {
        self.shared.device.0
    }

    fn host(&self) -> sys::ol_device_handle_t {
        self.shared.host.0
    }

    /// The gate of every operation that runs something: a released device says so.
    fn live(&self) -> Result<()> {
        if self.shared.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.shared.name.clone(),
            });
        }
        Ok(())
    }

    fn failed(&self, operation: &'static str) -> impl Fn(OlError) -> Error + '_ {
        move |e| Error::Driver {
            device: self.shared.name.clone(),
            operation,
            message: e.to_string(),
        }
    }

    fn allocations(&self) -> MutexGuard<'_, HashMap<u64, usize>> {
        self.shared
            .allocations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Gives the pool's kept blocks back to the device.
    fn trim_pool(&self) {
        // SAFETY: the device is open.
        let returned = unsafe { self.shared.pool.trim(self.ol()) };
        let mut allocations = self.allocations();
        for (ptr, _) in returned {
            allocations.remove(&ptr);
        }
    }

    /// What a refused launch means: a block the kernel cannot run with, too much shared memory,
    /// else liboffload's message. liboffload 22 reports neither a kernel's register count nor its
    /// static shared memory, so these are found by the driver refusing the launch.
    fn launch_error(&self, entry: EntryHandle, shape: Shape, error: OlError) -> Error {
        let kernel = self
            .shared
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&entry.0)
            .copied();
        let invalid = |reason: String| match kernel {
            Some(kernel) => Error::InvalidLaunch {
                kernel,
                device: self.shared.name.clone(),
                reason,
            },
            None => self.failed("launching a kernel")(error.clone()),
        };
        if error.message.contains("too many resources") {
            // SAFETY: the device and the entry's program are live.
            let picked = unsafe {
                self.ol().optimal_group_size(
                    self.device(),
                    entry.0 as sys::ol_symbol_handle_t,
                    shape.dynamic_shared as usize,
                )
            };
            let picked = picked
                .map(|n| format!("; its occupancy calculation picks blocks of {n}"))
                .unwrap_or_default();
            return invalid(format!(
                "{} threads per block are more than this kernel can run with (liboffload: {}{picked})",
                shape.block.count(),
                error.message
            ));
        }
        if shape.dynamic_shared > 0 && error.message.contains("invalid argument") {
            return invalid(format!(
                "{} bytes of dynamic shared memory and the kernel's static shared memory exceed \
                 what the device gives a block (liboffload: {})",
                shape.dynamic_shared, error.message
            ));
        }
        Error::Driver {
            device: self.shared.name.clone(),
            operation: "launching a kernel",
            message: format!("launch refused: {error}"),
        }
    }
}

/// The device's launch limits, from what liboffload reports. liboffload 22 has no grid limit and
/// no threads-per-multiprocessor figure: the grid limits are CUDA's (met by every CUDA and AMD
/// GPU), the residency an estimate used only to size default launches.
///
/// # Safety
/// `device` is a live GPU handle.
unsafe fn limits(ol: Ol, device: sys::ol_device_handle_t) -> std::result::Result<Limits, OlError> {
    // SAFETY: per this function's contract; each property has the type `OffloadAPI.h` gives it.
    let (max_threads, block, units, shared) = unsafe {
        (
            ol.device_info::<u32>(device, sys::OL_DEVICE_INFO_MAX_WORK_GROUP_SIZE)?,
            ol.device_info::<sys::ol_dimensions_t>(
                device,
                sys::OL_DEVICE_INFO_MAX_WORK_GROUP_SIZE_PER_DIMENSION,
            )?,
            ol.device_info::<u32>(device, sys::OL_DEVICE_INFO_NUM_COMPUTE_UNITS)?,
            ol.device_info::<u64>(device, sys::OL_DEVICE_INFO_WORK_GROUP_LOCAL_MEM_SIZE),
        )
    };
    let shared = shared.unwrap_or_else(|e| {
        tracing::debug!("liboffload reports no shared memory size ({e}): assuming 48 KiB");
        48 * 1024
    });
    Ok(Limits {
        max_threads_per_block: max_threads,
        max_block: Dim3::new(block.x, block.y, block.z),
        max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
        multiprocessors: units,
        threads_per_multiprocessor: 2 * max_threads,
        max_shared_per_block: u32::try_from(shared).unwrap_or(u32::MAX),
    })
}

/// The 16 bytes of a device UUID written in hex (`GPU-8e1c…`, with or without dashes); `None`
/// for anything else.
fn uuid_of(uid: &str) -> Option<[u8; 16]> {
    let digits: Vec<u8> = uid
        .trim_start_matches("GPU-")
        .bytes()
        .filter(|b| *b != b'-')
        .map(|b| (b as char).to_digit(16).map(|d| d as u8))
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = digits
        .chunks(2)
        .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
        .collect();
    (digits.len() == 32).then(|| bytes.try_into().expect("32 digits are 16 bytes"))
}

impl Backend for LibOffloadBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::LibOffload
    }

    fn platform(&self) -> Platform {
        self.shared.gpu.platform()
    }

    fn uuid(&self) -> Option<[u8; 16]> {
        self.shared.uuid
    }

    fn name(&self) -> &str {
        &self.shared.name
    }

    fn ordinal(&self) -> usize {
        self.shared.ordinal
    }

    fn limits(&self) -> Limits {
        self.shared.limits
    }

    fn memory_is_host(&self) -> bool {
        false
    }

    /// Free memory is the device's memory less what this process allocated through liboffload
    /// (liboffload 22 cannot ask the driver); freed memory the plugin keeps for reuse counts as
    /// used.
    fn memory_info(&self) -> Result<MemoryInfo> {
        self.live()?;
        let used = self.allocations().values().sum();
        Ok(MemoryInfo::less_used(self.shared.total_memory, used))
    }

    fn alloc(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.live()?;
        // SAFETY: this backend's queue is live.
        if let Some(ptr) = unsafe { self.shared.pool.take(self.ol(), bytes, self.queue.0) } {
            return Ok(DevicePtr(ptr));
        }
        let allocate = || {
            // SAFETY: a GPU device handle, never the host placeholder.
            unsafe {
                self.ol()
                    .mem_alloc(self.device(), sys::OL_ALLOC_TYPE_DEVICE, bytes)
            }
        };
        let mut allocated = allocate();
        if allocated.as_ref().is_err_and(|e| e.is_out_of_memory()) {
            // Give the kept blocks back and try once more before calling it out of memory.
            self.trim_pool();
            allocated = allocate();
        }
        match allocated {
            Ok(ptr) => {
                let ptr = ptr as u64;
                self.allocations().insert(ptr, bytes);
                Ok(DevicePtr(ptr))
            }
            Err(e) if e.is_out_of_memory() => Err(Error::OutOfMemory {
                kernel,
                device: self.shared.name.clone(),
                bytes,
            }),
            Err(e) => Err(self.failed("allocating device memory")(e)),
        }
    }

    /// Kept for reuse once the work queued so far has run (see `pool`), not given back at once.
    unsafe fn free(&self, ptr: DevicePtr) {
        // Not `live`: memory allocated before a release is still freed after it.
        let Some(bytes) = self.allocations().get(&ptr.0).copied() else {
            tracing::warn!(device = %self.shared.name, "freeing device memory this plugin did not allocate");
            return;
        };
        // SAFETY: per the trait contract, nothing queued after this uses `ptr`; the queue is live.
        match unsafe { self.shared.pool.keep(self.ol(), ptr.0, bytes, self.queue.0) } {
            Ok(returned) => {
                let mut allocations = self.allocations();
                for (ptr, _) in returned {
                    allocations.remove(&ptr);
                }
            }
            Err(e) => {
                tracing::debug!(device = %self.shared.name, "keeping freed memory failed ({e}): freeing it once the queue is done");
                // SAFETY: the queue is live; once it is done, nothing uses `ptr`.
                let freed = unsafe {
                    self.ol()
                        .sync_queue(self.queue.0)
                        .and_then(|()| self.ol().mem_free(ptr.0 as *mut c_void))
                };
                match freed {
                    Ok(()) => {
                        self.allocations().remove(&ptr.0);
                    }
                    Err(e) => {
                        tracing::warn!(device = %self.shared.name, "freeing device memory failed: {e}")
                    }
                }
            }
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        self.live()?;
        // SAFETY: per the trait contract (`src` readable and unchanged until the queue has
        // synchronized, `dst` holds `bytes`).
        unsafe {
            self.ol().memcpy(
                self.queue.0,
                dst.0 as *mut c_void,
                self.device(),
                src as *const c_void,
                self.host(),
                bytes,
            )
        }
        .map_err(self.failed("copying to the device"))
    }

    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        self.live()?;
        // SAFETY: per the trait contract (`dst` writable and unused until the queue has
        // synchronized, `src` holds `bytes`).
        unsafe {
            self.ol().memcpy(
                self.queue.0,
                dst as *mut c_void,
                self.host(),
                src.0 as *const c_void,
                self.device(),
                bytes,
            )
        }
        .map_err(self.failed("copying from the device"))
    }

    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.live()?;
        // SAFETY: per the trait contract, `dst` holds `bytes` bytes of this device's memory.
        unsafe {
            self.ol()
                .mem_zero(self.queue.0, dst.0 as *mut c_void, bytes)
        }
        .map_err(self.failed("zeroing device memory"))
    }

    fn code_rank(&self, code: &Code<'_>) -> Option<u32> {
        match code {
            // SAFETY: the device is open.
            Code::Image(image) => unsafe {
                program::rank(self.ol(), self.device(), &self.shared.gpu, image)
            },
            Code::Host { .. } => None,
        }
    }

    fn target(&self) -> String {
        self.shared.gpu.target()
    }

    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle> {
        self.live()?;
        let rejected = |message: String| Error::Driver {
            device: self.shared.name.clone(),
            operation: "loading an image",
            message,
        };
        let Code::Image(image) = code else {
            return Err(rejected("liboffload runs device images only".to_string()));
        };
        // SAFETY: a GPU device handle, never the host placeholder.
        let handle = unsafe { program::load(self.ol(), self.device(), image) }.map_err(|e| {
            rejected(format!(
                "the driver rejected the {:?} image for {}: liboffload: {e}",
                image.format, image.target
            ))
        })?;
        tracing::debug!(device = %self.shared.name, format = ?image.format, target = image.target, "liboffload loaded a device image");
        self.shared
            .programs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Handle(handle));
        Ok(ImageHandle(handle as u64))
    }

    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle> {
        self.live()?;
        // SAFETY: the program stays loaded until the device is released.
        let symbol = unsafe {
            self.ol().get_symbol(
                image.0 as sys::ol_program_handle_t,
                name,
                sys::OL_SYMBOL_KIND_KERNEL,
            )
        }
        .map_err(|e| Error::Driver {
            device: self.shared.name.clone(),
            operation: "finding a kernel entry",
            message: format!("the image has no entry point `{name}`: liboffload: {e}"),
        })?;
        self.shared
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(symbol as u64)
            .or_insert_with(|| interned(name));
        Ok(EntryHandle(symbol as u64))
    }

    /// liboffload 22 reports neither registers nor static shared memory: the device's limits,
    /// and a launch beyond the kernel's own is refused by the driver (see `launch`).
    fn entry_limits(&self, _entry: EntryHandle) -> Result<EntryLimits> {
        Ok(EntryLimits {
            max_threads_per_block: self.shared.limits.max_threads_per_block,
            registers: 0,
            static_shared: 0,
        })
    }

    fn find_global(&self, image: ImageHandle, name: &str) -> Result<Option<(DevicePtr, usize)>> {
        self.live()?;
        // SAFETY: the program stays loaded until the device is released; a global symbol's
        // info is its address and size.
        let found = unsafe {
            self.ol()
                .get_symbol(
                    image.0 as sys::ol_program_handle_t,
                    name,
                    sys::OL_SYMBOL_KIND_GLOBAL_VARIABLE,
                )
                .and_then(|symbol| self.ol().global_address_and_size(symbol))
        };
        match found {
            Ok((address, bytes)) => Ok(Some((DevicePtr(address as u64), bytes))),
            Err(e) => {
                tracing::debug!(device = %self.shared.name, "no global `{name}`: {e}");
                Ok(None)
            }
        }
    }

    unsafe fn launch(&self, entry: EntryHandle, shape: Shape, args: &PackedArgs) -> Result<()> {
        self.live()?;
        let Shape {
            grid,
            block,
            dynamic_shared,
        } = shape;
        let size = sys::ol_kernel_launch_size_args_t {
            dimensions: if grid.z > 1 || block.z > 1 {
                3
            } else if grid.y > 1 || block.y > 1 {
                2
            } else {
                1
            },
            num_groups: sys::ol_dimensions_t {
                x: grid.x,
                y: grid.y,
                z: grid.z,
            },
            group_size: sys::ol_dimensions_t {
                x: block.x,
                y: block.y,
                z: block.z,
            },
            dyn_shared_memory: dynamic_shared as usize,
        };
        // The buffer ends where the last parameter ends, with no padding after it: the AMDGPU
        // plugin copies that many bytes into a kernarg segment of the kernel's own size (from
        // the parameters' end rounded up to 4 bytes; the build pass checks it holds them), so a
        // C struct's padded size could run past it.
        // SAFETY: queue, device and entry belong together and are live; `args` is the packed
        // buffer of the entry's parameters, whose addresses hold what the kernel reaches (the
        // trait contract); liboffload copies it at launch.
        let arguments = unsafe { std::slice::from_raw_parts(args.as_ptr(), args.size()) };
        // SAFETY: as above.
        unsafe {
            self.ol().launch_kernel(
                self.queue.0,
                self.device(),
                entry.0 as sys::ol_symbol_handle_t,
                arguments,
                &size,
            )
        }
        .map_err(|e| self.launch_error(entry, shape, e))
    }

    fn synchronize(&self) -> Result<()> {
        self.live()?;
        // SAFETY: the queue is live while `self` is.
        unsafe { self.ol().sync_queue(self.queue.0) }.map_err(self.failed("synchronizing"))
    }

    fn release(&self) -> Result<()> {
        self.live()?;
        self.shared.released.store(true, Ordering::Release);
        let ol = self.ol();
        for queue in self
            .shared
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            // SAFETY: queues are live while registered.
            unsafe { ol.sync_queue(queue.0) }.map_err(self.failed("synchronizing"))?;
        }
        for program in self
            .shared
            .programs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            // SAFETY: every queue is drained, and later launches are refused before they reach
            // the program.
            if let Err(e) = unsafe { ol.destroy_program(program.0) } {
                tracing::warn!(device = %self.shared.name, "unloading an image failed: {e}");
            }
        }
        self.trim_pool();
        Ok(())
    }

    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        self.live()?;
        // SAFETY: a GPU device handle, never the host placeholder.
        let queue = unsafe { self.ol().create_queue(self.device()) }
            .map_err(self.failed("creating a queue"))?;
        self.shared
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Handle(queue));
        Ok(Arc::new(LibOffloadBackend {
            shared: self.shared.clone(),
            queue: Handle(queue),
        }))
    }

    fn native_queue(&self) -> Option<NativeQueue> {
        Some(NativeQueue::LibOffload {
            queue: self.queue.0 as *mut c_void,
        })
    }

    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        self.live()?;
        let key = Arc::as_ptr(&self.shared) as usize;
        // SAFETY: the queue is live while `self` is.
        let event = unsafe { OlEvent::record(self.ol(), self.queue.0, &self.shared.name, key) }?;
        Ok(Box::new(event))
    }

    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()> {
        self.live()?;
        let event = OlEvent::of(event, &self.shared.name, Arc::as_ptr(&self.shared) as usize)?;
        // SAFETY: both are live and of this device.
        unsafe { self.ol().wait_event(self.queue.0, event.handle.0) }
            .map_err(self.failed("waiting for an event"))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        self.live()?;
        // SAFETY: a GPU device handle; host memory liboffload page-locks for its devices.
        unsafe {
            self.ol()
                .mem_alloc(self.device(), sys::OL_ALLOC_TYPE_HOST, bytes)
        }
        .map(|p| p as *mut u8)
        .map_err(self.failed("allocating pinned host memory"))
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        // SAFETY: per the trait contract.
        if let Err(e) = unsafe { self.ol().mem_free(ptr as *mut c_void) } {
            tracing::warn!(device = %self.shared.name, "freeing pinned host memory failed: {e}");
        }
    }

    /// The same address: liboffload's host memory is mapped into the GPU's address space (CUDA's
    /// unified addressing; AMD GPUs are granted access to it).
    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr> {
        Some(DevicePtr(ptr as u64))
    }
}

impl Drop for LibOffloadBackend {
    fn drop(&mut self) {
        let mut queues = self.shared.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.retain(|q| q.0 != self.queue.0);
        // Its work done, the pool's blocks it used are free for any queue, and a later queue at
        // the same address cannot be mistaken for it.
        // SAFETY: the queue is live until destroyed below and not used after.
        unsafe {
            let _ = self.shared.ol.sync_queue(self.queue.0);
            self.shared.pool.forget_queue(self.shared.ol, self.queue.0);
        }
        // SAFETY: this queue is not used after this.
        if let Err(e) = unsafe { self.shared.ol.destroy_queue(self.queue.0) } {
            tracing::debug!(device = %self.shared.name, "destroying a queue failed: {e}");
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let ol = self.ol;
        // SAFETY: the device is still open; its last queue is gone, so nothing uses the kept
        // memory or the programs.
        unsafe {
            self.pool.trim(ol);
            for program in self
                .programs
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                let _ = ol.destroy_program(program.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_device_uuids_in_their_usual_spellings() {
        let bytes: [u8; 16] = [
            0x8e, 0x1c, 0x2f, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90, 0xa1, 0xb2, 0xc3, 0xd4,
            0xe5, 0xf6,
        ];
        assert_eq!(
            uuid_of("GPU-8e1c2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"),
            Some(bytes)
        );
        assert_eq!(uuid_of("8e1c2f3a4b5c6d7e8f90a1b2c3d4e5f6"), Some(bytes));
        assert_eq!(
            uuid_of("GPU-8e1c2f3a4b5c6d7e"),
            None,
            "AMD's 8-byte unique id"
        );
        assert_eq!(uuid_of(""), None);
        assert_eq!(uuid_of("not a uuid at all, but 32 long!!"), None);
    }
}
