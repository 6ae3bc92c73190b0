//! The data-mapping benchmark: host↔device bandwidth of mapped copies beside a raw pinned
//! memcpy of the same size in the same run, then Jacobi 2D with and without a data region.
//!
//! `cargo run --release -p offload-examples --bin mapping [-- MIB SIDE SWEEPS]` (defaults: 1024
//! MiB, a 4096² grid, 1000 sweeps on a GPU; 64 MiB, 512², 20 sweeps on the host; 0 MiB or 0
//! sweeps skips that part). Figures are printed as ratios against references measured here,
//! never asserted.

use offload::{Device, DeviceVec, PinnedVec};
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
    if mib > 0 {
        transfers(&device, mib << 20)?;
    }
    if sweeps > 0 {
        jacobi_2d(&device, side as u32, sweeps)?;
    }
    Ok(())
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

fn transfers(device: &Device, bytes: usize) -> Result<()> {
    let Some((pinned_to, pinned_from)) = reference_bandwidth::pinned_host_device(device, bytes)?
    else {
        println!("transfers: no CUDA GPU (mapping is a no-op on the host), nothing to measure");
        return Ok(());
    };
    let source: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    // Written once, so that no page is first touched during a measurement.
    let (mut mapped_host, mut unmapped_host, mut vec_host) =
        (vec![1u8; bytes], vec![1u8; bytes], vec![1u8; bytes]);
    let mut resident = DeviceVec::<u8>::zeroed(device, bytes)?;
    // The same maps of page-locked host data (PinnedVec): no staging, the copies go straight.
    let pinned_source = PinnedVec::from_slice(&source)?;
    let mut pinned_out = PinnedVec::filled(1u8, bytes)?;
    // Best of 5 rounds; each round measures every way once, so that no way gets a better time
    // for running earlier or later.
    let mut best = [Duration::MAX; 8];
    offload::region_on(device, |outer| {
        let mut mapped = outer.tofrom(&mut mapped_host)?;
        for _ in 0..5 {
            let timings = [
                // A region's first map: allocation and copy in.
                offload::region_on(device, |r| timed(|| r.to(&source).map(drop)))?,
                // Copies of mapped data, each way.
                timed(|| mapped.update_to(|_| ()))?,
                timed(|| resident.copy_from_host(&source))?,
                offload::region_on(device, |r| timed(|| r.to(&pinned_source[..]).map(drop)))?,
                // A region's final unmap of `from` data: copy out and release.
                final_unmap(device, &mut unmapped_host)?,
                timed(|| mapped.update_from().map(drop))?,
                timed(|| resident.copy_to_host(&mut vec_host))?,
                final_unmap(device, &mut pinned_out)?,
            ];
            for (best, t) in best.iter_mut().zip(timings) {
                *best = (*best).min(t);
            }
        }
        Ok(())
    })?;
    if vec_host != source {
        return Err("the round trip returned other bytes".into());
    }
    println!(
        "transfers of {} MiB of pageable host memory, best of 5 interleaved rounds, wall clock \
         until complete; raw pinned memcpy (cuMemcpy from page-locked memory, CUDA events) in \
         the same run:",
        bytes >> 20
    );
    let names = [
        "region map, first (alloc + copy in)",
        "mapped update_to",
        "DeviceVec::copy_from_host",
        "region map, first, of page-locked data",
        "region unmap, final (copy out + free)",
        "mapped update_from",
        "DeviceVec::copy_to_host",
        "region unmap, final, to page-locked data",
    ];
    for (i, (name, time)) in names.iter().zip(best).enumerate() {
        let (dir, pinned) = if i < 4 {
            ("host->device", pinned_to)
        } else {
            ("device->host", pinned_from)
        };
        let rate = gbps(bytes, time);
        println!(
            "  {dir} {name:<38} {rate:6.1} GB/s   pinned memcpy {pinned:6.1} GB/s   ratio {:.2}",
            rate / pinned
        );
    }
    Ok(())
}

/// How long a region's final unmap of `from` data into `host` takes: copy out and release.
fn final_unmap(device: &Device, host: &mut [u8]) -> offload::Result<Duration> {
    let mut start = Instant::now();
    offload::region_on(device, |r| {
        r.from(&mut *host)?;
        start = Instant::now();
        Ok(())
    })?;
    Ok(start.elapsed())
}

/// How long `f` took.
fn timed(f: impl FnOnce() -> offload::Result<()>) -> offload::Result<Duration> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
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
