//! Two streams overlap copies with kernels: the same chunked work (copy a chunk in, run `relax`
//! on it, copy it back) queued on one stream, where each step waits for the previous one, and
//! alternately on two and four streams, where one chunk's copies run during another's kernel.
//!
//! `cargo run --release -p offload-examples --bin stream_overlap [-- LOG2_N CHUNKS]` (default
//! 2^26 elements in 16 chunks on a GPU, 2^22 on the host). Host data is pinned (`PinnedVec`).
//! The kernel's arithmetic per element is first tuned so that one chunk's kernel takes about as
//! long as its copies, where overlap gains most. Prints each variant's best time of 5 and its
//! speed-up over one stream, and checks the results against the CPU.

use offload::{Device, Launch, PinnedVec};
use offload_examples::kernels::streams::relax;
use offload_examples::reference;
use std::time::{Duration, Instant};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let device = offload::default_device()?;
    let mut args = std::env::args().skip(1);
    let log2_n: u32 = match args.next() {
        Some(arg) => arg.parse()?,
        None if device.is_gpu() => 26,
        None => 22,
    };
    let chunks: usize = args.next().map_or(Ok(16), |a| a.parse())?;
    let n = 1usize << log2_n;
    let chunk = n.div_ceil(chunks);
    println!("device: {}", device.name());
    let x = PinnedVec::from_slice(&(0..n).map(|i| (i % 1000) as f32 * 1e-3).collect::<Vec<_>>())?;
    let mut y = PinnedVec::filled(1.0f32, n)?;
    println!(
        "n = 2^{log2_n} f32 in {chunks} chunks of {chunk}, host memory pinned: {}",
        x.is_pinned()
    );

    let steps = balanced_steps(&device, &x[..chunk], &mut y[..chunk])?;
    println!("relax steps per element: {steps}");

    let mut one_stream = Duration::MAX;
    let mut times = Vec::new();
    for streams in [1usize, 2, 4] {
        let mut best = Duration::MAX;
        for _ in 0..5 {
            y.fill(1.0);
            let start = Instant::now();
            offload::scope(|s| {
                let queues = (0..streams)
                    .map(|_| s.stream(&device))
                    .collect::<offload::Result<Vec<_>>>()?;
                for (i, (y, x)) in y.chunks_mut(chunk).zip(x.chunks(chunk)).enumerate() {
                    relax::enqueue(&queues[i % streams], Launch::auto(), steps, x, y)?;
                }
                Ok(())
            })?;
            best = best.min(start.elapsed());
        }
        if streams == 1 {
            one_stream = best;
        }
        times.push((streams, best));
    }
    for (streams, best) in times {
        println!(
            "{streams} stream{}: {:8.2} ms  speed-up over one stream {:.2}x",
            if streams == 1 { " " } else { "s" },
            best.as_secs_f64() * 1e3,
            one_stream.as_secs_f64() / best.as_secs_f64()
        );
    }

    let mut expected = vec![1.0f32; n];
    reference::relax(steps, &x, &mut expected);
    let same = y
        .iter()
        .zip(&expected)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("results equal the CPU's: {same}");
    if !same {
        return Err("results differ from the CPU's".into());
    }
    Ok(())
}

/// Steps of `relax` for which one chunk's kernel takes about as long as copying it in and out,
/// from a plain launch's report at 256 steps.
fn balanced_steps(device: &Device, x: &[f32], y: &mut [f32]) -> Result<u32, Failure> {
    const PROBE: u32 = 256;
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        relax::launch(Launch::on(device), PROBE, x, y)?;
        let report = offload::last_launch().ok_or("no launch report")?;
        let copies = report.time_to_device + report.time_from_device;
        best = (best.0.min(report.kernel_time), best.1.min(copies));
    }
    let (kernel, copies) = best;
    if copies.is_zero() {
        // The host backend copies nothing: any amount of work shows the (absent) overlap.
        return Ok(PROBE);
    }
    let steps = PROBE as f64 * copies.as_secs_f64() / kernel.as_secs_f64().max(1e-9);
    Ok(steps.clamp(1.0, 1e6) as u32)
}
