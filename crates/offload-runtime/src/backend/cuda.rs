//! The CUDA plugin, on the driver API loaded at run time (through cudarc's dynamic loading):
//! only `libcuda` is needed, and its absence just means no CUDA devices.

use super::cuda_staging::{Staging, STAGE_FROM};
use super::{Backend, BackendKind, DevicePtr, MemoryInfo, Param, Platform, QueueEvent};
use crate::kernel::Kernel;
use crate::launch::{Limits, Shape};
use crate::{Error, Result};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaStream, DriverError};
use offload_kernel::panic_record::PanicRecord;
use offload_kernel::Dim3;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Every CUDA device, or why there are none to use.
pub fn discover() -> std::result::Result<Vec<Arc<dyn Backend>>, String> {
    // SAFETY: only tries to open the driver library.
    if !unsafe { sys::is_culib_present() } {
        return Err("the NVIDIA driver (libcuda.so) is not installed".to_string());
    }
    result::init().map_err(|e| format!("cuInit failed: {e}"))?;
    let count = result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    (0..count as usize)
        .map(|ordinal| CudaBackend::new(ordinal).map(|b| Arc::new(b) as Arc<dyn Backend>))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("opening CUDA device failed: {e}"))
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (u32, u32),
    /// Its UUID, to find the same GPU behind another plugin (`None` if the driver would not say).
    uuid: Option<[u8; 16]>,
    limits: Limits,
    /// Shared by the queues of the device (see [`Backend::new_queue`]).
    modules: Arc<Modules>,
}

/// A device's loaded modules, keyed by the address of the `ImageSet` they came from; unloaded
/// when the last queue of the device goes.
struct Modules {
    ctx: Arc<CudaContext>,
    loaded: Mutex<HashMap<usize, LoadedModule>>,
    /// See [`Backend::launch_lock`]: one for all queues, as their modules share panic records.
    launches: Mutex<()>,
    /// Set by [`Backend::release`].
    released: AtomicBool,
    /// Pinned buffers for large copies.
    staging: Mutex<Staging>,
}

struct LoadedModule {
    module: sys::CUmodule,
    functions: HashMap<&'static str, sys::CUfunction>,
    /// Where its kernels report panics; `None` for an image without a panic record.
    panics: Option<PanicSlot>,
}

/// An image's `OFFLOAD_PANIC_RECORD` on the device, and the pinned host word that its panic
/// handler sets once the record is written, so that a launch without a panic costs the host one
/// memory read instead of a device-to-host copy.
struct PanicSlot {
    record: sys::CUdeviceptr,
    /// Pinned and mapped into the device (`cuMemHostAlloc`); null when the driver would not
    /// give one: then the record's flag is copied back after every launch instead.
    host_flag: *mut u32,
}

// SAFETY: CUmodule and CUfunction are driver handles, valid on any thread of the process; the
// driver API is thread-safe. The pinned flag is only touched with the map's Mutex held.
unsafe impl Send for LoadedModule {}

/// Key of the module loaded from a kernel's image set.
fn module_key(kernel: &Kernel) -> usize {
    kernel.images as *const _ as usize
}

