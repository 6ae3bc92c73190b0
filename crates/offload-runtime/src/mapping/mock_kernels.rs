//! Kernels and a device on the mock GPU (`plugins::mock`), for the runtime's tests: a module of
//! its own, below every file whose tests use it, so that no test draws an import circle.

use crate::mapping::kernel::{Kernel, ThreadShare};
use crate::plugins::mock::{MockGpu, MOCK_TARGET};
use crate::plugins::PackedArgs;
use crate::{Device, DeviceImage, ImageFormat, ImageSet};
use offload_kernel::panic_record::{PanicRecord, PANIC_COMPLETE, PANIC_FILE_BYTES};
use std::sync::Arc;

/// Never runs: the mock runs device images only.
unsafe fn host_build(_: &PackedArgs) {}
unsafe fn host_threads_build(_: &PackedArgs, _: offload_kernel::host_context::ThreadRange) {}

pub(crate) const fn image(bytes: &'static [u8]) -> DeviceImage {
    DeviceImage {
        format: ImageFormat::Ptx,
        target: MOCK_TARGET,
        bytes,
    }
}

pub(crate) static GOOD: ImageSet = ImageSet {
    images: &[image(b"an image")],
    kernels: &["fill", "other", "missing_entry"],
    unavailable: None,
};

/// A kernel of parameters `value` and `out`.
pub(crate) const fn kernel(name: &'static str, images: &'static ImageSet) -> Kernel {
    kernel_of(name, images, &["value", "out"])
}

/// A kernel of parameters `params`, for tests whose errors name them.
pub(crate) const fn kernel_of(
    name: &'static str,
    images: &'static ImageSet,
    params: &'static [&'static str],
) -> Kernel {
    Kernel {
        name,
        images,
        host_thread: host_build,
        host_threads: host_threads_build,
        params,
        share: ThreadShare::Batched,
    }
}

pub(crate) static FILL: Kernel = kernel("fill", &GOOD);

/// A mock GPU of 1 MiB and its device.
pub(crate) fn mock() -> (Arc<MockGpu>, Device) {
    mock_of(1 << 20)
}

/// A mock GPU of `capacity` bytes and its device.
pub(crate) fn mock_of(capacity: usize) -> (Arc<MockGpu>, Device) {
    let gpu = Arc::new(MockGpu::new(capacity));
    let device = Device::unlisted(gpu.clone());
    (gpu, device)
}

/// `panicked at src/kernels.rs:12:20` in block 3, thread 231.
pub(crate) fn record() -> PanicRecord {
    let mut file = [0; PANIC_FILE_BYTES];
    file[..14].copy_from_slice(b"src/kernels.rs");
    PanicRecord {
        flag: PANIC_COMPLETE,
        line: 12,
        column: 20,
        file_len: 14,
        block: [3, 0, 0],
        thread: [231, 0, 0],
        file,
    }
}
