//! Reductions (`#[reduce]`) on the default device against references measured in the same run:
//! - sums and dot products of 2^28 f32 and f64 against a device-to-device memcpy (read GB/s
//!   against the copy's read + write GB/s) and against CuPy's and PyTorch's `sum` and `dot`
//!   (CUB underneath), all timed with device events;
//! - the minimum with its index against `torch.argmin`;
//! - on the host backend, a sum of 2^24 f32 against rayon's `par_iter().sum()`.
//!
//! Each figure is the best of several batches of launches queued on one stream into a
//! `DeviceVec` target (nothing read back in between), each result checked against the CPU.

use offload::{Device, DeviceVec, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernels::reductions::{self, MinLoc};
use offload_examples::reference_bandwidth;
use offload_examples::stream_timing::{self, python_ms};
use rayon::prelude::*;
use std::time::{Duration, Instant};

const BATCHES: usize = 5;
const PER_BATCH: u32 = 10;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The best time per launch of `enqueue` over `BATCHES` batches of `PER_BATCH` launches on one
/// stream, timed with the stream's events.
fn best_per_launch(
    device: &Device,
    enqueue: impl FnMut(&offload::Stream<'_>) -> offload::Result<()>,
) -> BenchResult<Duration> {
    Ok(stream_timing::best_per_launch(
        device, BATCHES, PER_BATCH, enqueue,
    )?)
}

fn main() -> BenchResult<()> {
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    if device.is_gpu() {
        gpu(&device)?;
    }
    host_sum()?;
    Ok(())
}

fn gpu(device: &Device) -> BenchResult<()> {
    let n = 1usize << 28;
    let memcpy = reference_bandwidth::device_to_device(device, n * 4)?;
    for dtype in ["float32", "float64"] {
        let (sum_t, dot_t, bytes) = if dtype == "float32" {
            let x: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 1e-3 - 0.4).collect();
            let y: Vec<f32> = (0..n).map(|i| ((i % 777) as f32) * 1e-3 - 0.3).collect();
            let (xd, yd) = (
                DeviceVec::from_slice(device, &x)?,
                DeviceVec::from_slice(device, &y)?,
            );
            let mut total = DeviceVec::from_slice(device, &[0.0f32])?;
            let sum_t = best_per_launch(device, |s| {
                reductions::sum_f32::enqueue(s, Launch::auto(), &xd, &mut total)
            })?;
            let mut one = 0.0f32;
            reductions::sum_f32::launch(Launch::on(device), &xd, &mut one)?;
            check("sum f32", one as f64, x.iter().map(|&v| v as f64), 1e-5)?;
            let dot_t = best_per_launch(device, |s| {
                reductions::dot_f32::enqueue(s, Launch::auto(), &xd, &yd, &mut total)
            })?;
            let mut one = 0.0f32;
            reductions::dot_f32::launch(Launch::on(device), &xd, &yd, &mut one)?;
            check(
                "dot f32",
                one as f64,
                x.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64),
                1e-5,
            )?;
            (sum_t, dot_t, 4)
        } else {
            let x: Vec<f64> = (0..n).map(|i| ((i % 1000) as f64) * 1e-3 - 0.4).collect();
            let y: Vec<f64> = (0..n).map(|i| ((i % 777) as f64) * 1e-3 - 0.3).collect();
            let (xd, yd) = (
                DeviceVec::from_slice(device, &x)?,
                DeviceVec::from_slice(device, &y)?,
            );
            let mut total = DeviceVec::from_slice(device, &[0.0f64])?;
            let sum_t = best_per_launch(device, |s| {
                reductions::sum_f64::enqueue(s, Launch::auto(), &xd, &mut total)
            })?;
            let mut one = 0.0f64;
            reductions::sum_f64::launch(Launch::on(device), &xd, &mut one)?;
            check("sum f64", one, x.iter().copied(), 1e-12)?;
            let dot_t = best_per_launch(device, |s| {
                reductions::dot_f64::enqueue(s, Launch::auto(), &xd, &yd, &mut total)
            })?;
            let mut one = 0.0f64;
            reductions::dot_f64::launch(Launch::on(device), &xd, &yd, &mut one)?;
            check("dot f64", one, x.iter().zip(&y).map(|(a, b)| a * b), 1e-12)?;
            (sum_t, dot_t, 8)
        };
        let short = if dtype == "float32" { "f32" } else { "f64" };
        let size = n * bytes;
        let sum_gbps = size as f64 / sum_t.as_secs_f64() / 1e9;
        let dot_gbps = 2.0 * size as f64 / dot_t.as_secs_f64() / 1e9;
        println!(
            "sum {short} of 2^28: {:.1} us, {sum_gbps:.0} GB/s read; dot: {:.1} us, {dot_gbps:.0} GB/s read",
            sum_t.as_secs_f64() * 1e6,
            dot_t.as_secs_f64() * 1e6
        );
        if let Some(memcpy) = memcpy {
            println!("device-to-device memcpy: {memcpy:.0} GB/s (read + write)");
            for (what, gbps) in [("sum", sum_gbps), ("dot", dot_gbps)] {
                Ratio::print(
                    "reduce_bench",
                    &format!("{what} of 2^28 {short} (read)"),
                    "device-to-device memcpy (read + write)",
                    Measure::Speed,
                    gbps / memcpy,
                    Goal::AtLeast(0.97),
                );
            }
        }
        let refs: Vec<(&str, Vec<f64>)> = ["torch", "cupy"]
            .iter()
            .filter_map(|m| Some((*m, python_ms(m, dtype, n, &["x.sum()", "x.dot(y)"])?)))
            .collect();
        for (module, ms) in &refs {
            println!(
                "{module} {short}: sum {:.1} us, dot {:.1} us",
                ms[0] * 1e3,
                ms[1] * 1e3
            );
        }
        if let Some(best_sum) = refs.iter().map(|(_, ms)| ms[0]).reduce(f64::min) {
            let best_dot = refs
                .iter()
                .map(|(_, ms)| ms[1])
                .fold(f64::INFINITY, f64::min);
            for (what, ours, theirs) in [("sum", sum_t, best_sum), ("dot", dot_t, best_dot)] {
                Ratio::print(
                    "reduce_bench",
                    &format!("{what} of 2^28 {short}"),
                    "the faster of CuPy and PyTorch",
                    Measure::Speed,
                    theirs * 1e-3 / ours.as_secs_f64(),
                    Goal::AtLeast(1.0),
                );
            }
        }
    }
    argmin(device, n)
}

