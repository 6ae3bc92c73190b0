//! What the last launch on this thread did: bytes moved and where the time went. For benchmarks
//! and for checking that data moved as expected.

use crate::backend::Shape;
use offload_kernel::Dim3;
use std::cell::RefCell;
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct LaunchReport {
    pub kernel: &'static str,
    pub device: String,
    pub grid: Option<Dim3>,
    pub block: Option<Dim3>,
    pub bytes_to_device: usize,
    pub bytes_from_device: usize,
    pub time_to_device: Duration,
    /// From submitting the kernel to its completion, measured on the host after the device had
    /// drained every earlier operation (so it includes launch latency, a few microseconds).
    pub kernel_time: Duration,
    pub time_from_device: Duration,
}

impl LaunchReport {
    /// The report of a launch of `kernel` on `device` in `shape`, before anything is measured.
    pub(crate) fn new(kernel: &'static str, device: &str, shape: Shape) -> Self {
        LaunchReport {
            kernel,
            device: device.to_string(),
            grid: Some(shape.grid),
            block: Some(shape.block),
            ..LaunchReport::default()
        }
    }
}

thread_local! {
    static LAST: RefCell<Option<LaunchReport>> = const { RefCell::new(None) };
}

pub(crate) fn record(report: LaunchReport) {
    LAST.with(|l| *l.borrow_mut() = Some(report));
}

/// The report of the last successful launch made by this thread.
pub fn last_launch() -> Option<LaunchReport> {
    LAST.with(|l| l.borrow().clone())
}
