//! Device-wide scans (`offload::scan_kernel!`) on the default device against references
//! measured in the same run: the exclusive and inclusive sum scans of 2^28 u32 and f32 against
//! CuPy's `cumsum` (CUB's DeviceScan with CuPy's `cub` accelerator; an inclusive scan, of the
//! same traffic as either of ours) and against a device-to-device memcpy of the same bytes
//! (a scan reads and writes each element once at best), all timed with device events.
//!
//! Each figure is the best of several batches of scans queued on one stream with one scratch
//! (nothing read back in between); each result is checked against the CPU.

use offload::scan::{Scan, Scratch};
use offload::{Device, DeviceCopy, DeviceVec, DeviceView, DeviceViewMut, Stream};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernels::scans::{scan_sum_f32, scan_sum_u32};
use offload_examples::reference_bandwidth;
use offload_examples::stream_timing::{best_per_launch, python_ms_after};
use std::time::Duration;

const BATCHES: usize = 5;
const PER_BATCH: u32 = 10;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BenchResult<()> {
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    if !device.is_gpu() {
        println!("scan_bench: no GPU, nothing measured");
        return Ok(());
    }
    let n = 1usize << 28;
    let memcpy = reference_bandwidth::device_to_device(&device, n * 4)?;
    if let Some(memcpy) = memcpy {
        println!("device-to-device memcpy: {memcpy:.0} GB/s (read + write)");
    }
    let cupy = cupy_cumsum_ms(n);
    let (u32_ex, u32_in) = u32_scans(&device, n)?;
    let (f32_ex, f32_in) = f32_scans(&device, n)?;
    for (short, exclusive, inclusive, theirs) in [
        ("u32", u32_ex, u32_in, cupy.as_ref().map(|c| c[0])),
        ("f32", f32_ex, f32_in, cupy.as_ref().map(|c| c[1])),
    ] {
        let gbps = |t: Duration| 2.0 * (n * 4) as f64 / t.as_secs_f64() / 1e9;
        println!(
            "{short} scans of 2^28: exclusive {:.1} us ({:.0} GB/s read + write), inclusive {:.1} us ({:.0} GB/s)",
            exclusive.as_secs_f64() * 1e6,
            gbps(exclusive),
            inclusive.as_secs_f64() * 1e6,
            gbps(inclusive)
        );
        if let Some(ms) = theirs {
            println!(
                "cupy.cumsum {short}: {:.1} us ({:.0} GB/s)",
                ms * 1e3,
                2.0 * (n * 4) as f64 / (ms * 1e-3) / 1e9
            );
            for (kind, t, goal) in [
                ("exclusive", exclusive, Goal::AtLeast(0.9)),
                ("inclusive", inclusive, Goal::None),
            ] {
                Ratio::print(
                    "scan_bench",
                    &format!("{kind} sum scan of 2^28 {short}"),
                    "CuPy cumsum (CUB DeviceScan)",
                    Measure::Speed,
                    ms * 1e-3 / t.as_secs_f64(),
                    goal,
                );
            }
        }
        if let Some(memcpy) = memcpy {
            Ratio::print(
                "scan_bench",
                &format!("exclusive sum scan of 2^28 {short} (read + write)"),
                "device-to-device memcpy (read + write)",
                Measure::Speed,
                gbps(exclusive) / memcpy,
                Goal::None,
            );
        }
    }
    if cupy.is_none() {
        println!("cupy: not available, no CuPy ratio");
    }
    shape_sweep(&device, n)
}

/// The exclusive u32 scan's time over launch shapes (threads per block × chunks per tile), to
/// choose the default shape from: printed, not checked (each shape's result is checked by
/// tests/scans.rs at smaller sizes).
fn shape_sweep(device: &Device, n: usize) -> BenchResult<()> {
    let x: Vec<u32> = (0..n).map(|i| (i % 1000) as u32).collect();
    let xd = DeviceVec::from_slice(device, &x)?;
    let mut out = DeviceVec::<u32>::zeroed(device, n)?;
    let mut scratch = Scratch::new();
    println!(
        "exclusive u32 scan of 2^28 by shape (us): threads per block, then chunks per tile (-: \
         more threads than the kernel's registers allow here)"
    );
    for block in [128u32, 256, 512, 1024] {
        let chunk = offload::scan::items_per_thread(4, block as usize) * block as usize;
        let mut line = format!("  {block:>4} threads ({chunk} per chunk):");
        for chunks in [1usize, 2, 4, 8, 16, 64] {
            let scan = Scan::exclusive().block(block).tile(chunk * chunks);
            let timed = best_per_launch(device, 3, 5, |s| {
                scan_sum_u32::enqueue(s, scan, xd.slice(..), out.slice_mut(..), &mut scratch)
            });
            match timed {
                Ok(t) => line += &format!(" {chunks}: {:.0}", t.as_secs_f64() * 1e6),
                // More threads than the kernel's registers allow on this device.
                Err(offload::Error::InvalidLaunch { .. }) => line += &format!(" {chunks}: -"),
                Err(e) => return Err(e.into()),
            }
        }
        println!("{line}");
    }
    Ok(())
}

