//! cuBLAS on offload's data (`offload::blas`), the raw handles behind it, and the CG solver that
//! mixes both with offload's kernels (`cg::solve_cublas`): on the host backend, and on a GPU
//! driven by the CUDA plugin (skipped visibly without one; a failure with
//! `OFFLOAD_REQUIRE_GPU=1`). Built with the `cublas` feature (on by default); the CG solver
//! without cuBLAS is tests/cg_reductions.rs's.
#![cfg(feature = "cublas")]

use offload::blas::Blas;
use offload::{BackendKind, Device, DeviceVec, Error, NativeQueue};
use offload_ecosystem_examples::cg::{self, Problem};

mod common;

/// The first GPU the CUDA plugin drives (also when `OFFLOAD_BACKEND=liboffload` lists it through
/// liboffload), if images were built.
fn cuda_gpu(test: &str) -> Option<Device> {
    common::gpu_or_skip(
        test,
        offload::devices_of(BackendKind::Cuda).first(),
        "no GPU driven by the CUDA plugin (cuBLAS needs it)",
    )
}

/// A GPU driven by another plugin (liboffload) has no CUDA stream to give cuBLAS: `Blas::new` says
/// so instead of failing later.
fn blas_needs_the_cuda_plugin(gpu: &Device) {
    let refused = offload::scope(|s| Blas::new(&s.stream(gpu)?).map(|_| ()));
    match refused {
        Err(Error::NoDevice(reason)) => assert!(reason.contains("CUDA plugin"), "{reason}"),
        other => panic!("expected NoDevice on {}, got {other:?}", gpu.name()),
    }
}

fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

/// dot, axpy and scal on device slices equal the CPU's (within the rounding of a sum in another
/// order), in order with each other on one stream.
fn blas_matches_cpu(device: &Device) {
    let len = 100_003;
    let (x, y) = (values(len, 1), values(len, 2));
    let scalars_in = [0.75f64, -2.5];
    let (dot, y_after) = offload::scope(|s| {
        let stream = s.stream(device)?;
        let blas = Blas::new(&stream)?;
        let (dx, dy) = (stream.upload(&x)?, stream.upload(&y)?);
        let scalars = stream.upload(&scalars_in)?;
        let result = stream.alloc_zeroed::<f64>(1)?;
        blas.axpy(scalars.slice(0..1)?, dx, dy)?; // y += 0.75 x
        blas.scal(scalars.slice(1..2)?, dy)?; // y *= -2.5
        blas.dot(dx, dy, result)?;
        Ok((stream.to_vec(result)?[0], stream.to_vec(dy)?))
    })
    .unwrap();
    let expected: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| (y + 0.75 * x) * -2.5)
        .collect();
    if device.kind() == BackendKind::Host {
        assert_eq!(
            y_after, expected,
            "axpy then scal on the host device: the CPU's loops"
        );
    } else {
        // cuBLAS fuses axpy's multiply and add (one rounding where the CPU has two).
        for ((got, want), (x, y)) in y_after.iter().zip(&expected).zip(x.iter().zip(&y)) {
            let bound = 4.0 * f64::EPSILON * 2.5 * (y.abs() + 0.75 * x.abs());
            assert!(
                (got - want).abs() <= bound,
                "axpy then scal: {got} against {want}"
            );
        }
    }
    // The dot product of what the device holds, within the rounding of a sum in any order.
    let exact: f64 = x.iter().zip(&y_after).map(|(a, b)| a * b).sum();
    let magnitude: f64 = x.iter().zip(&y_after).map(|(a, b)| (a * b).abs()).sum();
    let bound = 2.0 * len as f64 * f64::EPSILON * magnitude;
    assert!(
        (dot - exact).abs() <= bound,
        "dot {dot} against {exact} on {}",
        device.name()
    );
}

