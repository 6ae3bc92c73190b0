//! The CUDA plugin, on the driver API loaded at run time (through cudarc's dynamic loading):
//! only `libcuda` is needed, and its absence just means no CUDA devices.

use super::{Backend, BackendKind, DevicePtr, Param};
use crate::image::ImageFormat;
use crate::kernel::Kernel;
use crate::launch::{Limits, Shape};
use crate::{Error, Result};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{result, CudaContext, CudaStream, DriverError};
use offload_kernel::Dim3;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

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
    limits: Limits,
    /// Loaded modules, keyed by the address of the `ImageSet` they came from.
    modules: Mutex<HashMap<usize, LoadedModule>>,
}

struct LoadedModule {
    module: sys::CUmodule,
    functions: HashMap<&'static str, sys::CUfunction>,
}

// SAFETY: CUmodule and CUfunction are driver handles, valid on any thread of the process; the
// driver API is thread-safe. The map holding them is behind a Mutex.
unsafe impl Send for LoadedModule {}

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
            threads_per_multiprocessor: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        };
        let name = format!("{} (CUDA device {ordinal}, sm_{major}{minor})", ctx.name()?);
        Ok(CudaBackend {
            ctx,
            stream,
            name,
            compute_capability: (major as u32, minor as u32),
            limits,
            modules: Mutex::new(HashMap::new()),
        })
    }

    fn driver_error(&self, operation: &'static str) -> impl Fn(DriverError) -> Error + '_ {
        move |e| Error::Driver { device: self.name.clone(), operation, message: e.to_string() }
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(self.driver_error("binding the context"))
    }

    /// The kernel's function handle, loading its crate's image on first use.
    fn function(&self, kernel: &Kernel) -> Result<sys::CUfunction> {
        let no_image = |reason: String| Error::NoImage { kernel: kernel.name, device: self.name.clone(), reason };
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let key = kernel.images as *const _ as usize;
        if !modules.contains_key(&key) {
            let (major, minor) = self.compute_capability;
            let image = kernel.images.best_for_cuda(major, minor).ok_or_else(|| {
                no_image(match kernel.images.unavailable {
                    Some(why) => format!("no device image was built ({why})"),
                    None => format!("no image fits sm_{major}{minor}"),
                })
            })?;
            let module = load_module(image.format, image.bytes)
                .map_err(|e| no_image(format!("the driver rejected the {:?} image for {}: {e}", image.format, image.target)))?;
            tracing::debug!(device = %self.name, format = ?image.format, target = image.target, "loaded device image");
            modules.insert(key, LoadedModule { module, functions: HashMap::new() });
        }
        let loaded = modules.get_mut(&key).expect("inserted above");
        if let Some(&f) = loaded.functions.get(kernel.name) {
            return Ok(f);
        }
        let c_name = CString::new(kernel.name).expect("kernel names are identifiers");
        // SAFETY: the module is loaded and stays loaded while the backend lives.
        let f = unsafe { result::module::get_function(loaded.module, c_name) }
            .map_err(|e| no_image(format!("the image has no entry point `{}`: {e}", kernel.name)))?;
        loaded.functions.insert(kernel.name, f);
        Ok(f)
    }
}

fn load_module(format: ImageFormat, bytes: &[u8]) -> std::result::Result<sys::CUmodule, DriverError> {
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

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
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

    fn alloc(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        // SAFETY: the stream is alive; the memory is used only on this stream.
        let allocated = unsafe {
            if self.ctx.has_async_alloc() {
                result::malloc_async(self.stream.cu_stream(), bytes)
            } else {
                result::malloc_sync(bytes)
            }
        };
        match allocated {
            Ok(ptr) => Ok(DevicePtr(ptr)),
            Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                Err(Error::OutOfMemory { kernel, device: self.name.clone(), bytes })
            }
            Err(e) => Err(self.driver_error("allocating device memory")(e)),
        }
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        if self.bind().is_err() {
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
        // SAFETY: per the trait contract. From pageable memory the driver stages the bytes before
        // returning, so the host memory is free to change afterwards.
        unsafe {
            let src = std::slice::from_raw_parts(src, bytes);
            result::memcpy_htod_async(dst.0, src, self.stream.cu_stream())
        }
        .map_err(self.driver_error("copying to the device"))
    }

    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: per the trait contract, `dst` stays valid and unused until `synchronize`.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(dst, bytes);
            result::memcpy_dtoh_async(dst, src.0, self.stream.cu_stream())
        }
        .map_err(self.driver_error("copying from the device"))
    }

    fn launch(&self, kernel: &Kernel, shape: Shape, params: &[Param]) -> Result<()> {
        self.bind()?;
        let function = self.function(kernel)?;
        // cuLaunchKernel takes a pointer to each parameter's bytes; words live in `words`.
        let words: Vec<u64> = params.iter().map(|p| if let Param::Word(w) = p { *w } else { 0 }).collect();
        let mut pointers: Vec<*mut c_void> = params
            .iter()
            .zip(&words)
            .map(|(p, w)| match p {
                Param::Value { ptr, .. } => *ptr as *mut c_void,
                Param::Word(_) => w as *const u64 as *mut c_void,
            })
            .collect();
        let Shape { grid, block } = shape;
        // SAFETY: `function` comes from a loaded module; `pointers` match the entry's parameter
        // list as generated by the kernel attribute, and stay alive for the call (the driver
        // copies parameter values at launch).
        unsafe {
            result::launch_kernel(
                function,
                (grid.x, grid.y, grid.z),
                (block.x, block.y, block.z),
                0,
                self.stream.cu_stream(),
                &mut pointers,
            )
        }
        .map_err(|e| Error::KernelFailed { kernel: kernel.name, device: self.name.clone(), message: format!("launch refused: {e}") })
    }

    fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.stream.synchronize().map_err(self.driver_error("synchronizing"))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let modules = self.modules.get_mut().unwrap_or_else(|p| p.into_inner());
        if self.ctx.bind_to_thread().is_ok() {
            for (_, loaded) in modules.drain() {
                // SAFETY: no launch can be in flight: the backend is being dropped.
                let _ = unsafe { result::module::unload(loaded.module) };
            }
        }
    }
}