/// CuPy's cumsum of 2^28 u32 (into u32) and of f32, through CUB, in ms; `None` without CuPy.
fn cupy_cumsum_ms(n: usize) -> Option<Vec<f64>> {
    let setup = format!(
        "import os\nos.environ.setdefault('CUPY_ACCELERATORS', 'cub')\nimport cupy\n\
         xu = cupy.random.randint(0, 1000, size={n}, dtype=cupy.uint32)\n\
         xf = cupy.random.rand({n}, dtype=cupy.float32) - 0.5\n"
    );
    python_ms_after(
        "cupy",
        &setup,
        &["cupy.cumsum(xu, dtype=cupy.uint32)", "cupy.cumsum(xf)"],
    )
}

/// A `scan_kernel!`'s `enqueue` (its scan of `T`).
type Enqueue<T> = fn(
    &Stream<'_>,
    Scan,
    DeviceView<'_, T>,
    DeviceViewMut<'_, T>,
    &mut Scratch<T>,
) -> offload::Result<()>;

/// Best exclusive and inclusive times of `enqueue`'s scans of `x`, each result checked by
/// `check(scan, result)` against the CPU (an error names the first element it finds wrong).
fn timed_scans<T: DeviceCopy>(
    device: &Device,
    x: &[T],
    enqueue: Enqueue<T>,
    check: impl Fn(Scan, &[T]) -> Result<(), String>,
) -> BenchResult<(Duration, Duration)> {
    let xd = DeviceVec::from_slice(device, x)?;
    let mut out = DeviceVec::<T>::zeroed(device, x.len())?;
    let mut scratch = Scratch::new();
    let mut times = [Duration::ZERO; 2];
    for (k, scan) in [Scan::exclusive(), Scan::inclusive()]
        .into_iter()
        .enumerate()
    {
        times[k] = best_per_launch(device, BATCHES, PER_BATCH, |s| {
            enqueue(s, scan, xd.slice(..), out.slice_mut(..), &mut scratch)
        })?;
        check(scan, &out.to_vec()?)?;
    }
    Ok((times[0], times[1]))
}

/// Best exclusive and inclusive times, each result checked exactly against the CPU.
fn u32_scans(device: &Device, n: usize) -> BenchResult<(Duration, Duration)> {
    let x: Vec<u32> = (0..n).map(|i| (i * 7919 % 1000) as u32).collect();
    timed_scans(device, &x, scan_sum_u32::enqueue, |scan, got| {
        let mut acc = 0u32;
        for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
            let before = acc;
            acc = acc.wrapping_add(v);
            let expected = if scan.is_inclusive() { acc } else { before };
            if g != expected {
                return Err(format!(
                    "u32 {scan:?}: element {i} is {g}, the CPU's {expected}"
                ));
            }
        }
        Ok(())
    })
}

/// Best exclusive and inclusive times, each result checked against the f64 CPU scan (within
/// 1024·ε·Σ|x| of it: the combines run in a tree and in short sequences, not one long one).
fn f32_scans(device: &Device, n: usize) -> BenchResult<(Duration, Duration)> {
    let x: Vec<f32> = (0..n)
        .map(|i| ((i % 1000) as f32) * 1e-3 - 0.4995)
        .collect();
    timed_scans(device, &x, scan_sum_f32::enqueue, |scan, got| {
        let (mut acc, mut magnitude) = (0.0f64, 0.0f64);
        for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
            let (before, before_magnitude) = (acc, magnitude);
            acc += v as f64;
            magnitude += v.abs() as f64;
            let (expected, bound) = if scan.is_inclusive() {
                (acc, magnitude)
            } else {
                (before, before_magnitude)
            };
            if (g as f64 - expected).abs() > 1024.0 * f32::EPSILON as f64 * bound + 1e-30 {
                return Err(format!(
                    "f32 {scan:?}: element {i} is {g}, the CPU's {expected}"
                ));
            }
        }
        Ok(())
    })
}