/// Wrong operands are errors, with nothing queued: lengths, a non-scalar alpha, a written
/// operand that overlaps an input; so is a call while the stream records a graph.
fn blas_refuses_bad_operands(device: &Device) {
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let blas = Blas::new(&stream)?;
        let v = stream.alloc_zeroed::<f32>(10)?;
        let (a, b) = (v.slice(0..4)?, v.slice(4..9)?);
        let one = v.slice(9..10)?;
        assert!(matches!(blas.dot(a, b, one), Err(Error::LengthMismatch { expected: 4, found: 5, .. })));
        assert!(matches!(blas.axpy(a, a, a), Err(Error::LengthMismatch { expected: 1, found: 4, .. })));
        let overlapping = blas.axpy(one, v.slice(0..4)?, v.slice(2..6)?);
        assert!(
            matches!(&overlapping, Err(Error::InvalidArgument { reason, .. }) if reason.contains("shares device memory")),
            "{overlapping:?}"
        );
        assert!(matches!(v.slice(8..11), Err(Error::OutOfRange { end: 11, len: 10, .. })));
        let recorded = stream.record_graph(|_| blas.scal(one, a)).map(|g| g.len());
        assert!(
            matches!(&recorded, Err(Error::InvalidLaunch { kernel: "offload::Blas::scal", reason, .. }) if reason.contains("recording")),
            "{recorded:?}"
        );
        Ok(())
    })
    .unwrap();
}

/// CG with offload's kernels and BLAS converges to the CPU solve's solution.
fn cg_matches_cpu(device: &Device, n: usize) {
    let problem = Problem {
        n,
        tolerance: 1e-9,
        max_iterations: 10 * n,
        check_every: 5,
    };
    let b = cg::right_hand_side(n);
    let on_device = cg::solve_cublas(device, &problem, &b).unwrap();
    let on_cpu = cg::solve_cpu(&problem, &b);
    assert!(on_device.residual < problem.tolerance, "{on_device:?}");
    assert!(cg::true_residual(n, &b, &on_device.x) < 10.0 * problem.tolerance);
    assert!(on_device.iterations.abs_diff(on_cpu.iterations) <= problem.check_every);
    let difference = cg::relative_difference(&on_device.x, &on_cpu.x);
    assert!(difference < 1e-7, "{difference:e} on {}", device.name());
    if device.kind() == BackendKind::Host {
        // The same loops in the same order: the same bits.
        assert_eq!(on_device.x, on_cpu.x);
    }
}

#[test]
fn blas_and_cg_on_the_host_backend() {
    let host = Device::host();
    blas_matches_cpu(&host);
    blas_refuses_bad_operands(&host);
    cg_matches_cpu(&host, 48);
    // The host device has no queue of its own to hand out.
    offload::scope(|s| {
        assert_eq!(s.stream(&host)?.native_queue(), None);
        Ok(())
    })
    .unwrap();
    // A DeviceVec's device address is its host address there: what a library would read.
    let data = values(33, 3);
    let v = DeviceVec::from_slice(&host, &data).unwrap();
    // SAFETY: host memory of 33 f64 that nothing writes while `v` is borrowed.
    let seen = unsafe { std::slice::from_raw_parts(v.device_ptr() as *const f64, data.len()) };
    assert_eq!(seen, data);
}

#[test]
fn blas_and_cg_on_a_cuda_gpu() {
    let Some(gpu) = cuda_gpu("blas_and_cg_on_a_cuda_gpu") else {
        return;
    };
    blas_matches_cpu(&gpu);
    blas_refuses_bad_operands(&gpu);
    cg_matches_cpu(&gpu, 128);
    device_memory_is_reachable_through_the_driver(&gpu);
    for other in offload::devices_of(BackendKind::LibOffload) {
        blas_needs_the_cuda_plugin(&other);
    }
}

/// A DeviceVec's and a DeviceSlice's device pointers, read through the driver API in the
/// stream's context: what a vendor library sees.
fn device_memory_is_reachable_through_the_driver(gpu: &Device) {
    use cudarc::driver::{result, sys};
    let data = values(1000, 4);
    let v = DeviceVec::from_slice(gpu, &data).unwrap();
    offload::scope(|s| {
        let stream = s.stream(gpu)?;
        let Some(NativeQueue::Cuda {
            context,
            stream: cu_stream,
        }) = stream.native_queue()
        else {
            panic!("a CUDA stream expected on {}", gpu.name());
        };
        assert!(!context.is_null() && !cu_stream.is_null());
        let d = stream.upload(&data)?;
        stream.synchronize()?;
        for address in [v.device_ptr(), d.device_ptr()] {
            let mut seen = vec![0.0f64; data.len()];
            // SAFETY: the device's primary context; `address` holds 1000 f64 (the upload has
            // completed: the stream was synchronized) and `seen` as many.
            unsafe {
                result::ctx::set_current(context as sys::CUcontext).unwrap();
                result::memcpy_dtoh_sync(&mut seen, address).unwrap();
            }
            assert_eq!(seen, data);
        }
        Ok(())
    })
    .unwrap();
}
