//! The two GPU plugins on the same GPU, in one run: the CUDA plugin (the driver directly) and
//! LLVM's liboffload plugin, each reached through `offload::devices_of`. For each: saxpy's kernel
//! bandwidth over device-resident data, the latency of a small launch on device-resident data,
//! copies between page-locked host memory (`PinnedVec`) and a `DeviceVec`, and the speed-ups of
//! two and four streams over one (chunked copies and kernels, as `stream_overlap`). Prints both
//! plugins' figures and liboffload's ratio to the CUDA plugin's, next to the goal for it.
//!
//! `cargo run --release -p offload-examples --bin plugins [-- LOG2_N]` (default 2^28 elements
//! for saxpy and the copies). Needs a GPU that both plugins drive (an NVIDIA GPU, libcuda and
//! liboffload-22); elsewhere it says why and exits with an error.

use offload::{BackendKind, Device, DeviceVec, Launch, PinnedVec, Platform};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernels;
use offload_examples::overlap::{balanced_steps, best_of_5, chunked_relax};
use offload_examples::reference;
use std::time::{Duration, Instant};

type Failure = Box<dyn std::error::Error>;

/// One plugin's figures.
struct Figures {
    saxpy_gbps: f64,
    small_launch: Duration,
    to_device_gbps: f64,
    from_device_gbps: f64,
    /// Speed-ups of 2 and 4 streams over one.
    overlap: [f64; 2],
    /// `y` after the stream runs, to compare the plugins' results.
    overlap_result: Vec<f32>,
}

fn main() -> Result<(), Failure> {
    let log2_n: u32 = std::env::args().nth(1).map_or(Ok(28), |a| a.parse())?;
    let n = 1usize << log2_n;
    let cuda = offload::devices_of(BackendKind::Cuda)
        .into_iter()
        .next()
        .ok_or("no GPU through the CUDA plugin")?;
    let liboffload = offload::devices_of(BackendKind::LibOffload)
        .into_iter()
        .find(|d| d.platform() == Platform::Cuda && d.ordinal() == cuda.ordinal())
        .ok_or("the CUDA plugin's GPU is not reachable through liboffload")?;
    for (plugin, device) in [
        ("CUDA plugin:      ", &cuda),
        ("liboffload plugin:", &liboffload),
    ] {
        let limits = device.limits();
        println!(
            "{plugin} {} ({} multiprocessors, {} B shared memory per block)",
            device.name(),
            limits.multiprocessors,
            limits.max_shared_per_block
        );
    }

    // The same relax work for both: balanced on the CUDA plugin.
    let overlap_n = 1usize << 26;
    let chunk = overlap_n / 16;
    let x = PinnedVec::from_slice(
        &(0..overlap_n)
            .map(|i| (i % 1000) as f32 * 1e-3)
            .collect::<Vec<_>>(),
    )?;
    let mut y = PinnedVec::filled(1.0f32, overlap_n)?;
    let steps = balanced_steps(&cuda, &x[..chunk], &mut y[..chunk])?;
    println!("saxpy and copies over 2^{log2_n} f32; streams: 2^26 f32 in 16 chunks, {steps} relax steps per element, host memory pinned: {}", x.is_pinned());

    let mut results = Vec::new();
    for device in [&cuda, &liboffload] {
        results.push(measure(device, n, &x, &mut y, chunk, steps)?);
    }
    let (c, l) = (&results[0], &results[1]);
    println!(
        "{:<44} {:>12} {:>12} {:>8}   goal",
        "", "CUDA", "liboffload", "ratio"
    );
    let row = |what: &str, measure: Measure, a: f64, b: f64, goal: Goal| {
        println!("{what:<44} {a:>12.2} {b:>12.2} {:>7.3}x   {goal}", b / a);
        Ratio::print("plugins", what, "the CUDA plugin", measure, b / a, goal);
    };
    row(
        "saxpy kernel bandwidth (GB/s)",
        Measure::Speed,
        c.saxpy_gbps,
        l.saxpy_gbps,
        Goal::AtLeast(0.97),
    );
    row(
        "small launch on device-resident data (us)",
        Measure::Time,
        c.small_launch.as_secs_f64() * 1e6,
        l.small_launch.as_secs_f64() * 1e6,
        Goal::AtMost(1.2),
    );
    row(
        "page-locked copy to the device (GB/s)",
        Measure::Speed,
        c.to_device_gbps,
        l.to_device_gbps,
        Goal::AtLeast(0.95),
    );
    row(
        "page-locked copy from the device (GB/s)",
        Measure::Speed,
        c.from_device_gbps,
        l.from_device_gbps,
        Goal::AtLeast(0.95),
    );
    row(
        "2 streams: speed-up over one",
        Measure::Speed,
        c.overlap[0],
        l.overlap[0],
        Goal::AtLeast(0.9),
    );
    row(
        "4 streams: speed-up over one",
        Measure::Speed,
        c.overlap[1],
        l.overlap[1],
        Goal::AtLeast(0.9),
    );
    let same = c
        .overlap_result
        .iter()
        .zip(&l.overlap_result)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("stream results of both plugins equal bit for bit: {same}");
    if !same {
        return Err("the plugins' stream results differ".into());
    }
    Ok(())
}

