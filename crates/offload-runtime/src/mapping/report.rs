//! What the last launch on this thread did: bytes moved and where the time went. For benchmarks
//! and for checking that data moved as expected.

use crate::mapping::device::Device;
use crate::plugins::Shape;
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

/// Whether [`measure_device_time`] is on (a plain launch also times its kernel while the trace
/// is on: `mapping::transfer` asks both).
pub(crate) fn device_time_measured() -> bool {
    DEVICE_TIME.load(Relaxed)
}

/// This thread's last report, and the generation of the code of the device it names
/// (`Loaded::generation`: unique in the process, so that it stands for that device's name).
struct Last {
    report: Option<LaunchReport>,
    named: Option<u64>,
}

thread_local! {
    static LAST: RefCell<Last> = const {
        RefCell::new(Last {
            report: None,
            named: None,
        })
    };
}

/// Keep `report`, of a launch on `device`, as this thread's last.
pub(crate) fn record(report: LaunchReport, device: &Device) {
    keep(device, |kept| {
        // The name goes into the buffer of the report it replaces.
        let name = std::mem::take(&mut kept.device);
        *kept = LaunchReport {
            device: name,
            ..report
        };
    });
}

/// Keep the report of a launch of `kernel` in `shape` queued on a stream of `device`, which
/// copies `bytes_to_device` bytes in and `bytes_from_device` back, as this thread's last:
/// written over the kept report, so that a loop of launches builds and moves no report. Its
/// times are zero and `None`: its kernel runs after the call returns, unobserved.
pub(crate) fn record_queued(
    kernel: &'static str,
    shape: Shape,
    bytes_to_device: usize,
    bytes_from_device: usize,
    device: &Device,
) {
    keep(device, |kept| {
        kept.kernel = kernel;
        kept.grid = Some(shape.grid);
        kept.block = Some(shape.block);
        kept.bytes_to_device = bytes_to_device;
        kept.bytes_from_device = bytes_from_device;
        kept.time_to_device = Duration::ZERO;
        kept.kernel_time = Duration::ZERO;
        kept.device_time = None;
        kept.time_from_device = Duration::ZERO;
    });
}

/// Change this thread's last report (a default one before the first) with `change`, then name
/// its device `device`: a loop of launches allocates nothing for the name, and neither asks the
/// device for it nor copies it while the device stays the same (a released device's code has
/// another generation: its name is copied again, unchanged).
fn keep(device: &Device, change: impl FnOnce(&mut LaunchReport)) {
    let code = device.code_generation();
    LAST.with_borrow_mut(|last| {
        let kept = last.report.get_or_insert_with(LaunchReport::default);
        change(kept);
        if last.named != Some(code) {
            kept.device.clear();
            kept.device.push_str(device.name());
            last.named = Some(code);
        }
    });
}

/// The report of the last successful launch made by this thread.
pub fn last_launch() -> Option<LaunchReport> {
    LAST.with(|l| l.borrow().report.clone())
}
