//! Launches recorded on a CUDA stream (stream capture) and replayed as one graph
//! (`cuGraphInstantiate`, `cuGraphLaunch`): the CUDA plugin's side of
//! [`Backend::begin_recording`](crate::plugins::Backend::begin_recording). One `cuGraphLaunch`
//! queues every recorded kernel, at a fraction of a launch's host cost each.

use crate::plugins::interface::RecordedWork;
use crate::{Error, Result};
use cudarc::driver::sys::{self, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{result, CudaContext, CudaStream, DriverError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An instantiated graph and the stream that recorded it (and replays it).
pub(super) struct CudaGraph {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    device: String,
    /// The device's released flag: a replay after `Backend::release` is refused.
    released: Arc<AtomicBool>,
}

// SAFETY: graph handles are driver objects usable from any thread; the driver API is
// thread-safe, and a replay only reads them.
unsafe impl Send for CudaGraph {}
// SAFETY: as above.
unsafe impl Sync for CudaGraph {}

/// Start capturing the launches queued on `stream` (the context bound). Relaxed mode: other
/// threads' driver calls meanwhile are not this capture's concern, and only launches are queued
/// on the stream while it records.
pub(super) fn begin(stream: &CudaStream) -> std::result::Result<(), DriverError> {
    let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: the stream is alive and not capturing (the layer above records one at a time).
    unsafe { result::stream::begin_capture(stream.cu_stream(), mode) }
}

/// End the capture `begin` started on `stream` (the context bound) and instantiate it.
pub(super) fn end(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    device: &str,
    released: &Arc<AtomicBool>,
) -> std::result::Result<CudaGraph, DriverError> {
    // SAFETY: the stream is capturing (`begin` succeeded).
    let graph = unsafe { result::stream::end_capture(stream.cu_stream()) }?;
    // SAFETY: a graph just captured.
    let exec = match unsafe { result::graph::instantiate(graph, CUgraphInstantiate_flags(0)) } {
        Ok(exec) => exec,
        Err(e) => {
            // SAFETY: captured above, used by nothing else.
            let _ = unsafe { result::graph::destroy(graph) };
            return Err(e);
        }
    };
    Ok(CudaGraph {
        ctx: ctx.clone(),
        stream: stream.clone(),
        graph,
        exec,
        device: device.to_string(),
        released: released.clone(),
    })
}

impl RecordedWork for CudaGraph {
    unsafe fn replay(&self) -> Result<()> {
        let failed = |message: String| Error::Driver {
            device: self.device.clone(),
            operation: "replaying recorded launches",
            message,
        };
        if self.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.device.clone(),
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| failed(e.to_string()))?;
        // SAFETY: instantiated and not destroyed; its launches' memory is alive (the caller's
        // contract); the stream is alive.
        unsafe { result::graph::launch(self.exec, self.stream.cu_stream()) }
            .map_err(|e| failed(format!("launch refused: {e}")))
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // Replays may still be queued: wait for the stream before destroying what they run.
        if self.ctx.bind_to_thread().is_err() || self.stream.synchronize().is_err() {
            return;
        }
        // SAFETY: no replay is in flight any more, and nothing else holds the handles.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}
