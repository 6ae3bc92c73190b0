//! `#[reduce]` parameters on the host backend and on the first GPU: results against CPU loops
//! (integers exact, floats within the rounding bound of any summation order), the same bits from
//! run to run and between the two backends at the same launch shape, the identity for no
//! elements, a panicking kernel leaving the caller's value, and reductions into device memory
//! on a stream.
//!
//! The GPU tests print `SKIPPED` and pass without a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use common::{floats, ints};
use offload::{Device, DeviceVec, Error, Launch};
use offload_examples::kernels::reductions::{self, MinLoc};

const SIZES: [usize; 7] = [0, 1, 31, 256, 257, 4099, 1_000_003];

/// Launch shapes: one thread, and shapes with partial warps, more threads than a block's
/// combining area has slots of f64 (512), and more blocks than threads per block; the default
/// shape (which differs between the host backend and a GPU) last, left out of the comparison of
/// devices.
fn shapes() -> Vec<Launch<'static>> {
    vec![
        Launch::auto().grid(1).block(1),
        Launch::auto().grid(3).block(100),
        Launch::auto().grid(2).block(1024),
        Launch::auto().grid(700).block(64),
        Launch::auto(),
    ]
}

/// The results at every explicit shape: the default shape's come last (see `shapes`), one per
/// size and shape for `per_shape` results each.
fn explicit_shapes_only(results: Vec<u64>, per_shape: usize) -> Vec<u64> {
    let shapes = shapes().len();
    results
        .chunks(shapes * per_shape)
        .flat_map(|size| size[..(shapes - 1) * per_shape].to_vec())
        .collect()
}

fn on<'d>(device: &'d Device, shape: Launch<'static>) -> Launch<'d> {
    shape.device(device)
}

/// The rounding bound of any order of summing `terms` in f64: n·ε·Σ|t|.
fn f64_bound(terms: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = terms.clone().count() as f64;
    n * f64::EPSILON * terms.map(f64::abs).sum::<f64>()
}

/// f64 sums and dot products on `device` for every size and shape: within the bound of the CPU
/// sum, and the same bits when launched again. Returns the bits, in order, for comparing devices.
fn f64_sums(device: &Device) -> Vec<u64> {
    let mut bits = Vec::new();
    for n in SIZES {
        let (x, y) = (floats(n, 1), floats(n, 2));
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let y64: Vec<f64> = y.iter().map(|&v| v as f64 * 3.0).collect();
        let exact: f64 = x64.iter().zip(&y64).map(|(a, b)| a * b).sum();
        let bound = f64_bound(x64.iter().zip(&y64).map(|(a, b)| a * b));
        for shape in shapes() {
            let mut dot = 0.5;
            reductions::dot_f64::launch(on(device, shape), &x64, &y64, &mut dot).unwrap();
            assert!(
                (dot - 0.5 - exact).abs() <= bound + 1e-15,
                "dot of {n} on {}: {dot} against {exact} + 0.5",
                device.name()
            );
            let mut again = 0.5;
            reductions::dot_f64::launch(on(device, shape), &x64, &y64, &mut again).unwrap();
            assert_eq!(
                dot.to_bits(),
                again.to_bits(),
                "dot of {n} again on {}",
                device.name()
            );
            bits.push(dot.to_bits());
            let mut sum = 0.0;
            reductions::sum_f64::launch(on(device, shape), &x64, &mut sum).unwrap();
            let exact: f64 = x64.iter().sum();
            assert!((sum - exact).abs() <= f64_bound(x64.iter().copied()) + 1e-300);
            bits.push(sum.to_bits());
        }
    }
    bits
}

/// Integer reductions, exact: wrapping sums, min, max and wrapping products of three in one
/// kernel. Returns the results for comparing devices.
fn integer_reductions(device: &Device) -> Vec<u64> {
    let mut out = Vec::new();
    for n in SIZES {
        let x: Vec<u32> = ints(n, 3).iter().map(|&v| v as u32).collect();
        let wide = ints(n, 4);
        for shape in shapes() {
            let mut sum = 7u32;
            reductions::sum_u32::launch(on(device, shape), &x, &mut sum).unwrap();
            let expected = x.iter().fold(7u32, |a, &b| a.wrapping_add(b));
            assert_eq!(sum, expected, "u32 sum of {n} on {}", device.name());
            let (mut lo, mut hi, mut product) = (i64::MAX, i64::MIN, 1i64);
            reductions::extremes::launch(on(device, shape), &wide, &mut lo, &mut hi, &mut product)
                .unwrap();
            assert_eq!(lo, wide.iter().copied().min().unwrap_or(i64::MAX));
            assert_eq!(hi, wide.iter().copied().max().unwrap_or(i64::MIN));
            assert_eq!(product, wide.iter().fold(1i64, |a, &b| a.wrapping_mul(b)));
            out.extend([sum as u64, lo as u64, hi as u64, product as u64]);
        }
    }
    out
}

