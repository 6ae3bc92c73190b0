//! Checks shared by the host-backend and GPU test suites: each runs every example kernel on one
//! device and compares with plain CPU loops, bit for bit.
#![allow(dead_code)]

pub mod atomics;
pub mod gpu;
pub mod graphs;
pub mod hopper;
pub mod mapping;
pub mod outputs;
pub mod streams;
pub mod warps;

use offload::{Device, Dim3, Error, Launch};
use offload_examples::kernels::{self, Grid2};
use offload_examples::reference;

pub const SIZES: [usize; 6] = [0, 1, 255, 256, 257, 1_000_000];

/// Deterministic pseudo-random floats in [-1, 1), different for every seed.
pub use offload_examples::reference_gemm::uniform as floats;

pub fn ints(n: usize, seed: u64) -> Vec<i64> {
    floats(n, seed)
        .iter()
        .map(|f| (f * 9.0e18) as i64)
        .collect()
}

pub fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(g, e)| g.to_bits() == e.to_bits())
}

pub fn saxpy_matches_cpu(device: &Device) {
    for n in SIZES {
        let x = floats(n, 1);
        let y0 = floats(n, 2);
        let mut expected = y0.clone();
        reference::saxpy(-1.75, &x, &mut expected);
        let mut y = y0.clone();
        kernels::saxpy::launch(Launch::on(device), -1.75, &x, &mut y).unwrap();
        assert!(same_bits(&y, &expected), "saxpy n={n} on {}", device.name());
    }
}

pub fn stencil_matches_cpu(device: &Device) {
    for (width, height) in [(1, 1), (3, 3), (17, 5), (256, 257), (1000, 1000)] {
        let grid = Grid2 {
            width,
            height,
            centre: 0.4,
        };
        let n = (width * height) as usize;
        let input = floats(n, 3);
        let mut expected = vec![0.0; n];
        reference::stencil5(grid, &input, &mut expected);
        let mut output = vec![f32::NAN; n];
        kernels::stencil5::launch(Launch::on(device), grid, &input, &mut output).unwrap();
        assert!(
            same_bits(&output, &expected),
            "stencil {width}x{height} on {}",
            device.name()
        );
    }
}

pub fn integer_kernel_with_two_outputs_matches_cpu(device: &Device) {
    for n in SIZES {
        for negate in [false, true] {
            let (a, b) = (ints(n, 4), ints(n, 5));
            let (mut sum, mut diff) = (vec![7i64; n], vec![7i64; n]);
            kernels::add_sub::launch(Launch::on(device), negate, &a, &b, &mut sum, &mut diff)
                .unwrap();
            for i in 0..n {
                let bi = if negate { b[i].wrapping_neg() } else { b[i] };
                assert_eq!(
                    sum[i],
                    a[i].wrapping_add(bi),
                    "sum[{i}] n={n} on {}",
                    device.name()
                );
                assert_eq!(
                    diff[i],
                    a[i].wrapping_sub(bi),
                    "diff[{i}] n={n} on {}",
                    device.name()
                );
            }
        }
    }
}

/// Any grid covers the whole output through the grid-stride view, whatever its shape.
pub fn every_launch_shape_covers_every_element(device: &Device) {
    let n = 10_007;
    let x = floats(n, 6);
    let mut expected = floats(n, 7);
    let y = expected.clone();
    reference::saxpy(0.5, &x, &mut expected);
    let shapes: [(Dim3, Dim3); 5] = [
        (Dim3::new(1, 1, 1), Dim3::new(1, 1, 1)),
        (Dim3::new(3, 1, 1), Dim3::new(64, 1, 1)),
        (Dim3::new(2, 3, 1), Dim3::new(8, 4, 2)),
        (Dim3::new(2, 2, 2), Dim3::new(32, 2, 1)),
        (Dim3::new(100, 1, 1), Dim3::new(1024, 1, 1)),
    ];
    for (grid, block) in shapes {
        let mut run = y.clone();
        kernels::saxpy::launch(
            Launch::on(device).grid(grid).block(block),
            0.5,
            &x,
            &mut run,
        )
        .unwrap();
        assert!(
            same_bits(&run, &expected),
            "grid {grid:?} block {block:?} on {}",
            device.name()
        );
    }
}

/// Global ids are dense and unique in 3D launches, agree with the thread count, and element `i`
/// belongs to thread `i mod threads` (grid-stride ownership).
pub fn global_ids_are_dense_and_unique(device: &Device) {
    let (grid, block) = (Dim3::new(3, 2, 2), Dim3::new(4, 3, 2));
    let threads = (grid.count() * block.count()) as usize;
    let n = 2 * threads + 5;
    let mut ids = vec![u32::MAX; n];
    let mut totals = vec![0u32; n];
    kernels::thread_ids::launch(
        Launch::on(device).grid(grid).block(block),
        &mut ids,
        &mut totals,
    )
    .unwrap();
    for i in 0..n {
        assert_eq!(
            ids[i] as usize,
            i % threads,
            "owner of element {i} on {}",
            device.name()
        );
        assert_eq!(totals[i] as usize, threads);
    }
}

