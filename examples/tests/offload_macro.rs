//! `offload::offload!`, the launch syntax of rustc nightly's `core::offload::offload!`, on the
//! host backend.

use offload::{BackendKind, Error};
use offload_examples::{kernels, reference};

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let mut expected = y.clone();
    reference::saxpy(2.0, &x, &mut expected);
    (x, y, expected)
}

fn host_index() -> usize {
    offload::devices()
        .iter()
        .position(|d| d.kind() == BackendKind::Host)
        .expect("the host is always listed")
}

#[test]
fn every_field_in_any_order() {
    let (x, mut y, expected) = inputs(10_000);
    let host = host_index();
    offload::offload! {
        thread_dim = [64, 1, 1],
        kernel = kernels::saxpy,
        workgroup_dim = [8, 1, 1],
        dyn_cache = 0,
        device = host,
        args = (2.0f32, &x, &mut y),
    }
    .unwrap();
    assert_eq!(y, expected);
}

/// Defaults are one workgroup of one thread: grid-stride iteration still covers every element.
#[test]
fn defaults_only_one_thread_covers_everything() {
    let (x, mut y, expected) = inputs(3_001);
    offload::offload! { kernel = kernels::saxpy, args = (2.0f32, &x, &mut y) }.unwrap();
    assert_eq!(y, expected);
    let report = offload::last_launch().expect("a launch was recorded");
    assert_eq!(
        (report.grid, report.block),
        (
            Some(offload::Dim3::new(1, 1, 1)),
            Some(offload::Dim3::new(1, 1, 1))
        )
    );
}

#[test]
fn device_by_index_is_the_host() {
    let (x, mut y, expected) = inputs(777);
    let host = host_index();
    let r = offload::offload! { kernel = kernels::saxpy, device = host, workgroup_dim = [2, 2, 1], thread_dim = [4, 2, 2], args = (2.0f32, &x, &mut y) };
    r.unwrap();
    assert_eq!(y, expected);
}

#[test]
fn out_of_range_device_is_no_device_and_leaves_data() {
    let (x, mut y, _) = inputs(16);
    let before = y.clone();
    let n = offload::devices().len();
    let err =
        offload::offload! { kernel = kernels::saxpy, device = n + 2, args = (2.0f32, &x, &mut y) }
            .unwrap_err();
    match &err {
        Error::NoDevice(msg) => {
            assert!(
                msg.contains(&format!("device index {} is out of range", n + 2)),
                "{msg}"
            );
            assert!(msg.contains(offload::Device::host().name()), "{msg}");
        }
        other => panic!("expected NoDevice, got {other:?}"),
    }
    assert_eq!(y, before);
}

/// `dyn_cache` is the launch's dynamic shared memory: the kernel reverses each block of 64
/// through it, and too much of it is an error naming the device's limit.
#[test]
fn dyn_cache_is_dynamic_shared_memory() {
    let host = host_index();
    let x: Vec<f32> = (0..200).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 200];
    offload::offload! {
        kernel = kernels::block::reverse_chunks_dynamic,
        workgroup_dim = [2, 1, 1],
        thread_dim = [64, 1, 1],
        dyn_cache = 64 * 4,
        device = host,
        args = (&x, &mut out),
    }
    .unwrap();
    let expected: Vec<f32> = x.chunks(64).flat_map(|c| c.iter().rev().copied()).collect();
    assert_eq!(out, expected);
    let too_much = offload::offload! {
        kernel = kernels::block::reverse_chunks_dynamic,
        thread_dim = [64, 1, 1],
        dyn_cache = 1 << 20,
        device = host,
        args = (&x, &mut out),
    };
    match too_much {
        Err(Error::InvalidLaunch { reason, .. }) => {
            assert!(
                reason.contains("exceed the device limit of 49152 bytes"),
                "{reason}"
            )
        }
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
}
