//! The data-mapping benchmark: host↔device bandwidth of mapped copies beside a raw pinned
//! memcpy of the same size in the same run, then Jacobi 2D with and without a data region.
//!
//! `cargo run --release -p offload-examples --bin mapping [-- MIB SIDE SWEEPS]` (defaults: 1024
//! MiB, a 4096² grid, 1000 sweeps on a GPU; 64 MiB, 512², 20 sweeps on the host). Figures are
//! printed as ratios against references measured here, never asserted.

use offload::{Device, DeviceVec};
use offload_examples::{jacobi, reference_bandwidth};
use std::time::{Duration, Instant};

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
    transfers(&device, mib << 20)?;
    jacobi_2d(&device, side as u32, sweeps)?;
    Ok(())
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// Best time of `runs` calls of `f`, each returning the time it measured.
fn best(runs: usize, mut f: impl FnMut() -> offload::Result<Duration>) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        best = best.min(f()?);
    }
    Ok(best)
}

fn transfers(device: &Device, bytes: usize) -> Result<()> {
    let Some((pinned_to, pinned_from)) = reference_bandwidth::pinned_host_device(device, bytes)?
    else {
        println!("transfers: no CUDA GPU (mapping is a no-op on the host), nothing to measure");
        return Ok(());
    };
    let source: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let mut sink = vec![0u8; bytes];
    let timed = |f: &mut dyn FnMut() -> offload::Result<()>| -> offload::Result<Duration> {
        let start = Instant::now();
        f()?;
        Ok(start.elapsed())
    };
    // A region's map: device allocation plus the copy in.
    let map_to = best(5, || {
        offload::region_on(device, |r| timed(&mut || r.to(&source).map(drop)))
    })?;
    // Copies of mapped data, each way: `update_to` / `update_from` on a mapped array.
    let (mut update_to, mut update_from) = (Duration::MAX, Duration::MAX);
    offload::region_on(device, |r| {
        let mut mapped = r.from(&mut sink)?;
        for _ in 0..5 {
            update_to = update_to.min(timed(&mut || mapped.update_to(|_| ()))?);
            update_from = update_from.min(timed(&mut || mapped.update_from().map(drop))?);
        }
        Ok(())
    })?;
    // The same transfers into and out of a DeviceVec.
    let mut resident = DeviceVec::<u8>::zeroed(device, bytes)?;
    let copy_in = best(5, || timed(&mut || resident.copy_from_host(&source)))?;
    let copy_out = best(5, || timed(&mut || resident.copy_to_host(&mut sink)))?;
    if sink != source {
        return Err("the round trip returned other bytes".into());
    }
    println!(
        "transfers of {} MiB of pageable host memory, best of 5, wall clock until complete; \
         raw pinned memcpy (cuMemcpy from page-locked memory, CUDA events) in the same run:",
        bytes >> 20
    );
    let line = |what: &str, time: Duration, pinned: f64| {
        let rate = gbps(bytes, time);
        println!(
            "  {what:<34} {rate:6.1} GB/s   pinned memcpy {pinned:6.1} GB/s   ratio {:.2}",
            rate / pinned
        );
    };
    line("mapped host->device (update_to)", update_to, pinned_to);
    line(
        "mapped device->host (update_from)",
        update_from,
        pinned_from,
    );
    line("region map (alloc + copy in)", map_to, pinned_to);
    line("DeviceVec::copy_from_host", copy_in, pinned_to);
    line("DeviceVec::copy_to_host", copy_out, pinned_from);
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
