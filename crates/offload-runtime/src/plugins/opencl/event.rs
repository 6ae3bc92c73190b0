//! Queue events: OpenCL marker events on a profiling queue, timed by their end stamps.

use crate::plugins::interface::QueueEvent;
use crate::plugins::opencl::platform::ClPlatform;
use crate::plugins::opencl::sys::{self, Handle};
use crate::{Error, Result};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// A marker after the work queued before it.
pub struct ClEvent {
    pub(crate) event: Handle,
    platform: Arc<ClPlatform>,
    device: String,
}

// SAFETY: an OpenCL event may be waited on, queried and released from any thread.
unsafe impl Send for ClEvent {}
// SAFETY: as for `Send`: every use through `&ClEvent` is a thread-safe OpenCL call.
unsafe impl Sync for ClEvent {}

impl ClEvent {
    /// A marker after the work queued on `queue` so far.
    ///
    /// # Safety
    /// `queue` is a live queue of `platform`.
    pub(crate) unsafe fn record(
        platform: Arc<ClPlatform>,
        queue: Handle,
        device: &str,
    ) -> Result<ClEvent> {
        let mut event = std::ptr::null_mut();
        // SAFETY: the contract; the event is written to a local.
        let status = unsafe {
            (platform.api().clEnqueueMarkerWithWaitList)(queue, 0, std::ptr::null(), &mut event)
        };
        sys::check("clEnqueueMarkerWithWaitList", status).map_err(|message| Error::Driver {
            device: device.to_string(),
            operation: "recording an event",
            message,
        })?;
        Ok(ClEvent {
            event,
            platform,
            device: device.to_string(),
        })
    }

    fn failed(&self, operation: &'static str) -> impl Fn(String) -> Error + '_ {
        move |message| Error::Driver {
            device: self.device.clone(),
            operation,
            message,
        }
    }

    /// When the work before the marker had completed, in the device's nanoseconds.
    fn end(&self) -> Result<u64> {
        self.synchronize()?;
        let mut end = 0u64;
        // SAFETY: a completed event of a profiling queue; the stamp is written to a local.
        let status = unsafe {
            (self.platform.api().clGetEventProfilingInfo)(
                self.event,
                sys::PROFILING_COMMAND_END,
                8,
                (&mut end as *mut u64).cast(),
                std::ptr::null_mut(),
            )
        };
        sys::check("clGetEventProfilingInfo", status).map_err(self.failed("timing events"))?;
        Ok(end)
    }
}

impl QueueEvent for ClEvent {
    fn synchronize(&self) -> Result<()> {
        // SAFETY: a live event.
        let status = unsafe { (self.platform.api().clWaitForEvents)(1, &self.event) };
        sys::check("clWaitForEvents", status).map_err(self.failed("waiting for an event"))
    }

    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration> {
        let Some(start) = start.as_any().downcast_ref::<ClEvent>() else {
            return Err(self.failed("timing events")(
                "the start event is not an OpenCL event".to_string(),
            ));
        };
        Ok(Duration::from_nanos(
            self.end()?.saturating_sub(start.end()?),
        ))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for ClEvent {
    fn drop(&mut self) {
        // SAFETY: the event is ours and not used afterwards.
        unsafe { (self.platform.api().clReleaseEvent)(self.event) };
    }
}
