//! What kernel panic reporting costs when nothing panics: the demo's saxpy from offload-examples
//! (reported, the default) against the same source built with `panic_reporting(false)`, in one
//! run, alternating, on the same data.
//!
//! - Large launch: kernel bandwidth (the panic path's code is cold but present).
//! - Tiny launch: the whole call (where the host's check of the panic flag after each launch
//!   would show).
//!
//! `cargo bench -p offload-examples-unreported --bench panic_overhead [-- LOG2_N]`

use offload::{Device, Launch};
use offload_examples::kernels as reported;
use offload_examples_unreported::kernels as unreported;
use std::time::{Duration, Instant};

type Saxpy = fn(Launch<'_>, f32, &[f32], &mut [f32]) -> offload::Result<()>;

const VARIANTS: [(&str, Saxpy); 2] = [
    ("reported  ", |l, a, x, y| {
        reported::saxpy::launch(l, a, x, y)
    }),
    ("unreported", |l, a, x, y| {
        unreported::saxpy::launch(l, a, x, y)
    }),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    if let Some(why) = offload_examples_unreported::__OFFLOAD_IMAGES.unavailable {
        println!("device images: none ({why}); both variants run the same host code");
    }
    let log2_n: u32 = match std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        Some(arg) => arg.parse()?,
        None if device.is_gpu() => 27,
        None => 22,
    };
    large_launch(&device, 1 << log2_n)?;
    tiny_launch(&device)?;
    Ok(())
}

fn large_launch(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let mut y = vec![1.0f32; n];
    let mut best = [Duration::MAX; 2];
    for round in 0..8 {
        for (v, (_, saxpy)) in VARIANTS.iter().enumerate() {
            saxpy(Launch::on(device), 0.5, &x, &mut y)?;
            if round > 0 {
                best[v] = best[v].min(offload::last_launch().unwrap().kernel_time);
            }
        }
    }
    let gbps = |t: Duration| (3 * n * 4) as f64 / t.as_secs_f64() / 1e9;
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        println!(
            "saxpy n=2^{} {name}: kernel {:8.1} µs, {:6.0} GB/s",
            n.trailing_zeros(),
            best[v].as_secs_f64() * 1e6,
            gbps(best[v])
        );
    }
    println!(
        "large launch: reported / unreported bandwidth = {:.3}",
        gbps(best[0]) / gbps(best[1])
    );
    Ok(())
}

fn tiny_launch(device: &Device) -> Result<(), Box<dyn std::error::Error>> {
    let x = vec![1.0f32; 256];
    let mut y = vec![0.0f32; 256];
    let (rounds, per_round) = (20, 200);
    let mut total = [Duration::ZERO; 2];
    for round in 0..=rounds {
        for (v, (_, saxpy)) in VARIANTS.iter().enumerate() {
            let start = Instant::now();
            for _ in 0..per_round {
                saxpy(Launch::on(device), 0.5, &x, &mut y)?;
            }
            // Round 0 warms up (image load, allocator pools).
            if round > 0 {
                total[v] += start.elapsed();
            }
        }
    }
    let per_call = |t: Duration| t.as_secs_f64() * 1e6 / (rounds * per_round) as f64;
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        println!(
            "saxpy n=256 {name}: {:.2} µs per call (copies in and out included)",
            per_call(total[v])
        );
    }
    println!(
        "tiny launch: reporting adds {:+.2} µs per call",
        per_call(total[0]) - per_call(total[1])
    );
    Ok(())
}
