//! The raw CUDA driver, for launch-cost benchmarks to compare against in the same run: the
//! kernels' own device image loaded with `cuModuleLoadData`, and `cuLaunchKernel`,
//! `cuStreamSynchronize`, `cuMemcpy*Async` and stream-captured graphs on a stream of its own,
//! with no layer of offload in between.

use cudarc::driver::sys::{self, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{result, CudaContext, CudaStream, DriverError};
use offload::{Device, ImageFormat, Platform};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// A context, a stream and a module holding one image of a crate's kernels.
pub struct RawDriver {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: sys::CUmodule,
}

/// A kernel entry of the raw module.
#[derive(Clone, Copy)]
pub struct RawFunction(sys::CUfunction);

/// One launch's parameters, each a pointer to its bytes, as `cuLaunchKernel` takes them.
pub type RawParams<'a> = &'a mut [*mut c_void];

/// An instantiated graph (`cuGraphInstantiate` of a captured sequence).
pub struct RawGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl RawDriver {
    /// The driver on `device`, with the image of `images` that the device runs (its cubin, else
    /// PTX); `None` when `device` is not an NVIDIA GPU.
    pub fn new(device: &Device, images: &offload::ImageSet) -> Result<Option<Self>, DriverError> {
        if device.platform() != Platform::Cuda {
            return Ok(None);
        }
        let ctx = CudaContext::new(device.ordinal())?;
        let stream = ctx.new_stream()?;
        let (major, minor) = ctx.compute_capability()?;
        let sm = format!("sm_{major}{minor}");
        let image = images
            .images
            .iter()
            .find(|i| i.format == ImageFormat::Cubin && i.target == sm)
            .or_else(|| images.images.iter().find(|i| i.format == ImageFormat::Ptx));
        let Some(image) = image else {
            return Ok(None);
        };
        let bytes = match image.format {
            ImageFormat::Ptx => [image.bytes, &[0]].concat(),
            _ => image.bytes.to_vec(),
        };
        ctx.bind_to_thread()?;
        // SAFETY: a complete cubin or NUL-terminated PTX, alive for the call.
        let module = unsafe { result::module::load_data(bytes.as_ptr() as *const c_void) }?;
        Ok(Some(RawDriver {
            ctx,
            stream,
            module,
        }))
    }

    /// The entry `name`.
    pub fn function(&self, name: &str) -> Result<RawFunction, DriverError> {
        self.ctx.bind_to_thread()?;
        let name = CString::new(name).expect("a kernel name");
        // SAFETY: the module is loaded until `self` drops.
        unsafe { result::module::get_function(self.module, name) }.map(RawFunction)
    }

    /// `cuLaunchKernel` on the raw stream.
    ///
    /// # Safety
    /// `params` are `function`'s parameters and every address in them holds what the kernel
    /// reaches, until the launch completes.
    pub unsafe fn launch(
        &self,
        function: RawFunction,
        grid: u32,
        block: u32,
        params: RawParams<'_>,
    ) -> Result<(), DriverError> {
        let stream = self.stream.cu_stream();
        // SAFETY: per the contract.
        unsafe { result::launch_kernel(function.0, (grid, 1, 1), (block, 1, 1), 0, stream, params) }
    }

    /// `cuStreamSynchronize` of the raw stream.
    pub fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: the stream is alive.
        unsafe { result::stream::synchronize(self.stream.cu_stream()) }
    }

    /// Device memory of `bytes` bytes (freed by [`RawDriver::free`]).
    pub fn alloc(&self, bytes: usize) -> Result<u64, DriverError> {
        self.ctx.bind_to_thread()?;
        // SAFETY: the stream is alive; the memory is used on it only.
        unsafe { result::malloc_async(self.stream.cu_stream(), bytes) }
    }

    /// Queue freeing memory from [`RawDriver::alloc`].
    ///
    /// # Safety
    /// `ptr` came from `alloc` and is not used afterwards.
    pub unsafe fn free(&self, ptr: u64) -> Result<(), DriverError> {
        // SAFETY: per the contract.
        unsafe { result::free_async(ptr, self.stream.cu_stream()) }
    }

    /// `cuMemcpyHtoDAsync` of `src` (any host memory) to `dst`.
    ///
    /// # Safety
    /// `dst` holds `src`'s bytes; `src` stays unchanged until the stream synchronizes.
    pub unsafe fn copy_to_device<T>(&self, dst: u64, src: &[T]) -> Result<(), DriverError> {
        // SAFETY: per the contract.
        unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }
    }

    /// `cuMemcpyDtoHAsync` of `src` into `dst`.
    ///
    /// # Safety
    /// `src` holds `dst`'s bytes; `dst` is not used until the stream synchronizes.
    pub unsafe fn copy_from_device<T>(&self, dst: &mut [T], src: u64) -> Result<(), DriverError> {
        // SAFETY: per the contract.
        unsafe { result::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }
    }

    /// Time of `work` on the raw stream, measured by CUDA events around it, in milliseconds.
    pub fn device_time(
        &self,
        work: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<f64, DriverError> {
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (start, stop) = (self.ctx.new_event(timing)?, self.ctx.new_event(timing)?);
        start.record(&self.stream)?;
        work()?;
        stop.record(&self.stream)?;
        stop.synchronize()?;
        Ok(start.elapsed_ms(&stop)? as f64)
    }

    /// The launches `record` queues on the raw stream, captured into a graph instead of run.
    pub fn capture(
        &self,
        record: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<RawGraph, DriverError> {
        self.ctx.bind_to_thread()?;
        let stream = self.stream.cu_stream();
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: the stream is alive and not capturing.
        unsafe { result::stream::begin_capture(stream, mode) }?;
        let recorded = record();
        // SAFETY: the stream is capturing (ended whatever `record` returned).
        let graph = unsafe { result::stream::end_capture(stream) }?;
        recorded?;
        // SAFETY: a graph just captured.
        let exec = unsafe { result::graph::instantiate(graph, CUgraphInstantiate_flags(0)) }?;
        Ok(RawGraph { graph, exec })
    }

    /// `cuGraphLaunch` of `graph` on the raw stream.
    pub fn launch_graph(&self, graph: &RawGraph) -> Result<(), DriverError> {
        // SAFETY: the graph is instantiated, its launches' memory is the caller's (see
        // `capture`), the stream is alive.
        unsafe { result::graph::launch(graph.exec, self.stream.cu_stream()) }
    }
}

impl Drop for RawGraph {
    fn drop(&mut self) {
        // SAFETY: made by `capture`, not in use after the stream synchronized (callers do).
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

impl Drop for RawDriver {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() && self.synchronize().is_ok() {
            // SAFETY: the stream drained: no launch uses the module.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}
