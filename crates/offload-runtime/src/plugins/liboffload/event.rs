//! Events of a liboffload queue. liboffload 22's events order queues but carry no time, so each
//! event is preceded on its queue by a host function that notes the moment the queue reached it;
//! the time between two events is the time between those moments.

use crate::plugins::interface::QueueEvent;
use crate::plugins::liboffload::handle::Handle;
use crate::plugins::liboffload::result::Ol;
use crate::plugins::liboffload::sys;
use crate::{Error, Result};
use std::any::Any;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub struct OlEvent {
    ol: Ol,
    pub(super) handle: Handle<sys::ol_event_impl_t>,
    /// The device the event belongs to, by name (errors) and identity (waits).
    pub(super) device: String,
    pub(super) device_key: usize,
    /// When the queue reached the event; `None` when liboffload would not queue the host
    /// function that notes it.
    reached: Option<Arc<OnceLock<Instant>>>,
}

impl OlEvent {
    /// Notes the moment `queue` reaches this point, then records an event there.
    ///
    /// # Safety
    /// `queue` is a live queue of the device named `device`.
    pub unsafe fn record(
        ol: Ol,
        queue: sys::ol_queue_handle_t,
        device: &str,
        device_key: usize,
    ) -> Result<OlEvent> {
        let reached = Arc::new(OnceLock::new());
        let user_data = Arc::into_raw(reached.clone()) as *mut c_void;
        // SAFETY: `note_time` takes back the `Arc` given to it, once; `queue` is live.
        let noted = unsafe { ol.launch_host_function(queue, note_time, user_data) };
        let reached = match noted {
            Ok(()) => Some(reached),
            Err(e) => {
                // SAFETY: the callback was not queued, so the reference is still ours.
                drop(unsafe { Arc::from_raw(user_data as *const OnceLock<Instant>) });
                tracing::debug!(device, "liboffload cannot time this queue's events: {e}");
                None
            }
        };
        // SAFETY: per this function's contract.
        let handle = unsafe { ol.create_event(queue) }.map_err(|e| Error::Driver {
            device: device.to_string(),
            operation: "recording an event",
            message: e.to_string(),
        })?;
        Ok(OlEvent {
            ol,
            handle: Handle(handle),
            device: device.to_string(),
            device_key,
            reached,
        })
    }

    /// `event` as a liboffload event of the device with key `device_key`.
    pub fn of<'e>(
        event: &'e dyn QueueEvent,
        device: &str,
        device_key: usize,
    ) -> Result<&'e OlEvent> {
        event
            .as_any()
            .downcast_ref::<OlEvent>()
            .filter(|e| e.device_key == device_key)
            .ok_or_else(|| Error::Driver {
                device: device.to_string(),
                operation: "waiting for an event",
                message: "the event belongs to another device".to_string(),
            })
    }

    fn failed(&self, operation: &'static str) -> impl Fn(String) -> Error + '_ {
        move |message| Error::Driver {
            device: self.device.clone(),
            operation,
            message,
        }
    }
}

/// Host function queued before each event: notes when the queue got there.
unsafe extern "C" fn note_time(user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Arc` that `OlEvent::record` gave away for this one call.
    let reached = unsafe { Arc::from_raw(user_data as *const OnceLock<Instant>) };
    let _ = reached.set(Instant::now());
}

impl QueueEvent for OlEvent {
    fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is live while `self` is.
        unsafe { self.ol.sync_event(self.handle.0) }
            .map_err(|e| self.failed("waiting for an event")(e.to_string()))
    }

    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration> {
        let start = OlEvent::of(start, &self.device, self.device_key)?;
        start.synchronize()?;
        self.synchronize()?;
        let failed = self.failed("timing events");
        let moment = |event: &OlEvent| {
            event
                .reached
                .as_ref()
                .ok_or_else(|| {
                    failed("liboffload did not queue the host function that times it".to_string())
                })?
                .get()
                .copied()
                .ok_or_else(|| {
                    failed("the queue passed the event before noting its time".to_string())
                })
        };
        Ok(moment(self)?.saturating_duration_since(moment(start)?))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for OlEvent {
    fn drop(&mut self) {
        // SAFETY: the event is not used after this.
        if let Err(e) = unsafe { self.ol.destroy_event(self.handle.0) } {
            tracing::debug!(device = %self.device, "destroying an event failed: {e}");
        }
    }
}