impl CudaBackend {
    fn new(ordinal: usize) -> std::result::Result<Self, DriverError> {
        let ctx = CudaContext::new(ordinal)?;
        let stream = ctx.new_stream()?;
        let (major, minor) = ctx.compute_capability()?;
        let attr = |a| ctx.attribute(a).map(|v| v as u32);
        let limits = Limits {
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: Dim3::new(
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ),
            max_grid: Dim3::new(
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ),
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            threads_per_multiprocessor: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            )?,
            max_shared_per_block: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
        };
        let name = format!("{} (CUDA device {ordinal}, sm_{major}{minor})", ctx.name()?);
        if ctx.has_async_alloc() {
            keep_freed_memory(&ctx)?;
        }
        Ok(CudaBackend {
            stream,
            name,
            compute_capability: (major as u32, minor as u32),
            uuid: ctx.uuid().ok().map(|u| u.bytes.map(|b| b as u8)),
            limits,
            modules: Arc::new(Modules {
                ctx: ctx.clone(),
                loaded: Mutex::new(HashMap::new()),
                launches: Mutex::new(()),
                released: AtomicBool::new(false),
                staging: Mutex::new(Staging::default()),
            }),
            ctx,
        })
    }

    fn driver_error(&self, operation: &'static str) -> impl Fn(DriverError) -> Error + '_ {
        move |e| Error::Driver {
            device: self.name.clone(),
            operation,
            message: e.to_string(),
        }
    }

    fn staging(&self) -> MutexGuard<'_, Staging> {
        self.modules
            .staging
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the context current on this thread: the gate of every driver operation, so it is
    /// also where a released device says so.
    fn bind(&self) -> Result<()> {
        if self.modules.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name.clone(),
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(self.driver_error("binding the context"))
    }

    /// The kernel's function handle, loading its crate's image on first use.
    fn function(&self, kernel: &Kernel) -> Result<sys::CUfunction> {
        let no_image = |reason: String| Error::NoImage {
            kernel: kernel.name,
            device: self.name.clone(),
            reason,
        };
        let mut modules = self
            .modules
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = module_key(kernel);
        if !modules.contains_key(&key) {
            let (major, minor) = self.compute_capability;
            let image = kernel.images.best_for_cuda(major, minor).ok_or_else(|| {
                no_image(match kernel.images.unavailable {
                    Some(why) => format!("no device image was built ({why})"),
                    None => format!("no image fits sm_{major}{minor}"),
                })
            })?;
            let module = load_module(&image.loadable_bytes()).map_err(|e| {
                no_image(format!(
                    "the driver rejected the {:?} image for {}: {e}",
                    image.format, image.target
                ))
            })?;
            tracing::debug!(device = %self.name, format = ?image.format, target = image.target, "loaded device image");
            // Inserted first, so that Drop unloads it even if the panic setup fails.
            let loaded = modules.entry(key).or_insert(LoadedModule {
                module,
                functions: HashMap::new(),
                panics: None,
            });
            self.watch_panics(loaded)
                .map_err(self.driver_error("setting up kernel panic reporting"))?;
        }
        let loaded = modules.get_mut(&key).expect("inserted above");
        if let Some(&f) = loaded.functions.get(kernel.name) {
            return Ok(f);
        }
        let c_name = CString::new(kernel.name).expect("kernel names are identifiers");
        // SAFETY: the module is loaded and stays loaded while the backend lives.
        let f = unsafe { result::module::get_function(loaded.module, c_name) }.map_err(|e| {
            no_image(format!(
                "the image has no entry point `{}`: {e}",
                kernel.name
            ))
        })?;
        loaded.functions.insert(kernel.name, f);
        Ok(f)
    }

    /// Finds a freshly loaded image's panic record and points its panic handler at a new pinned
    /// host flag. An image without the record (built without panic reporting) keeps `None`.
    fn watch_panics(&self, loaded: &mut LoadedModule) -> std::result::Result<(), DriverError> {
        let global = |name: &str| {
            // SAFETY: the module is loaded.
            unsafe {
                result::module::get_global(loaded.module, CString::new(name).expect("no NUL"))
            }
            .ok()
        };
        let Some((record, bytes)) = global("OFFLOAD_PANIC_RECORD") else {
            return Ok(());
        };
        if bytes != size_of::<PanicRecord>() {
            tracing::warn!(device = %self.name, bytes, "the image's panic record has an unknown layout: kernel panics go unreported");
            return Ok(());
        }
        let flag_ptr =
            global("OFFLOAD_PANIC_FLAG_PTR").filter(|&(_, bytes)| bytes == size_of::<u64>());
        let host_flag = flag_ptr.and_then(|_| {
            // SAFETY: 4 bytes of pinned host memory, mapped into this (bound) context.
            unsafe { result::malloc_host(size_of::<u32>(), sys::CU_MEMHOSTALLOC_DEVICEMAP) }
                .inspect_err(|e| tracing::debug!(device = %self.name, "no mapped pinned memory ({e}): kernel panics are checked by a copy per launch"))
                .ok()
        });
        let Some((host_flag, (flag_ptr, _))) = host_flag.map(|p| p as *mut u32).zip(flag_ptr)
        else {
            loaded.panics = Some(PanicSlot {
                record,
                host_flag: std::ptr::null_mut(),
            });
            return Ok(());
        };
        // SAFETY: a live, aligned allocation.
        unsafe { host_flag.write_volatile(0) };
        // Owned by the module from here on, so that Drop frees it whatever happens below.
        loaded.panics = Some(PanicSlot { record, host_flag });
        let mut device_address: sys::CUdeviceptr = 0;
        // SAFETY: `host_flag` came from cuMemHostAlloc with DEVICEMAP. The copy is stream-ordered
        // before any launch from this module and waited for, so `device_address` outlives it.
        unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device_address, host_flag as *mut c_void, 0)
                .result()?;
            result::memcpy_htod_async(flag_ptr, &[device_address], self.stream.cu_stream())?;
        }
        self.stream.synchronize()
    }
}