/// Invalid shapes are refused before anything runs, with the limit named, and leave data alone.
pub fn invalid_launches_are_errors_naming_the_limit(device: &Device) {
    let x = floats(100, 8);
    let mut y = floats(100, 9);
    let before = y.clone();
    // Shapes just past the device's limits (1024 threads per block and blocks of 1024 × 1024 ×
    // 64 on NVIDIA GPUs).
    let limits = device.limits();
    let (wide, deep) = (limits.max_block.x + 1, limits.max_block.z + 1);
    let x_extent = limits.max_block.x.min(limits.max_threads_per_block);
    let rows = limits.max_threads_per_block / x_extent + 1;
    let cases: [(Launch<'_>, String); 4] = [
        (
            Launch::on(device).block(wide),
            format!(
                "block.x = {wide} exceeds the device limit {}",
                limits.max_block.x
            ),
        ),
        (
            Launch::on(device).block((x_extent, rows, 1)),
            format!(
                "{} threads per block exceeds the device limit {}",
                x_extent * rows,
                limits.max_threads_per_block
            ),
        ),
        (Launch::on(device).grid(0), "grid.x is 0".to_string()),
        (
            Launch::on(device).block((1, 1, deep)),
            format!(
                "block.z = {deep} exceeds the device limit {}",
                limits.max_block.z
            ),
        ),
    ];
    for (launch, expected) in cases {
        match kernels::saxpy::launch(launch, 1.0, &x, &mut y) {
            Err(Error::InvalidLaunch {
                kernel: "saxpy",
                reason,
                ..
            }) => assert_eq!(reason, expected),
            other => panic!("expected InvalidLaunch({expected}), got {other:?}"),
        }
        assert!(same_bits(&y, &before));
    }
}

/// A kernel thread that panics makes the launch an `Err(KernelFailed)` naming the kernel, leaves
/// the output as it was, and leaves the device usable: a second panic is reported again, and a
/// correct launch after it succeeds. Only element 999 fails its bounds check (x is one shorter
/// than y), and the shape gives each thread one element, so one thread panics: block 3, thread
/// 231. Returns the error message.
pub fn kernel_panic_is_an_error_and_outputs_are_untouched(device: &Device) -> String {
    let x = floats(999, 12);
    let y0 = floats(1000, 13);
    let shape = || Launch::on(device).grid(4).block(256);
    let mut messages = Vec::new();
    for _ in 0..2 {
        let mut y = y0.clone();
        match kernels::saxpy::launch(shape(), 1.0, &x, &mut y) {
            Err(Error::KernelFailed {
                kernel: "saxpy",
                message,
                ..
            }) => messages.push(message),
            other => panic!(
                "expected KernelFailed from saxpy on {}, got {other:?}",
                device.name()
            ),
        }
        assert!(
            same_bits(&y, &y0),
            "no element of y changed on {}",
            device.name()
        );
    }
    assert_eq!(messages[0], messages[1], "the same panic, reported twice");
    let mut y = y0[..999].to_vec();
    let mut expected = y.clone();
    reference::saxpy(1.0, &x, &mut expected);
    kernels::saxpy::launch(shape(), 1.0, &x, &mut y).unwrap();
    assert!(
        same_bits(&y, &expected),
        "a correct launch after the panics on {}",
        device.name()
    );
    messages.pop().unwrap()
}

/// The math kernel on `device`: close to `std`'s f64 math on the host (documented libm error),
/// returned for bit comparisons between backends.
pub fn math_kernel_is_accurate(device: &Device) -> (Vec<f32>, Vec<f64>) {
    let x: Vec<f32> = floats(100_003, 12).iter().map(|v| v * 4.0).collect();
    let (mut out32, mut out64) = (vec![f32::NAN; x.len()], vec![f64::NAN; x.len()]);
    kernels::math_mix::launch(Launch::on(device), &x, &mut out32, &mut out64).unwrap();
    for (i, &v) in x.iter().enumerate() {
        let v = v as f64;
        let want = v.abs().sqrt() + v.exp() * v.sin() - (1.0 + v.abs()).ln()
            + v.tanh() * v.cos()
            + v.abs().powf(1.5)
            + v.mul_add(3.0, 0.5);
        let scale = 1.0 + v.exp() + v.abs().powf(1.5) + 3.0 * v.abs();
        assert!(
            (out64[i] - want).abs() <= 1e-14 * scale,
            "f64 at x={v}: {} vs {want}",
            out64[i]
        );
        assert!(
            (out32[i] as f64 - want).abs() <= 1e-5 * scale,
            "f32 at x={v}: {} vs {want}",
            out32[i]
        );
    }
    (out32, out64)
}

/// Bit patterns of any `DeviceCopy` slice (integers and floats of every width, f16 included).
fn bytes_of<T: offload::DeviceCopy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types compared here (floats, half floats and arrays of them) have no
    // padding, so every byte is initialised; the view borrows `v`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// One precision of the generic axpy against the CPU loop in the same precision, bit for bit.
fn axpy_case<T>(device: &Device, to_t: impl Fn(f32) -> T)
where
    T: offload::DeviceCopy
        + offload::WideElement
        + offload::math::Arith
        + std::ops::Add<Output = T>
        + std::ops::Mul<Output = T>,
    kernels::axpy::Instance<T>: kernels::axpy::Declared,
{
    for n in SIZES {
        let x: Vec<T> = floats(n, 21).into_iter().map(&to_t).collect();
        let y0: Vec<T> = floats(n, 22).into_iter().map(&to_t).collect();
        let a = to_t(-1.25);
        let mut expected = y0.clone();
        reference::axpy(a, &x, &mut expected);
        let mut y = y0.clone();
        kernels::axpy::launch(Launch::on(device), a, &x, &mut y).unwrap();
        assert!(
            bytes_of(&y) == bytes_of(&expected),
            "axpy<{}> n={n} on {}",
            std::any::type_name::<T>(),
            device.name()
        );
        if n > 0 {
            let report = offload::last_launch().unwrap();
            assert_eq!(
                report.kernel,
                format!(
                    "axpy__{}",
                    std::any::type_name::<T>().rsplit("::").next().unwrap()
                ),
                "the instance's own device entry ran"
            );
        }
    }
}

/// The generic axpy in f32, f64, f16 and bf16.
pub fn generic_axpy_matches_cpu(device: &Device) {
    axpy_case(device, |v| v);
    axpy_case(device, |v| v as f64 * 1.000_000_1);
    axpy_case(device, offload::half::f16::from_f32);
    axpy_case(device, offload::half::bf16::from_f32);
    // The default launcher infers the instance from the arguments, too.
    let x = vec![offload::half::f16::from_f32(2.0); 300];
    let mut y = vec![offload::half::f16::from_f32(0.5); 300];
    kernels::axpy(offload::half::f16::from_f32(3.0), &x, &mut y).unwrap();
    assert!(y.iter().all(|v| v.to_f32() == 6.5));
}

fn matmul_case<T, const N: usize>(device: &Device, to_t: impl Fn(f32) -> T)
where
    T: kernels::Scalar + offload::DeviceCopy,
    kernels::batched_matmul::Instance<T, N>: kernels::batched_matmul::Declared,
{
    for batch in [0, 1, 255, 257, 10_000] {
        let matrices = |seed| -> Vec<[[T; N]; N]> {
            let v = floats(batch * N * N, seed);
            (0..batch)
                .map(|k| {
                    std::array::from_fn(|i| std::array::from_fn(|j| to_t(v[(k * N + i) * N + j])))
                })
                .collect()
        };
        let (a, b) = (matrices(31), matrices(32));
        let mut expected = vec![[[T::zero(); N]; N]; batch];
        reference::batched_matmul(&a, &b, &mut expected);
        let mut c = vec![[[T::zero(); N]; N]; batch];
        kernels::batched_matmul::launch::<T, N>(Launch::on(device), &a, &b, &mut c).unwrap();
        assert!(
            bytes_of(&c) == bytes_of(&expected),
            "batched_matmul<{}, {N}> batch={batch} on {}",
            std::any::type_name::<T>(),
            device.name()
        );
    }
}

/// The const-generic small-matrix kernel for N = 2, 3, 4 in f32 and f64.
pub fn const_generic_matmul_matches_cpu(device: &Device) {
    matmul_case::<f32, 2>(device, |v| v);
    matmul_case::<f32, 3>(device, |v| v);
    matmul_case::<f32, 4>(device, |v| v);
    matmul_case::<f64, 2>(device, f64::from);
    matmul_case::<f64, 3>(device, f64::from);
    matmul_case::<f64, 4>(device, f64::from);
}

/// A `*mut [f64; 256]` parameter: the pointee goes to the device and back whole, whatever the
/// shape; a `&f64` goes by reference; a null pointer is an error and nothing runs.
pub fn raw_pointer_kernel_maps_the_pointee(device: &Device) {
    for (grid, block) in [(1, 1), (1, 256), (3, 32), (8, 64)] {
        let mut x = [f64::NAN; 256];
        let step = 0.5;
        // SAFETY: `x` is a live, aligned local that nothing else touches during the launch.
        unsafe {
            kernels::iota_fixed::launch(
                Launch::on(device).grid(grid).block(block),
                &mut x as *mut [f64; 256],
                10.0,
                &step,
            )
        }
        .unwrap();
        for (k, v) in x.iter().enumerate() {
            assert_eq!(
                *v,
                10.0 + 0.5 * k as f64,
                "x[{k}] grid {grid} block {block} on {}",
                device.name()
            );
        }
    }
    // SAFETY: a null pointer is refused before anything is read.
    let err =
        unsafe { kernels::iota_fixed::launch(Launch::on(device), std::ptr::null_mut(), 0.0, &1.0) }
            .unwrap_err();
    match err {
        Error::InvalidArgument {
            kernel: "iota_fixed",
            argument: "x",
            reason,
        } => assert_eq!(reason, "is a null pointer"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}
