//! A device image the driver cannot load is an `Err(NoImage)` naming the kernel and the driver's
//! reason, every time it is tried, and the device stays usable for other images.

mod common;

use offload::{DeviceImage, Error, ImageFormat, ImageSet, Launch};
use offload_examples::{kernels, reference};

/// This test crate's "device images": a cubin that is not one, for every architecture the tests
/// may meet, so the driver gets to reject it instead of our image selection.
static __OFFLOAD_IMAGES: ImageSet = ImageSet {
    images: &[
        DeviceImage {
            format: ImageFormat::Cubin,
            target: "sm_90",
            bytes: b"\x7fELF\x02\x01\x01 this is no cubin",
        },
        DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_50",
            bytes: b".version 1.0\n.target sm_50\nthis is no PTX\n",
        },
    ],
    kernels: &["fill"],
    unavailable: None,
};

#[offload::kernel]
fn fill(value: u32, out: &mut [u32]) {
    for (_, o) in out.iter_mine() {
        *o = value;
    }
}

#[test]
fn an_image_the_driver_rejects_is_an_error_and_the_device_stays_usable() {
    let Some(gpu) = common::gpu::gpu("an_image_the_driver_rejects_is_an_error") else {
        return;
    };
    let mut out = vec![7u32; 1000];
    for attempt in 0..2 {
        match fill::launch(Launch::on(&gpu), 3, &mut out) {
            Err(Error::NoImage {
                kernel: "fill",
                reason,
                ..
            }) => assert!(
                reason.starts_with("the driver rejected the "),
                "attempt {attempt}: {reason}"
            ),
            other => panic!("attempt {attempt}: expected NoImage, got {other:?}"),
        }
        assert!(out.iter().all(|&v| v == 7), "the output is untouched");
    }
    let x = common::floats(5000, 1);
    let mut y = common::floats(5000, 2);
    let mut expected = y.clone();
    reference::saxpy(0.5, &x, &mut expected);
    kernels::saxpy::launch(Launch::on(&gpu), 0.5, &x, &mut y).unwrap();
    assert_eq!(y, expected, "a good image still runs on the same device");
}

/// On the host backend the same kernel needs no image.
#[test]
fn the_host_backend_needs_no_image() {
    let mut out = vec![7u32; 1000];
    fill::launch(Launch::on(&offload::Device::host()), 3, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 3));
}