/// Lets the device's default memory pool (which `cuMemAllocAsync` draws from) keep freed memory
/// instead of returning it to the device at every synchronization: a region or launch that
/// allocates what an earlier one freed then reuses it, and a copy after a large free does not
/// wait for the driver to unmap it (measured on the H200: 1 GiB updates after a 1 GiB free ran at
/// 0.85× of pinned memcpy, the same copies elsewhere at 0.96×). `alloc` returns the cache to the
/// device before reporting out-of-memory, and `release` returns it too.
fn keep_freed_memory(ctx: &CudaContext) -> std::result::Result<(), DriverError> {
    let mut keep_all = u64::MAX;
    // SAFETY: the device comes from a live context; the threshold attribute takes a u64, which
    // `keep_all` is, alive for the call.
    unsafe {
        let pool = result::device::get_default_mem_pool(ctx.cu_device())?;
        result::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut keep_all as *mut u64 as *mut c_void,
        )
    }
}

impl CudaBackend {
    /// Returns the memory the default pool keeps (`keep_freed_memory`) to the device, once the
    /// queued frees have happened.
    fn trim_pool(&self) -> std::result::Result<(), DriverError> {
        self.ctx.synchronize()?;
        // SAFETY: the device comes from a live context, bound to this thread by the callers.
        unsafe {
            let pool = result::device::get_default_mem_pool(self.ctx.cu_device())?;
            result::mem_pool::trim_to(pool, 0)
        }
    }

