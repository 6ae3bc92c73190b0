//! The CUDA plugin, on the driver API loaded at run time (through cudarc's dynamic loading):
//! only `libcuda` is needed, and its absence just means no CUDA devices. Pageable host memory is
//! copied through the pinned buffers of `cuda_staging`.

use crate::plugins::code::{Code, EntryHandle, ImageHandle};
use crate::plugins::cuda_graph;
use crate::plugins::cuda_staging::{Staging, STAGE_FROM};
use crate::plugins::cuda_tensor_map;
use crate::plugins::image::{sm_number, DeviceImage, ImageFormat};
use crate::plugins::interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent, RecordedWork,
};
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::packed::PackedArgs;
use crate::{Error, Result};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUfunction_attribute as FuncAttr};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaStream, DriverError};
use offload_kernel::Dim3;
use std::any::Any;
use std::cell::Cell;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Launch parameters passed to the driver without a heap allocation.
const STACK_PARAMS: usize = 24;

thread_local! {
    /// The context `CudaBackend::bind` made current on this thread last (null before): launches
    /// and synchronizations of that context's streams do not ask the driver again
    /// (`CudaBackend::on_bound`).
    static BOUND: Cell<sys::CUcontext> = const { Cell::new(std::ptr::null_mut()) };
}

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

/// One CUDA device, or one stream of it ([`Backend::new_queue`]).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (u32, u32),
    /// Its UUID, to find the same GPU behind another plugin (`None` if the driver would not say).
    uuid: Option<[u8; 16]>,
    limits: Limits,
    /// Shared by the streams of the device.
    shared: Arc<Shared>,
    /// This queue's event for [`Backend::wait_for`] (made on first use), locked from its record
    /// until the wait is queued: re-recording it then cannot move a wait to another queue.
    mark: Mutex<Option<CudaEvent>>,
}

/// What the streams of a device share; the modules are unloaded when the last stream goes.
struct Shared {
    ctx: Arc<CudaContext>,
    /// Every module loaded, for `release` and drop to unload.
    modules: Mutex<Vec<Module>>,
    /// Set by [`Backend::release`] (shared with recorded graphs, which refuse to replay then).
    released: Arc<AtomicBool>,
    /// Pinned buffers for large copies.
    staging: Mutex<Staging>,
}

/// A loaded module (the handle of an [`ImageHandle`]).
struct Module(sys::CUmodule);

// SAFETY: a CUmodule is a driver handle, valid on any thread of the process; the driver API is
// thread-safe.
unsafe impl Send for Module {}

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
            shared: Arc::new(Shared {
                ctx: ctx.clone(),
                modules: Mutex::new(Vec::new()),
                released: Arc::new(AtomicBool::new(false)),
                staging: Mutex::new(Staging::default()),
            }),
            ctx,
            mark: Mutex::new(None),
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
        self.shared
            .staging
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the context current on this thread: the gate of every driver operation, so it is
    /// also where a released device says so.
    fn bind(&self) -> Result<()> {
        if self.shared.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name.clone(),
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(self.driver_error("binding the context"))?;
        BOUND.set(self.ctx.cu_ctx());
        Ok(())
    }

    /// `call`, a driver call on this device's stream or a function of its modules, made where
    /// the raw driver API would make it: without asking the driver which context is current
    /// while this thread's last `bind` was of this one. A user or another library may have made
    /// another context current since, or none: the stream and the function name this context,
    /// and the driver either refuses the call (H200, driver 580: with no context current) or
    /// makes it all the same (with another context current; `gpu_streams` checks the results).
    /// A refused call is made again once bound, unless the context was current after all (its
    /// error is then the call's own).
    fn on_bound<T>(
        &self,
        mut call: impl FnMut() -> std::result::Result<T, DriverError>,
    ) -> Result<std::result::Result<T, DriverError>> {
        if BOUND.get() != self.ctx.cu_ctx() {
            self.bind()?;
            return Ok(call());
        }
        if self.shared.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name.clone(),
            });
        }
        let outcome = call();
        let current = || result::ctx::get_current();
        if outcome.is_err() && matches!(current(), Ok(c) if c != Some(self.ctx.cu_ctx())) {
            self.bind()?;
            return Ok(call());
        }
        Ok(outcome)
    }

    /// One attribute of a kernel entry.
    fn function_attribute(&self, entry: EntryHandle, attribute: FuncAttr) -> Result<u32> {
        // SAFETY: the handle comes from `find_entry`, of a module that stays loaded until the
        // device is released (the caller bound the context, which checked that).
        unsafe { result::function::get_function_attribute(entry.0 as sys::CUfunction, attribute) }
            .map(|v| v as u32)
            .map_err(self.driver_error("reading the kernel's attributes"))
    }

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
}

