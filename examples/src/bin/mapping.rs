//! The data-mapping benchmark: host↔device bandwidth of mapped copies beside a raw pinned
//! memcpy of the same size in the same run, then Jacobi 2D with and without a data region.
//!
//! `cargo run --release -p offload-examples --bin mapping [-- MIB SIDE SWEEPS]` (defaults: 1024
//! MiB, a 4096² grid, 1000 sweeps on a GPU; 64 MiB, 512², 20 sweeps on the host; 0 MiB or 0
//! sweeps skips that part). Figures are printed as ratios against references measured here,
//! never asserted.

use offload::Device;
use offload_examples::{jacobi, mapped_copies};
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let device = offload::default_device()?;
    let arg = |i: usize, gpu: usize, host: usize| -> Result<usize> {
        Ok(match std::env::args().nth(i) {
            Some(a) => a.parse()?,
            None if device.is_gpu() => gpu,
            None => host,
        })
    };
    let (mib, side, sweeps) = (arg(1, 1024, 64)?, arg(2, 4096, 512)?, arg(3, 1000, 20)?);
    println!("device: {}", device.name());
    if mib > 0 {
        transfers(&device, mib << 20)?;
    }
    if sweeps > 0 {
        jacobi_2d(&device, side as u32, sweeps)?;
    }
    Ok(())
}

fn transfers(device: &Device, bytes: usize) -> Result<()> {
    match mapped_copies::measure(device, bytes)? {
        Some(rows) => mapped_copies::print("mapping", bytes, &rows),
        None => {
            println!("transfers: no CUDA GPU (mapping is a no-op on the host), nothing to measure")
        }
    }
    Ok(())
}

fn jacobi_2d(device: &Device, side: u32, sweeps: usize) -> Result<()> {
    let mut with_region = jacobi::initial_grid(side, side);
    // Warm-up: loads the image.
    jacobi::in_region(device, side, side, &mut with_region.clone(), 2)?;
    let start = Instant::now();
    jacobi::in_region(device, side, side, &mut with_region, sweeps)?;
    let region_time = start.elapsed();
    let mut per_launch = jacobi::initial_grid(side, side);
    let start = Instant::now();
    jacobi::per_launch(device, side, side, &mut per_launch, sweeps)?;
    let launch_time = start.elapsed();
    let same = with_region
        .iter()
        .zip(&per_launch)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("jacobi 2D {side}x{side}, {sweeps} sweeps (results identical: {same}):");
    println!(
        "  in one data region             {:9.1} ms ({:.3} ms/sweep)",
        region_time.as_secs_f64() * 1e3,
        region_time.as_secs_f64() * 1e3 / sweeps as f64
    );
    println!(
        "  plain launches (to + from)     {:9.1} ms ({:.3} ms/sweep)",
        launch_time.as_secs_f64() * 1e3,
        launch_time.as_secs_f64() * 1e3 / sweeps as f64
    );
    println!(
        "  speedup of the region          {:9.1}x",
        launch_time.as_secs_f64() / region_time.as_secs_f64()
    );
    if !same {
        return Err("the region and per-launch results differ".into());
    }
    Ok(())
}
