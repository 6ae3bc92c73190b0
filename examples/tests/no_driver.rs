//! Without a usable CUDA driver (libcuda absent, as on CI machines), discovery says why, launches
//! fall back to the host backend, and `OFFLOAD_REQUIRE_GPU=1` turns that fallback into an error
//! naming the reason, with the caller's data untouched. One test in its own binary: it sets
//! environment variables.

use offload::{Device, Error};
use offload_examples::{kernels, reference};
use std::io::Write;

#[test]
fn without_a_driver_launches_fall_back_to_the_host_unless_a_gpu_is_required() {
    if let Some(gpu) = offload::devices().iter().find(|d| d.is_gpu()) {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED without_a_driver: this machine has a GPU ({}); the test covers machines without one",
            gpu.name()
        );
        return;
    }
    let x = vec![1.5f32; 3000];
    let y0 = vec![-2.0f32; 3000];

    std::env::set_var("OFFLOAD_REQUIRE_GPU", "1");
    let mut y = y0.clone();
    match kernels::saxpy(2.0, &x, &mut y) {
        Err(Error::NoDevice(reason)) => {
            assert!(
                reason.starts_with("OFFLOAD_REQUIRE_GPU=1, but CUDA: "),
                "{reason}"
            );
            assert!(
                reason.contains("libcuda") || reason.contains("no device"),
                "the reason names the missing driver or device: {reason}"
            );
        }
        other => panic!("expected NoDevice with OFFLOAD_REQUIRE_GPU=1, got {other:?}"),
    }
    assert_eq!(y, y0, "a refused launch leaves the output alone");
    assert!(offload::default_device().is_err());

    std::env::remove_var("OFFLOAD_REQUIRE_GPU");
    kernels::saxpy(2.0, &x, &mut y).unwrap();
    let mut expected = y0.clone();
    reference::saxpy(2.0, &x, &mut expected);
    assert_eq!(y, expected);
    assert_eq!(
        offload::last_launch().unwrap().device,
        Device::host().name(),
        "the launch ran on the host backend"
    );
}