    /// Checks that a block of `block` threads fits the function: a kernel that needs many
    /// registers per thread runs with fewer threads per block than the device allows, and the
    /// driver would only say "too many resources requested".
    fn check_block_fits(
        &self,
        kernel: &Kernel,
        function: sys::CUfunction,
        block: Dim3,
    ) -> Result<()> {
        use sys::CUfunction_attribute as FuncAttr;
        let attribute = |a| {
            // SAFETY: `function` comes from a module that stays loaded.
            unsafe { result::function::get_function_attribute(function, a) }
                .map_err(self.driver_error("reading the kernel's attributes"))
        };
        let max = attribute(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u64;
        if block.count() > max {
            let registers = attribute(FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
            return Err(Error::InvalidLaunch {
                kernel: kernel.name,
                device: self.name.clone(),
                reason: format!(
                    "{} threads per block exceeds the {max} this kernel can run with ({registers} \
                     registers per thread)",
                    block.count()
                ),
            });
        }
        Ok(())
    }

    /// Checks that `dynamic` bytes of dynamic shared memory fit beside the function's static shared
    /// memory, and opts the function in to them (needed above 48 KiB).
    fn allow_dynamic_shared(
        &self,
        kernel: &Kernel,
        function: sys::CUfunction,
        dynamic: u32,
    ) -> Result<()> {
        use sys::CUfunction_attribute as FuncAttr;
        if dynamic == 0 {
            return Ok(());
        }
        let failed = self.driver_error("setting the kernel's dynamic shared memory");
        // SAFETY: `function` comes from a module that stays loaded.
        let static_bytes = unsafe {
            result::function::get_function_attribute(
                function,
                FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            )
        }
        .map_err(&failed)? as u32;
        let limit = self.limits.max_shared_per_block;
        if static_bytes + dynamic > limit {
            return Err(Error::InvalidLaunch {
                kernel: kernel.name,
                device: self.name.clone(),
                reason: format!(
                    "{dynamic} bytes of dynamic shared memory and the kernel's {static_bytes} bytes of \
                     static shared memory exceed the device limit of {limit} bytes per block"
                ),
            });
        }
        // SAFETY: as above; the value is within the device's opt-in limit.
        unsafe {
            result::function::set_function_attribute(
                function,
                FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic as i32,
            )
        }
        .map_err(&failed)
    }
}

impl PanicSlot {
    /// Frees the pinned flag (its context bound, the module unloaded).
    fn release(self) {
        if !self.host_flag.is_null() {
            // SAFETY: allocated by cuMemHostAlloc; no launch that could write it is in flight.
            let _ = unsafe { result::free_host(self.host_flag as *mut c_void) };
        }
    }
}

/// Whether `ptr` is page-locked host memory the driver knows (`PinnedVec`, `cuMemHostAlloc`):
/// copies from and to it run asynchronously without staging.
fn is_page_locked(ptr: *const u8) -> bool {
    let mut memory_type = 0u32;
    // SAFETY: asks the driver about an address (pageable memory is an error answer); writes
    // one `u32`, the size of this attribute.
    let answer = unsafe {
        sys::cuPointerGetAttribute(
            &mut memory_type as *mut u32 as *mut c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr as sys::CUdeviceptr,
        )
    };
    answer == sys::CUresult::CUDA_SUCCESS
        && memory_type == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

/// Loads a cubin, or PTX as a NUL-terminated string (`DeviceImage::loadable_bytes`).
fn load_module(image: &[u8]) -> std::result::Result<sys::CUmodule, DriverError> {
    // SAFETY: `image` is a complete PTX string or cubin, alive for the call.
    unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn platform(&self) -> Platform {
        Platform::Cuda
    }

    fn uuid(&self) -> Option<[u8; 16]> {
        self.uuid
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn memory_info(&self) -> Result<MemoryInfo> {
        self.bind()?;
        let (free, total) =
            result::mem_get_info().map_err(self.driver_error("querying device memory"))?;
        Ok(MemoryInfo { free, total })
    }

    fn alloc(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        let allocate = || {
            // SAFETY: the stream is alive; the memory is used only on this stream.
            unsafe {
                if self.ctx.has_async_alloc() {
                    result::malloc_async(self.stream.cu_stream(), bytes)
                } else {
                    result::malloc_sync(bytes)
                }
            }
        };
        let mut allocated = allocate();
        if let (Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)), true) =
            (&allocated, self.ctx.has_async_alloc())
        {
            // The pool keeps freed memory (see `keep_freed_memory`): give it all back to the
            // device and try once more before calling it out of memory.
            self.trim_pool()
                .map_err(self.driver_error("returning cached device memory"))?;
            allocated = allocate();
        }
        match allocated {
            Ok(ptr) => Ok(DevicePtr(ptr)),
            Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => Err(Error::OutOfMemory {
                kernel,
                device: self.name.clone(),
                bytes,
            }),
            Err(e) => Err(self.driver_error("allocating device memory")(e)),
        }
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        // Not `bind`: memory allocated before a release is still freed after it.
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: per the trait contract, `ptr` came from `alloc` and is no longer used.
        let freed = unsafe {
            if self.ctx.has_async_alloc() {
                result::free_async(ptr.0, self.stream.cu_stream())
            } else {
                result::free_sync(ptr.0)
            }
        };
        if let Err(e) = freed {
            tracing::warn!(device = %self.name, "freeing device memory failed: {e}");
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        self.bind()?;
        let failed = self.driver_error("copying to the device");
        let stream = self.stream.cu_stream();
        if bytes >= STAGE_FROM && !is_page_locked(src) {
            let mut staging = self.staging();
            if staging.ready(&self.name) {
                // SAFETY: per the trait contract; the context is bound.
                return unsafe { staging.upload(stream, dst.0, src, bytes) }.map_err(failed);
            }
        }
        // SAFETY: per the trait contract (`src` unchanged until the stream synchronizes: the
        // driver reads page-locked memory during the DMA; pageable memory it stages first).
        unsafe {
            let src = std::slice::from_raw_parts(src, bytes);
            result::memcpy_htod_async(dst.0, src, stream)
        }
        .map_err(failed)
    }

    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        self.bind()?;
        let failed = self.driver_error("copying from the device");
        let stream = self.stream.cu_stream();
        if bytes >= STAGE_FROM && !is_page_locked(dst) {
            let mut staging = self.staging();
            if staging.ready(&self.name) {
                // SAFETY: per the trait contract; the context is bound.
                return unsafe { staging.download(stream, dst, src.0, bytes) }.map_err(failed);
            }
        }
        // SAFETY: per the trait contract, `dst` stays valid and unused until `synchronize`.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(dst, bytes);
            result::memcpy_dtoh_async(dst, src.0, stream)
        }
        .map_err(failed)
    }

    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: per the trait contract, `dst` holds `bytes` bytes.
        unsafe { result::memset_d8_async(dst.0, 0, bytes, self.stream.cu_stream()) }
            .map_err(self.driver_error("zeroing device memory"))
    }