/// The least element and its first index, with NaNs among the values; f32 min and max ignoring
/// NaN.
fn argmin_and_range(device: &Device) {
    for n in SIZES {
        let mut x = floats(n, 5);
        for v in x.iter_mut().step_by(7) {
            *v = f32::NAN;
        }
        if n > 300 {
            // A tie: the lower index wins.
            let m = x
                .iter()
                .copied()
                .filter(|v| !v.is_nan())
                .fold(f32::INFINITY, f32::min);
            x[n - 2] = m;
        }
        let expected = x.iter().enumerate().filter(|(_, v)| !v.is_nan()).fold(
            MinLoc {
                value: f32::INFINITY,
                index: u32::MAX,
            },
            |best, (i, &v)| {
                if v < best.value {
                    MinLoc {
                        value: v,
                        index: i as u32,
                    }
                } else {
                    best
                }
            },
        );
        for shape in shapes() {
            let mut best = MinLoc {
                value: f32::INFINITY,
                index: u32::MAX,
            };
            reductions::argmin::launch(on(device, shape), &x, &mut best).unwrap();
            assert_eq!(best, expected, "argmin of {n} on {}", device.name());
            let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
            reductions::range_f32::launch(on(device, shape), &x, &mut lo, &mut hi).unwrap();
            let finite = x.iter().copied().filter(|v| !v.is_nan());
            assert_eq!(lo, finite.clone().fold(f32::INFINITY, f32::min));
            assert_eq!(hi, finite.fold(f32::NEG_INFINITY, f32::max));
        }
    }
}

/// A reduction beside an output: the output as the CPU's, the norm of the new values.
fn output_and_reduction(device: &Device) {
    let n = 100_003;
    let x: Vec<f64> = floats(n, 6).iter().map(|&v| v as f64).collect();
    let y0: Vec<f64> = floats(n, 7).iter().map(|&v| v as f64).collect();
    let mut y = y0.clone();
    let mut norm2 = 0.0;
    reductions::axpy_norm2::launch(Launch::on(device), 0.25, &x, &mut y, &mut norm2).unwrap();
    let expected: Vec<f64> = y0.iter().zip(&x).map(|(y, x)| y + 0.25 * x).collect();
    assert_eq!(y, expected);
    let exact: f64 = expected.iter().map(|v| v * v).sum();
    assert!((norm2 - exact).abs() <= f64_bound(expected.iter().map(|v| v * v)));
}

/// A kernel that panics leaves the caller's value as it was.
fn panic_leaves_the_value(device: &Device) {
    let x = vec![1.0f64; 1000];
    let mut total = 42.0;
    let err = reductions::sum_first::launch(Launch::on(device), &x, 1001, &mut total).unwrap_err();
    assert!(matches!(err, Error::KernelFailed { .. }), "{err}");
    assert_eq!(total, 42.0);
    // And the kernel still works afterwards.
    reductions::sum_first::launch(Launch::on(device), &x, 1000, &mut total).unwrap();
    assert_eq!(total, 1042.0);
}

/// Reductions into a `DeviceVec` element on a stream, in a loop, with nothing read back until
/// the end; a target of two elements is refused before anything runs.
fn stream_reductions_stay_on_the_device(device: &Device) {
    let n = 50_001;
    let x: Vec<f64> = floats(n, 8).iter().map(|&v| v as f64).collect();
    let xd = DeviceVec::from_slice(device, &x).unwrap();
    let mut total = DeviceVec::from_slice(device, &[1.0f64]).unwrap();
    let mut once = 0.0;
    reductions::sum_f64::launch(Launch::on(device).grid(20), &x, &mut once).unwrap();
    offload::scope(|s| {
        let stream = s.stream(device)?;
        for _ in 0..10 {
            reductions::sum_f64::enqueue(&stream, Launch::auto().grid(20), &xd, &mut total)?;
        }
        Ok(())
    })
    .unwrap();
    // The same launch shape each time, so each adds the same bits.
    let expected = (0..10).fold(1.0f64, |acc, _| acc + once);
    assert_eq!(total.to_vec().unwrap()[0].to_bits(), expected.to_bits());
    let mut two = DeviceVec::from_slice(device, &[0.0f64, 0.0]).unwrap();
    let err = offload::scope(|s| {
        let stream = s.stream(device)?;
        reductions::sum_f64::enqueue(&stream, Launch::auto(), &xd, &mut two)
    })
    .unwrap_err();
    assert!(err.to_string().contains("exactly one"), "{err}");
    // A one-element view of a longer vector works.
    offload::scope(|s| {
        let stream = s.stream(device)?;
        reductions::sum_f64::enqueue(&stream, Launch::auto().grid(20), &xd, two.slice_mut(1..2))
    })
    .unwrap();
    assert_eq!(two.to_vec().unwrap(), vec![0.0, once]);
}

