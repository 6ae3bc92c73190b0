//! What the last launch on this thread did: bytes moved and where the time went. For benchmarks
//! and for checking that data moved as expected.

use crate::backend::Shape;
use offload_kernel::Dim3;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// What one launch did: its shape, the bytes it moved and where the time went.
#[derive(Clone, Debug, Default)]
pub struct LaunchReport {
    /// The kernel launched.
    pub kernel: &'static str,
    /// The name of the device it ran on.
    pub device: String,
    /// Blocks in the grid (`None` before a shape was chosen).
    pub grid: Option<Dim3>,
    /// Threads in a block (`None` before a shape was chosen).
    pub block: Option<Dim3>,
    /// Bytes copied to the device for the launch.
    pub bytes_to_device: usize,
    /// Bytes copied back after it.
    pub bytes_from_device: usize,
    /// Time of the copies to the device.
    pub time_to_device: Duration,
    /// From submitting the kernel to its completion, measured on the host after the device had
    /// drained every earlier operation (so it includes launch latency, a few microseconds). Zero
    /// for a launch queued on a stream: its kernel runs after the call returns, unobserved.
    pub kernel_time: Duration,
    /// The kernel's time as the device measured it (events around the kernel alone), for plain
    /// launches while [`measure_device_time`] is on or `OFFLOAD_INFO` is set; `None` otherwise.
    pub device_time: Option<Duration>,
    /// Time of the copies back.
    pub time_from_device: Duration,
}

impl LaunchReport {
    /// The report of a launch of `kernel` in `shape`, before anything is measured; the device
    /// is named when it is recorded.
    pub(crate) fn new(kernel: &'static str, shape: Shape) -> Self {
        LaunchReport {
            kernel,
            grid: Some(shape.grid),
            block: Some(shape.block),
            ..LaunchReport::default()
        }
    }
}

/// Whether plain launches time their kernels with events.
static DEVICE_TIME: AtomicBool = AtomicBool::new(false);

/// Have plain launches from now on also time each kernel on the device, with a pair of events
/// around it ([`LaunchReport::device_time`]), or stop (`false`). `OFFLOAD_INFO=1` turns it on
/// too. Off by default, since the events add to each launch's cost.
pub fn measure_device_time(on: bool) {
    DEVICE_TIME.store(on, Relaxed);
}

/// Whether a plain launch should time its kernel on the device.
pub(crate) fn device_time_wanted() -> bool {
    DEVICE_TIME.load(Relaxed) || crate::trace::enabled()
}

thread_local! {
    static LAST: RefCell<Option<LaunchReport>> = const { RefCell::new(None) };
}

/// Keep `report`, of a launch on the device named `device`, as this thread's last.
pub(crate) fn record(mut report: LaunchReport, device: &str) {
    LAST.with_borrow_mut(|last| {
        // The name goes into the buffer of the report it replaces: a loop of launches allocates
        // nothing for it, and copies nothing while the device stays the same.
        if let Some(replaced) = last {
            report.device = std::mem::take(&mut replaced.device);
        }
        if report.device != device {
            report.device.clear();
            report.device.push_str(device);
        }
        *last = Some(report);
    });
}

/// The report of the last successful launch made by this thread.
pub fn last_launch() -> Option<LaunchReport> {
    LAST.with(|l| l.borrow().clone())
}
