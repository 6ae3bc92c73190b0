//! Eight host threads launching on one device at once, 10^5 launches in all: every result is
//! right, and neither the device's memory nor the process's grows. Runs on the host backend
//! always and on the GPU when there is one (skipped visibly otherwise).

mod common;

use offload::{Device, Launch};
use offload_examples::{kernels, reference};
use std::io::Write;
use std::time::Instant;

const THREADS: usize = 8;
const LAUNCHES: usize = 100_000;
/// Launches per thread before the first measurement: loads the image, fills the driver's and
/// the allocator's pools, so that what is measured after is growth, not start-up.
const WARM_UP: usize = 200;

/// Resident set size of this process (VmRSS), in bytes.
fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// `launches` saxpy launches spread over `THREADS` threads, each with its own data and size;
/// every result is compared with the CPU loop, bit for bit.
fn launch_from_every_thread(device: &Device, launches: usize) {
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                let n = 1000 + 37 * t;
                let a = 0.25 + t as f32;
                let x = common::floats(n, 40 + t as u64);
                let y0 = common::floats(n, 50 + t as u64);
                let mut expected = y0.clone();
                reference::saxpy(a, &x, &mut expected);
                let mut y = vec![0.0f32; n];
                for launch in 0..launches / THREADS {
                    y.copy_from_slice(&y0);
                    kernels::saxpy::launch(Launch::on(device), a, &x, &mut y).unwrap();
                    assert!(
                        y.iter()
                            .zip(&expected)
                            .all(|(g, e)| g.to_bits() == e.to_bits()),
                        "thread {t}, launch {launch} on {}",
                        device.name()
                    );
                }
            });
        }
    });
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn no_growth_under_concurrent_launches(device: &Device) {
    launch_from_every_thread(device, WARM_UP * THREADS);
    let device_free_before = device.memory_info().map(|m| m.unwrap().free);
    let rss_before = resident_bytes();
    let start = Instant::now();
    launch_from_every_thread(device, LAUNCHES);
    let elapsed = start.elapsed();
    let device_free_after = device.memory_info().map(|m| m.unwrap().free);
    let rss_after = resident_bytes();
    // Straight to stderr, so the figures show without --nocapture.
    let _ = writeln!(
        std::io::stderr(),
        "concurrency on {}: {LAUNCHES} launches from {THREADS} threads in {:.2} s ({:.1} µs each); \
         host RSS {:.1} -> {:.1} MiB{}",
        device.name(),
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / LAUNCHES as f64,
        mib(rss_before),
        mib(rss_after),
        match (device_free_before, device_free_after) {
            (Some(b), Some(a)) => format!("; device free {:.1} -> {:.1} MiB", mib(b), mib(a)),
            _ => String::new(),
        }
    );
    // Growth bounds, not timings: a leak of even one byte per launch would be 100 kB here, and of
    // one allocation per launch several MiB.
    assert!(
        rss_after <= rss_before + 4 * 1024 * 1024,
        "host memory grew by {:.1} MiB over {LAUNCHES} launches",
        mib(rss_after.saturating_sub(rss_before))
    );
    if let (Some(before), Some(after)) = (device_free_before, device_free_after) {
        assert!(
            after >= before,
            "device memory shrank by {} bytes over {LAUNCHES} launches",
            before - after
        );
    }
}

/// One test, so that the two devices' measurements do not overlap in time.
#[test]
fn eight_threads_launching_at_once_get_right_results_and_leak_nothing() {
    no_growth_under_concurrent_launches(&Device::host());
    if let Some(gpu) = common::gpu::gpu("eight_threads_launching_at_once (GPU part)") {
        no_growth_under_concurrent_launches(&gpu);
    }
}