    fn launch(&self, kernel: &Kernel, shape: Shape, params: &[Param]) -> Result<()> {
        self.bind()?;
        let function = self.function(kernel)?;
        // cuLaunchKernel takes a pointer to each parameter's bytes; words live in `words`.
        let words: Vec<u64> = params
            .iter()
            .map(|p| if let Param::Word(w) = p { *w } else { 0 })
            .collect();
        let mut pointers: Vec<*mut c_void> = params
            .iter()
            .zip(&words)
            .map(|(p, w)| match p {
                Param::Value { ptr, .. } => *ptr as *mut c_void,
                Param::Word(_) => w as *const u64 as *mut c_void,
            })
            .collect();
        let Shape {
            grid,
            block,
            dynamic_shared,
        } = shape;
        self.check_block_fits(kernel, function, block)?;
        self.allow_dynamic_shared(kernel, function, dynamic_shared)?;
        // SAFETY: `function` comes from a loaded module; `pointers` match the entry's parameter
        // list as generated by the kernel attribute, and stay alive for the call (the driver
        // copies parameter values at launch).
        unsafe {
            result::launch_kernel(
                function,
                (grid.x, grid.y, grid.z),
                (block.x, block.y, block.z),
                dynamic_shared,
                self.stream.cu_stream(),
                &mut pointers,
            )
        }
        .map_err(|e| Error::KernelFailed {
            kernel: kernel.name,
            device: self.name.clone(),
            message: format!("launch refused: {e}"),
        })
    }

    fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(self.driver_error("synchronizing"))
    }

    fn take_panic(&self, kernel: &Kernel) -> Result<Option<String>> {
        let modules = self
            .modules
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(slot) = modules
            .get(&module_key(kernel))
            .and_then(|m| m.panics.as_ref())
        else {
            return Ok(None);
        };
        let failed = self.driver_error("reading the kernel's panic record");
        if slot.host_flag.is_null() {
            self.bind()?;
            let mut flag = [0u32];
            // SAFETY: the record's first word; the launch is complete (`synchronize` returned).
            unsafe { result::memcpy_dtoh_sync(&mut flag, slot.record) }.map_err(&failed)?;
            if flag[0] == 0 {
                return Ok(None);
            }
        } else {
            // The no-panic path: one read of pinned host memory. The launch completed (the
            // caller synchronized), so any store the device made to it is visible.
            // SAFETY: the flag lives until the module is unloaded; the Mutex is held.
            if unsafe { slot.host_flag.read_volatile() } == 0 {
                return Ok(None);
            }
        }
        self.bind()?;
        let mut record = PanicRecord::ZERO;
        let bytes = size_of::<PanicRecord>();
        // SAFETY: `record` holds `bytes` bytes and any bytes are a valid PanicRecord; the device
        // record holds `bytes` (checked at load). Zeroing it, stream-ordered before any later
        // launch, and the flag arms the record for the next launch.
        unsafe {
            result::memcpy_dtoh_async(record.as_bytes_mut(), slot.record, self.stream.cu_stream())
                .and_then(|()| {
                    result::memset_d8_async(slot.record, 0, bytes, self.stream.cu_stream())
                })
                .and_then(|()| self.stream.synchronize())
                .map_err(&failed)?;
            if !slot.host_flag.is_null() {
                slot.host_flag.write_volatile(0);
            }
        }
        Ok(Some(record.to_string()))
    }

    fn release(&self) -> Result<()> {
        // No launch is between its start and its panic check while this is held.
        let _launches = self.launch_lock();
        self.bind()?;
        self.modules.released.store(true, Ordering::Release);
        // Every queue of the device, not only this one.
        self.ctx
            .synchronize()
            .map_err(self.driver_error("synchronizing"))?;
        let mut loaded = self
            .modules
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        unload_all(&mut loaded);
        drop(std::mem::take(&mut *self.staging()));
        if self.ctx.has_async_alloc() {
            self.trim_pool()
                .map_err(self.driver_error("returning cached device memory"))?;
        }
        Ok(())
    }

    fn launch_lock(&self) -> MutexGuard<'_, ()> {
        self.modules
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        self.bind()?;
        let stream = self
            .ctx
            .new_stream()
            .map_err(self.driver_error("creating a stream"))?;
        Ok(Arc::new(CudaBackend {
            ctx: self.ctx.clone(),
            stream,
            name: self.name.clone(),
            compute_capability: self.compute_capability,
            uuid: self.uuid,
            limits: self.limits,
            modules: self.modules.clone(),
        }))
    }

    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        let event = self
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(self.driver_error("recording an event"))?;
        Ok(Box::new(CudaQueueEvent {
            event,
            device: self.name.clone(),
        }))
    }

    fn wait_event(&self, event: &dyn QueueEvent) -> Result<()> {
        let event = CudaQueueEvent::of(event, &self.name)?;
        self.stream
            .wait(&event.event)
            .map_err(self.driver_error("waiting for an event"))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        self.bind()?;
        // SAFETY: a fresh allocation; PORTABLE makes it pinned for every context of the process.
        unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map(|p| p as *mut u8)
            .map_err(self.driver_error("allocating pinned host memory"))
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        // Not `bind`: memory allocated before a release is still freed after it.
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: per the trait contract.
        if let Err(e) = unsafe { result::free_host(ptr as *mut c_void) } {
            tracing::warn!(device = %self.name, "freeing pinned host memory failed: {e}");
        }
    }
}

/// A CUDA event with timing, on one device.
struct CudaQueueEvent {
    event: CudaEvent,
    device: String,
}

impl CudaQueueEvent {
    /// `event` as a CUDA event of the device named `device`.
    fn of<'e>(event: &'e dyn QueueEvent, device: &str) -> Result<&'e CudaQueueEvent> {
        event
            .as_any()
            .downcast_ref::<CudaQueueEvent>()
            .filter(|e| e.device == device)
            .ok_or_else(|| Error::Driver {
                device: device.to_string(),
                operation: "waiting for an event",
                message: "the event belongs to another device".to_string(),
            })
    }
}

impl QueueEvent for CudaQueueEvent {
    fn synchronize(&self) -> Result<()> {
        self.event.synchronize().map_err(|e| Error::Driver {
            device: self.device.clone(),
            operation: "waiting for an event",
            message: e.to_string(),
        })
    }

    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration> {
        let start = CudaQueueEvent::of(start, &self.device)?;
        let ms = start
            .event
            .elapsed_ms(&self.event)
            .map_err(|e| Error::Driver {
                device: self.device.clone(),
                operation: "timing events",
                message: e.to_string(),
            })?;
        Ok(Duration::from_secs_f64(ms.max(0.0) as f64 / 1000.0))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Unloads every module and frees its panic flag, the context bound to this thread.
fn unload_all(modules: &mut HashMap<usize, LoadedModule>) {
    for (_, loaded) in modules.drain() {
        // SAFETY: callers guarantee that no launch is in flight (every queue of the device is
        // gone, or the device is being released with its launch lock held and its work drained).
        let _ = unsafe { result::module::unload(loaded.module) };
        if let Some(slot) = loaded.panics {
            slot.release();
        }
    }
}

impl Drop for Modules {
    fn drop(&mut self) {
        let modules = self.loaded.get_mut().unwrap_or_else(|p| p.into_inner());
        if self.ctx.bind_to_thread().is_ok() {
            // Its pinned buffers and events belong to the context: release them while bound.
            drop(std::mem::take(
                self.staging.get_mut().unwrap_or_else(|p| p.into_inner()),
            ));
            unload_all(modules);
        }
    }
}
