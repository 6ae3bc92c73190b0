//! Every example kernel on the host backend, against plain CPU loops.

mod common;

use offload::{Device, Error};
use offload_examples::kernels;

fn host() -> Device {
    Device::host()
}

#[test]
fn saxpy_matches_cpu() {
    common::saxpy_matches_cpu(&host());
}

#[test]
fn stencil_matches_cpu() {
    common::stencil_matches_cpu(&host());
}

#[test]
fn integer_kernel_with_two_outputs_matches_cpu() {
    common::integer_kernel_with_two_outputs_matches_cpu(&host());
}

#[test]
fn every_launch_shape_covers_every_element() {
    common::every_launch_shape_covers_every_element(&host());
}

#[test]
fn global_ids_are_dense_and_unique() {
    common::global_ids_are_dense_and_unique(&host());
}

#[test]
fn invalid_launches_are_errors_naming_the_limit() {
    common::invalid_launches_are_errors_naming_the_limit(&host());
}

/// A kernel that panics (here a bounds check: x is shorter than y) makes the launch an `Err`
/// naming the kernel and the panic, and leaves the output slice as it was.
#[test]
fn kernel_panic_is_an_error_and_outputs_are_untouched() {
    let x = vec![1.0f32; 10];
    let mut y = vec![2.0f32; 1000];
    let err = kernels::saxpy::launch(offload::Launch::on(&host()), 1.0, &x, &mut y).unwrap_err();
    match &err {
        Error::KernelFailed { kernel: "saxpy", message, .. } => {
            assert!(message.contains("index out of bounds"), "{message}")
        }
        other => panic!("expected KernelFailed, got {other:?}"),
    }
    assert!(y.iter().all(|&v| v == 2.0), "no element of y changed");
    // The backend stays usable.
    let mut y = vec![2.0f32; 10];
    kernels::saxpy::launch(offload::Launch::on(&host()), 1.0, &x, &mut y).unwrap();
    assert!(y.iter().all(|&v| v == 3.0));
}

#[test]
fn last_launch_reports_the_shape_and_no_copies() {
    let x = vec![1.0f32; 1000];
    let mut y = vec![0.0f32; 1000];
    kernels::saxpy::launch(offload::Launch::on(&host()), 2.0, &x, &mut y).unwrap();
    let report = offload::last_launch().unwrap();
    assert_eq!(report.kernel, "saxpy");
    assert_eq!(report.grid, Some(offload::Dim3::new(4, 1, 1)), "1000 elements, one per thread, in blocks of 256");
    assert_eq!(report.bytes_to_device, 0, "the host backend reads host memory in place");
}
