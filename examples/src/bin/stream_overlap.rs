//! Two streams overlap copies with kernels: the same chunked work (copy a chunk in, run `relax`
//! on it, copy it back) queued on one stream, where each step waits for the previous one, and
//! alternately on two and four streams, where one chunk's copies run during another's kernel.
//!
//! `cargo run --release -p offload-examples --bin stream_overlap [-- LOG2_N CHUNKS]` (default
//! 2^26 elements in 16 chunks on a GPU, 2^22 on the host). Host data is pinned (`PinnedVec`).
//! The kernel's arithmetic per element is first tuned so that one chunk's kernel takes about as
//! long as its copies, where overlap gains most. Prints each variant's best time of 5 and its
//! speed-up over one stream, and checks results against the CPU. With several GPUs, also the
//! same work split across all of them, two streams each.

use offload::{Device, PinnedVec};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::overlap::{balanced_steps, best_of_5, chunked_relax};
use offload_examples::reference;
use std::time::Duration;

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
        let best = best_of_5(&mut y, |y| {
            chunked_relax(std::slice::from_ref(&device), streams, chunk, steps, &x, y)
        })?;
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
        if streams > 1 {
            Ratio::print(
                "stream_overlap",
                &format!("copies and kernels on {streams} streams"),
                "the same on one stream",
                Measure::Speed,
                one_stream.as_secs_f64() / best.as_secs_f64(),
                Goal::None,
            );
        }
    }

    let gpus: Vec<Device> = offload::devices()
        .iter()
        .filter(|d| d.is_gpu())
        .cloned()
        .collect();
    if gpus.len() > 1 {
        let all_gpus = best_of_5(&mut y, |y| chunked_relax(&gpus, 2, chunk, steps, &x, y))?;
        println!(
            "{} GPUs, 2 streams each: {:8.2} ms  speed-up over one stream on one GPU {:.2}x",
            gpus.len(),
            all_gpus.as_secs_f64() * 1e3,
            one_stream.as_secs_f64() / all_gpus.as_secs_f64()
        );
    }

    // Every 1000th element: the CPU is far slower than the GPU at this.
    let sample: Vec<usize> = (0..n).step_by(1000).collect();
    let xs: Vec<f32> = sample.iter().map(|&i| x[i]).collect();
    let mut expected = vec![1.0f32; sample.len()];
    reference::relax(steps, &xs, &mut expected);
    let same = sample
        .iter()
        .zip(&expected)
        .all(|(&i, e)| y[i].to_bits() == e.to_bits());
    println!("results equal the CPU's (every 1000th element): {same}");
    if !same {
        return Err("results differ from the CPU's".into());
    }
    Ok(())
}
