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

pub(crate) const fn kernel(name: &'static str, images: &'static ImageSet) -> Kernel {
    Kernel {
        name,
        images,
        host_thread: host_build,
        host_threads: host_threads_build,
        params: &["value", "out"],
        share: ThreadShare::Batched,
    }
}

pub(crate) static FILL: Kernel = kernel("fill", &GOOD);

pub(crate) fn mock() -> (Arc<MockGpu>, Device) {
    let gpu = Arc::new(MockGpu::new(1 << 20));
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