/// Lets the device's default memory pool (which `cuMemAllocAsync` draws from) keep freed memory
/// instead of returning it to the device at every synchronization: a region or launch that
/// allocates what an earlier one freed then reuses it, and a copy after a large free does not
/// wait for the driver to unmap it. `alloc` returns the cache to the device before reporting
/// out-of-memory, and `release` returns it too.
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

fn load_module(
    format: ImageFormat,
    bytes: &[u8],
) -> std::result::Result<sys::CUmodule, DriverError> {
    // cuModuleLoadData reads PTX as a NUL-terminated string.
    let owned;
    let image = match format {
        ImageFormat::Ptx if bytes.last() != Some(&0) => {
            owned = [bytes, &[0]].concat();
            &owned[..]
        }
        _ => bytes,
    };
    // SAFETY: `image` is a complete PTX string or cubin, alive for the call.
    unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
}

/// How well a GPU of compute capability `sm` (`90` for 9.0) runs `image`: a cubin for exactly its
/// architecture best, else the newest PTX it can compile (the driver compiles PTX for any GPU at
/// least as new as the PTX's target). An arch-specific image (`sm_90a`: `wgmma`, `setmaxnreg`)
/// runs on exactly its architecture, where it ranks above the plain one (a superset).
fn image_rank(sm: u32, image: &DeviceImage) -> Option<u32> {
    let target = sm_number(image.target)?;
    let specific = image.target.ends_with('a');
    let fits = if specific { target == sm } else { target <= sm };
    match image.format {
        ImageFormat::Cubin => (target == sm).then_some(u32::MAX - !specific as u32),
        ImageFormat::Ptx => fits.then_some(2 * target + specific as u32),
        // For OpenCL devices and AMD GPUs.
        ImageFormat::Spirv | ImageFormat::HsaCodeObject => None,
    }
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

    fn memory_is_host(&self) -> bool {
        false
    }

    fn encode_tensor_map_2d(
        &self,
        address: DevicePtr,
        layout: &offload_kernel::tensor_copy::TiledLayout,
    ) -> Result<Option<[u64; 16]>> {
        Ok(Some(
            cuda_tensor_map::encode_2d(address.0, layout)
                .map_err(self.driver_error("encoding a tensor map (cuTensorMapEncodeTiled)"))?,
        ))
    }

    fn memory_info(&self) -> Result<MemoryInfo> {
        self.bind()?;
        let (free, total) =
            result::mem_get_info().map_err(self.driver_error("querying device memory"))?;
        Ok(MemoryInfo { free, total })
    }

    fn alloc(&self, requester: &'static str, bytes: usize) -> Result<DevicePtr> {
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
                kernel: requester,
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

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        self.bind()?;
        // SAFETY: a fresh allocation; PORTABLE makes it pinned for every context of the process,
        // DEVICEMAP gives it a device address (the same as the host one under unified addressing).
        unsafe {
            result::malloc_host(
                bytes,
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
            )
        }
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

    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr> {
        self.bind().ok()?;
        let mut address: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` came from cuMemHostAlloc with DEVICEMAP (`alloc_pinned`); the driver
        // writes one device pointer to `address`.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut address, ptr as *mut c_void, 0) }
            .result()
            .inspect_err(|e| tracing::debug!(device = %self.name, "no device address for pinned memory: {e}"))
            .ok()?;
        Some(DevicePtr(address))
    }

    fn code_rank(&self, code: &Code<'_>) -> Option<u32> {
        let (major, minor) = self.compute_capability;
        match code {
            Code::Image(image) => image_rank(major * 10 + minor, image),
            Code::Host { .. } => None,
        }
    }

    fn target(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("sm_{major}{minor}")
    }

    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle> {
        self.bind()?;
        let rejected = |message: String| Error::Driver {
            device: self.name.clone(),
            operation: "loading an image",
            message,
        };
        let Code::Image(image) = code else {
            return Err(rejected("CUDA runs device images only".to_string()));
        };
        let module = load_module(image.format, image.bytes).map_err(|e| {
            rejected(format!(
                "the driver rejected the {:?} image for {}: {e}",
                image.format, image.target
            ))
        })?;
        tracing::debug!(device = %self.name, format = ?image.format, target = image.target, "loaded device image");
        self.shared
            .modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Module(module));
        Ok(ImageHandle(module as u64))
    }

    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle> {
        self.bind()?;
        let c_name = CString::new(name).map_err(|_| Error::Driver {
            device: self.name.clone(),
            operation: "finding a kernel entry",
            message: format!("`{name}` is not a symbol name"),
        })?;
        // SAFETY: the module is loaded and stays loaded until the device is released.
        let function = unsafe { result::module::get_function(image.0 as sys::CUmodule, c_name) }
            .map_err(|e| Error::Driver {
                device: self.name.clone(),
                operation: "finding a kernel entry",
                message: format!("the image has no entry point `{name}`: {e}"),
            })?;
        Ok(EntryHandle(function as u64))
    }

    fn entry_limits(&self, entry: EntryHandle) -> Result<EntryLimits> {
        self.bind()?;
        Ok(EntryLimits {
            max_threads_per_block: self
                .function_attribute(entry, FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            registers: self.function_attribute(entry, FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared: self
                .function_attribute(entry, FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        })
    }

    fn resident_blocks(
        &self,
        entry: EntryHandle,
        threads: u32,
        dynamic_shared: u32,
    ) -> Result<Option<u32>> {
        self.bind()?;
        // SAFETY: the handle comes from `find_entry`, of a module that stays loaded until the
        // device is released (`bind` checked that).
        let blocks = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                entry.0 as sys::CUfunction,
                threads as i32,
                dynamic_shared as usize,
            )
        }
        .map_err(self.driver_error("reading the kernel's occupancy"))?;
        Ok(Some(blocks.max(0) as u32))
    }

    fn find_global(&self, image: ImageHandle, name: &str) -> Result<Option<(DevicePtr, usize)>> {
        self.bind()?;
        let Ok(c_name) = CString::new(name) else {
            return Ok(None);
        };
        // SAFETY: the module is loaded. A missing global is an error answer.
        let global = unsafe { result::module::get_global(image.0 as sys::CUmodule, c_name) };
        Ok(global.ok().map(|(ptr, bytes)| (DevicePtr(ptr), bytes)))
    }

    unsafe fn launch(&self, entry: EntryHandle, shape: Shape, args: &PackedArgs) -> Result<()> {
        let function = entry.0 as sys::CUfunction;
        let Shape {
            grid,
            block,
            dynamic_shared,
        } = shape;
        if dynamic_shared > 0 {
            self.bind()?;
            // The layer above checked it against the device's opt-in limit; above 48 KiB the
            // function has to opt in too.
            // SAFETY: `function` comes from a loaded module.
            unsafe {
                result::function::set_function_attribute(
                    function,
                    FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic_shared as i32,
                )
            }
            .map_err(self.driver_error("setting the kernel's dynamic shared memory"))?;
        }
        // cuLaunchKernel takes a pointer to each parameter's bytes, and reads as many as the
        // entry's parameter of that position has. On the stack for the usual few parameters:
        // the launch path allocates nothing here.
        let params = args.params();
        let mut on_stack = [std::ptr::null_mut::<c_void>(); STACK_PARAMS];
        let mut on_heap = Vec::new();
        let pointers = if params.len() <= STACK_PARAMS {
            &mut on_stack[..params.len()]
        } else {
            on_heap.resize(params.len(), std::ptr::null_mut());
            &mut on_heap[..]
        };
        for (pointer, param) in pointers.iter_mut().zip(params) {
            // SAFETY: every offset lies inside the buffer.
            *pointer = unsafe { args.as_ptr().add(param.offset) } as *mut c_void;
        }
        // The raw `cuLaunchKernel` asks nothing about the current context: see `on_bound`.
        let launched = self.on_bound(|| {
            // SAFETY: `function` comes from a loaded module; `pointers` point at the entry's
            // parameters (the trait contract) and stay alive for the call (the driver copies
            // parameter values at launch).
            unsafe {
                result::launch_kernel(
                    function,
                    (grid.x, grid.y, grid.z),
                    (block.x, block.y, block.z),
                    dynamic_shared,
                    self.stream.cu_stream(),
                    pointers,
                )
            }
        })?;
        launched.map_err(|e| Error::Driver {
            device: self.name.clone(),
            operation: "launching a kernel",
            message: format!("launch refused: {e}"),
        })
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is alive; bound as `on_bound` says (the stream's own `synchronize`
        // would bind it again, a driver call more on every launch).
        self.on_bound(|| unsafe { result::stream::synchronize(self.stream.cu_stream()) })?
            .map_err(self.driver_error("synchronizing"))
    }

    fn release(&self) -> Result<()> {
        self.bind()?;
        self.shared.released.store(true, Ordering::Release);
        // Every stream of the device, not only this one.
        self.ctx
            .synchronize()
            .map_err(self.driver_error("synchronizing"))?;
        unload_all(
            &mut self
                .shared
                .modules
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        drop(std::mem::take(&mut *self.staging()));
        if self.ctx.has_async_alloc() {
            self.trim_pool()
                .map_err(self.driver_error("returning cached device memory"))?;
        }
        Ok(())
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
            shared: self.shared.clone(),
            mark: Mutex::new(None),
        }))
    }

    fn native_queue(&self) -> Option<NativeQueue> {
        Some(NativeQueue::Cuda {
            context: self.ctx.cu_ctx() as *mut c_void,
            stream: self.stream.cu_stream() as *mut c_void,
        })
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

    fn wait_for(&self, other: &dyn Backend) -> Result<()> {
        let Some(NativeQueue::Cuda { context, stream }) = other.native_queue() else {
            return self.wait_event(&*other.record_event()?);
        };
        if context != self.ctx.cu_ctx() as *mut c_void {
            return self.wait_event(&*other.record_event()?);
        }
        self.bind()?;
        let failed = self.driver_error("waiting for another queue");
        let mut mark = self.mark.lock().unwrap_or_else(|p| p.into_inner());
        let event = match &mut *mark {
            Some(event) => event,
            none => none.insert(
                self.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(&failed)?,
            ),
        };
        // SAFETY: the event and both streams belong to this context, bound above, and are alive
        // (`other` is borrowed for the call); a wait takes the point recorded before it.
        unsafe {
            result::event::record(event.cu_event(), stream as sys::CUstream).map_err(&failed)?;
            result::stream::wait_event(
                self.stream.cu_stream(),
                event.cu_event(),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
            .map_err(failed)
        }
    }

    fn begin_recording(&self) -> Result<bool> {
        self.bind()?;
        cuda_graph::begin(&self.stream).map_err(self.driver_error("starting a recording"))?;
        Ok(true)
    }

    fn end_recording(&self) -> Result<Box<dyn RecordedWork>> {
        self.bind()?;
        let graph = cuda_graph::end(&self.ctx, &self.stream, &self.name, &self.shared.released)
            .map_err(self.driver_error("ending a recording"))?;
        Ok(Box::new(graph))
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

/// Unloads every module, the context bound to this thread.
fn unload_all(modules: &mut Vec<Module>) {
    for Module(module) in modules.drain(..) {
        // SAFETY: callers guarantee that no launch is in flight (every stream of the device is
        // gone, or the device is being released with its work drained).
        let _ = unsafe { result::module::unload(module) };
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // Its pinned buffers and events belong to the context: release them while bound.
            drop(std::mem::take(
                self.staging.get_mut().unwrap_or_else(|p| p.into_inner()),
            ));
            unload_all(self.modules.get_mut().unwrap_or_else(|p| p.into_inner()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(format: ImageFormat, target: &'static str) -> DeviceImage {
        DeviceImage {
            format,
            target,
            bytes: b"",
        }
    }

    #[test]
    fn ranks_the_exact_cubin_first_then_the_newest_ptx_the_gpu_compiles() {
        let images = [
            image(ImageFormat::Cubin, "sm_90"),
            image(ImageFormat::Ptx, "sm_70"),
            image(ImageFormat::Ptx, "sm_90a"),
        ];
        let best = |sm| {
            images
                .iter()
                .filter_map(|i| Some((image_rank(sm, i)?, i)))
                .max_by_key(|(rank, _)| *rank)
                .map(|(_, i)| (i.format, i.target))
        };
        assert_eq!(best(90), Some((ImageFormat::Cubin, "sm_90")));
        // sm_90a code runs on 9.0 only.
        assert_eq!(best(100), Some((ImageFormat::Ptx, "sm_70")));
        assert_eq!(best(80), Some((ImageFormat::Ptx, "sm_70")));
        assert_eq!(best(61), None);
    }

    #[test]
    fn prefers_the_arch_specific_image_on_its_own_gpu() {
        let images = [
            image(ImageFormat::Cubin, "sm_90"),
            image(ImageFormat::Cubin, "sm_90a"),
        ];
        let best = images
            .iter()
            .filter_map(|i| Some((image_rank(90, i)?, i.target)))
            .max_by_key(|(rank, _)| *rank);
        assert_eq!(best.map(|b| b.1), Some("sm_90a"));
        let ptx = [
            image(ImageFormat::Ptx, "sm_90"),
            image(ImageFormat::Ptx, "sm_90a"),
        ];
        let ranks: Vec<_> = ptx.iter().map(|i| image_rank(90, i)).collect();
        assert!(ranks[1] > ranks[0], "{ranks:?}");
    }
}