/// A recorded graph with two reductions, replayed: each replay adds what one launch adds (its
/// scratch is kept for the graph, and each launch leaves it as it found it), bit for bit.
fn graph_reductions(device: &Device) {
    let n = 40_003;
    let x: Vec<f64> = floats(n, 10).iter().map(|&v| v as f64).collect();
    let ints: Vec<u32> = ints(n, 11).iter().map(|&v| v as u32).collect();
    let (mut once, mut once_int) = (0.0, 0u32);
    reductions::sum_f64::launch(Launch::on(device).grid(20), &x, &mut once).unwrap();
    reductions::sum_u32::launch(Launch::on(device).grid(7).block(96), &ints, &mut once_int)
        .unwrap();
    let (xd, intsd) = (
        DeviceVec::from_slice(device, &x).unwrap(),
        DeviceVec::from_slice(device, &ints).unwrap(),
    );
    let mut total = DeviceVec::from_slice(device, &[0.5f64]).unwrap();
    let mut total_int = DeviceVec::from_slice(device, &[3u32]).unwrap();
    let replays = 5;
    let recorded = offload::scope(|s| {
        let stream = s.stream(device)?;
        let graph = stream.record_graph(|s| {
            reductions::sum_f64::enqueue(s, Launch::auto().grid(20), &xd, &mut total)?;
            reductions::sum_u32::enqueue(
                s,
                Launch::auto().grid(7).block(96),
                &intsd,
                &mut total_int,
            )
        })?;
        for _ in 0..replays {
            graph.launch()?;
        }
        Ok(graph.len())
    })
    .unwrap();
    assert_eq!(recorded, 2);
    let expected = (0..replays).fold(0.5f64, |acc, _| acc + once);
    assert_eq!(total.to_vec().unwrap()[0].to_bits(), expected.to_bits());
    let expected_int = (0..replays).fold(3u32, |acc, _| acc.wrapping_add(once_int));
    assert_eq!(total_int.to_vec().unwrap()[0], expected_int);
}

/// In a data region, the input mapped once and the reduction's value a plain host value.
fn region_reductions(device: &Device) {
    let x: Vec<f64> = floats(10_000, 9).iter().map(|&v| v as f64).collect();
    let mut direct = 0.0;
    reductions::sum_f64::launch(Launch::on(device), &x, &mut direct).unwrap();
    let mut totals = [0.0f64; 3];
    offload::region_on(device, |r| {
        let xd = r.to(&x)?;
        for t in totals.iter_mut() {
            reductions::sum_f64::launch(Launch::on(device), &xd, t)?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(totals, [direct; 3]);
}

mod host {
    use offload::Device;

    #[test]
    fn f64_sums_and_dots_match_cpu_and_repeat() {
        super::f64_sums(&Device::host());
    }
    #[test]
    fn integer_reductions_are_exact() {
        super::integer_reductions(&Device::host());
    }
    #[test]
    fn argmin_and_range() {
        super::argmin_and_range(&Device::host());
    }
    #[test]
    fn output_and_reduction() {
        super::output_and_reduction(&Device::host());
    }
    #[test]
    fn panic_leaves_the_value() {
        super::panic_leaves_the_value(&Device::host());
    }
    #[test]
    fn stream_reductions_stay_on_the_device() {
        super::stream_reductions_stay_on_the_device(&Device::host());
    }
    #[test]
    fn region_reductions() {
        super::region_reductions(&Device::host());
    }
    #[test]
    fn graph_reductions() {
        super::graph_reductions(&Device::host());
    }
}

mod gpu {
    use super::gpu;
    use offload::Device;

    #[test]
    fn f64_sums_match_cpu_and_host_bit_for_bit() {
        if let Some(gpu) = gpu("f64_sums_match_cpu_and_host_bit_for_bit") {
            assert_eq!(
                super::explicit_shapes_only(super::f64_sums(&gpu), 2),
                super::explicit_shapes_only(super::f64_sums(&Device::host()), 2)
            );
        }
    }
    #[test]
    fn integer_reductions_are_exact() {
        if let Some(gpu) = gpu("integer_reductions_are_exact") {
            // Integers are exact: every shape, the default ones too, gives the CPU's result.
            assert_eq!(
                super::integer_reductions(&gpu),
                super::integer_reductions(&Device::host())
            );
        }
    }
    #[test]
    fn argmin_and_range() {
        if let Some(gpu) = gpu("argmin_and_range") {
            super::argmin_and_range(&gpu);
        }
    }
    #[test]
    fn output_and_reduction() {
        if let Some(gpu) = gpu("output_and_reduction") {
            super::output_and_reduction(&gpu);
        }
    }
    #[test]
    fn panic_leaves_the_value() {
        if let Some(gpu) = gpu("panic_leaves_the_value") {
            super::panic_leaves_the_value(&gpu);
        }
    }
    #[test]
    fn stream_reductions_stay_on_the_device() {
        if let Some(gpu) = gpu("stream_reductions_stay_on_the_device") {
            super::stream_reductions_stay_on_the_device(&gpu);
        }
    }
    #[test]
    fn region_reductions() {
        if let Some(gpu) = gpu("region_reductions") {
            super::region_reductions(&gpu);
        }
    }
    #[test]
    fn graph_reductions() {
        if let Some(gpu) = gpu("graph_reductions") {
            super::graph_reductions(&gpu);
        }
    }
}
