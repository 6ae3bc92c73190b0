//! The offload demo: saxpy and a 2D stencil on the best device, checked against plain CPU loops.
//!
//! `cargo run --release -p offload-examples --bin demo [-- LOG2_N]` (default 2^28 elements on a
//! GPU, 2^24 on the host). Prints the device, sizes, times and effective bandwidths; on a CUDA
//! GPU also a device-to-device memcpy of the same size, as the bandwidth ceiling to compare with.

use offload::{Device, Launch};
use offload_examples::kernels::{self, Grid2};
use offload_examples::{reference, reference_bandwidth};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = offload::default_device()?;
    let log2_n: u32 = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None if device.is_gpu() => 28,
        None => 24,
    };
    let n = 1usize << log2_n;
    println!("device: {}", device.name());
    if let Some(why) = offload_examples::__OFFLOAD_IMAGES.unavailable {
        println!("device images: none ({why})");
    }

    saxpy(&device, n)?;
    stencil(&device, n)?;
    region(&device, n.min(1 << 22))?;
    if std::env::var("OFFLOAD_DEMO_SWEEP").is_ok_and(|v| v == "1") {
        sweep_saxpy_shapes(&device, n)?;
    }
    Ok(())
}

/// 100 saxpy launches inside one data region against the same loop launch by launch: bytes
/// moved (from the trace counters) and times, both checked against the CPU loop.
fn region(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let x: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.01).collect();
    let mut expected = vec![1.0f32; n];
    for _ in 0..100 {
        reference::saxpy(0.5, &x, &mut expected);
    }
    for in_region in [true, false] {
        let mut y = vec![1.0f32; n];
        let before = offload::trace::thread_counters();
        let start = std::time::Instant::now();
        if in_region {
            offload::region_on(device, |r| {
                let xd = r.to(&x)?;
                let mut yd = r.tofrom(&mut y)?;
                for _ in 0..100 {
                    kernels::saxpy::launch(Launch::on(device), 0.5, &xd, &mut yd)?;
                }
                Ok(())
            })?;
        } else {
            for _ in 0..100 {
                kernels::saxpy::launch(Launch::on(device), 0.5, &x, &mut y)?;
            }
        }
        let (time, moved) = (start.elapsed(), offload::trace::thread_counters() - before);
        if bit_mismatches(&y, &expected) > 0 {
            return Err("the region loop differs from the CPU loop".into());
        }
        let how = if in_region {
            "in one data region"
        } else {
            "launch by launch"
        };
        println!(
            "region  100 x saxpy, n = {n}, {how}: {:.1} ms, {} MB to the device, {} MB back; \
             matches the CPU loop bit for bit",
            time.as_secs_f64() * 1e3,
            moved.bytes_to_device / 1_000_000,
            moved.bytes_from_device / 1_000_000,
        );
    }
    Ok(())
}

/// Kernel bandwidth of saxpy over several launch shapes (grid-stride makes all of them correct).
fn sweep_saxpy_shapes(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let x = vec![1.0f32; n];
    let mut y = vec![2.0f32; n];
    for block in [128u32, 256, 512, 1024] {
        for blocks_per_item in [1u64, 2, 4, 8, 16] {
            let grid = (n as u64).div_ceil(block as u64 * blocks_per_item) as u32;
            let mut best = Duration::MAX;
            for _ in 0..3 {
                kernels::saxpy::launch(
                    Launch::on(device).grid(grid).block(block),
                    1.0,
                    &x,
                    &mut y,
                )?;
                best = best.min(offload::last_launch().unwrap().kernel_time);
            }
            println!(
                "sweep   block {block:4} elements/thread {blocks_per_item:2} grid {grid:8}: {:.0} GB/s",
                gbps(3 * n * 4, best)
            );
        }
    }
    Ok(())
}

/// Elements of `got` whose bits differ from `expected`'s (kernels match the CPU loops exactly).
fn bit_mismatches(got: &[f32], expected: &[f32]) -> usize {
    got.iter()
        .zip(expected)
        .filter(|(g, e)| g.to_bits() != e.to_bits())
        .count()
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

fn saxpy(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 777) as f32 * 0.01).collect();
    let mut expected = y0.clone();
    reference::saxpy(a, &x, &mut expected);

    // Warm-up (loads the image), then the timed launches; each starts from y0 again.
    let mut y = y0.clone();
    kernels::saxpy::launch(Launch::on(device), a, &x, &mut y)?;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        y.copy_from_slice(&y0);
        kernels::saxpy::launch(Launch::on(device), a, &x, &mut y)?;
        let report = offload::last_launch().expect("a launch just succeeded");
        best = best.min(report.kernel_time);
    }
    let report = offload::last_launch().unwrap();
    let mismatches = bit_mismatches(&y, &expected);
    // Bytes the kernel must move: read x and y, write y.
    let bytes = 3 * n * std::mem::size_of::<f32>();
    println!(
        "saxpy   n = 2^{}: grid {} block {}; kernel {:.3} ms = {:.0} GB/s; to device {:.1} ms, back {:.1} ms; {}",
        n.trailing_zeros(),
        report.grid.unwrap(),
        report.block.unwrap(),
        best.as_secs_f64() * 1e3,
        gbps(bytes, best),
        report.time_to_device.as_secs_f64() * 1e3,
        report.time_from_device.as_secs_f64() * 1e3,
        if mismatches == 0 { "matches the CPU loop bit for bit".to_string() } else { format!("{mismatches} MISMATCHES") }
    );
    if let Some(copy) =
        reference_bandwidth::device_to_device(device, n * std::mem::size_of::<f32>())?
    {
        println!(
            "memcpy  device-to-device, same size: {copy:.0} GB/s (read + write); saxpy reaches {:.2}x of it",
            gbps(bytes, best) / copy
        );
    }
    if mismatches != 0 {
        return Err("saxpy results differ from the CPU loop".into());
    }
    Ok(())
}

fn stencil(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let width = 1usize << (n.trailing_zeros() / 2);
    let height = n / width;
    let grid = Grid2 {
        width: width as u32,
        height: height as u32,
        centre: 0.5,
    };
    let input: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1013) as f32 / 1013.0)
        .collect();
    let mut expected = vec![0f32; n];
    reference::stencil5(grid, &input, &mut expected);
    let mut output = vec![f32::NAN; n];
    kernels::stencil5::launch(Launch::on(device), grid, &input, &mut output)?;
    let report = offload::last_launch().unwrap();
    let mismatches = bit_mismatches(&output, &expected);
    println!(
        "stencil {width}x{height}: kernel {:.3} ms = {:.0} GB/s (read + write once); {}",
        report.kernel_time.as_secs_f64() * 1e3,
        gbps(2 * n * 4, report.kernel_time),
        if mismatches == 0 {
            "matches the CPU loop bit for bit".to_string()
        } else {
            format!("{mismatches} MISMATCHES")
        }
    );
    if mismatches != 0 {
        return Err("stencil results differ from the CPU loop".into());
    }
    Ok(())
}