fn argmin(device: &Device, n: usize) -> BenchResult<()> {
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1_000_003) as f32) * 1e-3)
        .collect();
    let xd = DeviceVec::from_slice(device, &x)?;
    let identity = MinLoc {
        value: f32::INFINITY,
        index: u32::MAX,
    };
    let mut best = DeviceVec::from_slice(device, &[identity])?;
    let t = best_per_launch(device, |s| {
        reductions::argmin::enqueue(s, Launch::auto(), &xd, &mut best)
    })?;
    let mut one = identity;
    reductions::argmin::launch(Launch::on(device), &xd, &mut one)?;
    let expected = x.iter().enumerate().fold(identity, |b, (i, &v)| {
        if v < b.value {
            MinLoc {
                value: v,
                index: i as u32,
            }
        } else {
            b
        }
    });
    if one != expected {
        return Err(format!("argmin: {one:?} against the CPU's {expected:?}").into());
    }
    println!("argmin of 2^28 f32: {:.1} us", t.as_secs_f64() * 1e6);
    if let Some(ms) = python_ms("torch", "float32", n, &["torch.argmin(x)"]) {
        println!("torch.argmin: {:.1} us", ms[0] * 1e3);
        Ratio::print(
            "reduce_bench",
            "argmin of 2^28 f32",
            "torch.argmin",
            Measure::Speed,
            ms[0] * 1e-3 / t.as_secs_f64(),
            Goal::AtLeast(0.9),
        );
    }
    Ok(())
}

/// The host backend's sum of 2^24 f32 against rayon's, both the best of several runs.
fn host_sum() -> BenchResult<()> {
    let n = 1usize << 24;
    let host = Device::host();
    let x: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 1e-3 - 0.4).collect();
    let best = |f: &mut dyn FnMut() -> f32| {
        (0..BATCHES)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let ours = best(&mut || {
        let mut total = 0.0f32;
        reductions::sum_f32::launch(Launch::on(&host), &x, &mut total).unwrap();
        total
    });
    let rayon = best(&mut || x.par_iter().sum::<f32>());
    println!(
        "host backend: sum of 2^24 f32 {:.2} ms, rayon par_iter().sum() {:.2} ms",
        ours.as_secs_f64() * 1e3,
        rayon.as_secs_f64() * 1e3
    );
    Ratio::print(
        "reduce_bench",
        "host backend: sum of 2^24 f32",
        "rayon par_iter().sum()",
        Measure::Speed,
        rayon.as_secs_f64() / ours.as_secs_f64(),
        Goal::AtLeast(0.5),
    );
    Ok(())
}

/// Within `relative` of the sum of |terms| from the f64 CPU sum.
fn check(
    what: &str,
    got: f64,
    terms: impl Iterator<Item = f64> + Clone,
    relative: f64,
) -> BenchResult<()> {
    let exact: f64 = terms.clone().sum();
    let magnitude: f64 = terms.map(f64::abs).sum();
    if (got - exact).abs() > relative * magnitude {
        return Err(format!("{what}: {got} against the CPU's {exact}").into());
    }
    Ok(())
}