fn measure(
    device: &Device,
    n: usize,
    x: &[f32],
    y: &mut [f32],
    chunk: usize,
    steps: u32,
) -> Result<Figures, Failure> {
    let saxpy_gbps = saxpy_bandwidth(device, n)?;
    let small_launch = small_launch_latency(device)?;
    let (to_device_gbps, from_device_gbps) = pinned_copies(device, n)?;
    let one_device = std::slice::from_ref(device);
    let one = best_of_5(y, |y| chunked_relax(one_device, 1, chunk, steps, x, y))?;
    let two = best_of_5(y, |y| chunked_relax(one_device, 2, chunk, steps, x, y))?;
    let four = best_of_5(y, |y| chunked_relax(one_device, 4, chunk, steps, x, y))?;
    let speed_up = |t: Duration| one.as_secs_f64() / t.as_secs_f64();
    Ok(Figures {
        saxpy_gbps,
        small_launch,
        to_device_gbps,
        from_device_gbps,
        overlap: [speed_up(two), speed_up(four)],
        overlap_result: y.to_vec(),
    })
}

/// saxpy over device-resident data: the best kernel time of 10, as read + write bandwidth;
/// the first launch's result is checked against the CPU loop.
fn saxpy_bandwidth(device: &Device, n: usize) -> Result<f64, Failure> {
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 777) as f32 * 0.01).collect();
    let xd = DeviceVec::from_slice(device, &x)?;
    let mut yd = DeviceVec::from_slice(device, &y0)?;
    kernels::saxpy::launch(Launch::on(device), a, &xd, &mut yd)?;
    let mut expected = y0;
    reference::saxpy(a, &x, &mut expected);
    let got = yd.to_vec()?;
    if got
        .iter()
        .zip(&expected)
        .any(|(g, e)| g.to_bits() != e.to_bits())
    {
        return Err(format!("saxpy on {} differs from the CPU loop", device.name()).into());
    }
    let mut best = Duration::MAX;
    for _ in 0..10 {
        kernels::saxpy::launch(Launch::on(device), a, &xd, &mut yd)?;
        best = best.min(
            offload::last_launch()
                .ok_or("no launch report")?
                .kernel_time,
        );
    }
    Ok((3 * n * std::mem::size_of::<f32>()) as f64 / best.as_secs_f64() / 1e9)
}

/// Wall time per launch of saxpy over 1024 device-resident elements (launch, wait, panic
/// check): the best of 3 rounds of 2000 launches.
fn small_launch_latency(device: &Device) -> Result<Duration, Failure> {
    let xd = DeviceVec::from_slice(device, &[1.0f32; 1024])?;
    let mut yd = DeviceVec::zeroed(device, 1024)?;
    kernels::saxpy::launch(Launch::on(device), 1.0, &xd, &mut yd)?;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..2000 {
            kernels::saxpy::launch(Launch::on(device), 1.0, &xd, &mut yd)?;
        }
        best = best.min(start.elapsed() / 2000);
    }
    let sums = yd.to_vec()?;
    if sums.iter().any(|&v| v != 6001.0) {
        return Err(format!("small launches on {} went wrong", device.name()).into());
    }
    Ok(best)
}

/// Copies of `n` f32 from page-locked host memory into a `DeviceVec` and back: the best of 5
/// each way, in GB/s; the round trip is checked.
fn pinned_copies(device: &Device, n: usize) -> Result<(f64, f64), Failure> {
    let host = PinnedVec::from_slice(&(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
    let mut back = PinnedVec::filled(0.0f32, n)?;
    let mut dev = DeviceVec::zeroed(device, n)?;
    let bytes = (n * std::mem::size_of::<f32>()) as f64;
    let (mut to, mut from) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        let start = Instant::now();
        dev.copy_from_host(&host)?;
        to = to.min(start.elapsed());
        let start = Instant::now();
        dev.copy_to_host(&mut back)?;
        from = from.min(start.elapsed());
    }
    if back[..] != host[..] {
        return Err(format!("the page-locked round trip on {} lost data", device.name()).into());
    }
    Ok((
        bytes / to.as_secs_f64() / 1e9,
        bytes / from.as_secs_f64() / 1e9,
    ))
}
