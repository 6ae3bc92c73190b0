//! Launch cost against the raw CUDA driver, measured in the same run (issue 11, item 3): the
//! kernels' own image loaded with `cuModuleLoadData` and launched with `cuLaunchKernel` on a
//! stream of its own is the reference. Prints, never asserts:
//! - queueing on a stream (saxpy, 256 elements, on device slices), through the generic `enqueue`
//!   and through a launch prepared once (`saxpy::prepare`), against `cuLaunchKernel` (goal ≤ 1.1×);
//! - a plain launch on `DeviceVec`s against `cuLaunchKernel` + `cuStreamSynchronize` (goal ≤ raw
//!   + 1 µs);
//!
//!   these two in interleaved rounds (a batch of ours, then one of the reference), the median of
//!   the rounds' ratios printed;
//! - a plain launch with its copies (saxpy, 256 elements in and out of host `Vec`s) against the
//!   same copies, launch and synchronize done raw (goal ≤ 1.2×);
//! - Jacobi 4096² in a data region against the kernel-only time of the same launches (CUDA
//!   events around back-to-back raw launches of the same shape; goal ≥ 0.8×);
//! - record and replay: 20 saxpy launches recorded once (`Stream::record_graph`) and replayed,
//!   against the same launches queued one by one and a raw stream-captured graph of them
//!   (`cuGraphLaunch`), time per kernel until the stream drained (goal ≤ 2 µs);
//! - mapped copies of 1 GiB of pageable memory against a pinned memcpy (goal ≥ 0.9×; the minimum
//!   over the ways is printed).
//!
//! `cargo run --release -p offload-examples --bin launch_bench [-- copies|launches]`
//! (`copies`: the mapped copies only, `launches`: everything but them; for repeated
//! invocations).

use cudarc::driver::DriverError;
use offload::{Device, DeviceVec, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::reference_launch::{RawDriver, RawFunction};
use offload_examples::{jacobi, kernels, mapped_copies};
use std::ffi::c_void;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Elements of the small saxpy.
const N: usize = 256;
/// Launches per timed batch.
const BATCH: u32 = 200;
/// Timed batches; the best is kept.
const ROUNDS: usize = 7;

fn main() -> Result<()> {
    let only = std::env::args().nth(1);
    let (launches, copies) = match only.as_deref() {
        None => (true, true),
        Some("copies") => (false, true),
        Some("launches") => (true, false),
        Some(other) => return Err(format!("unknown argument `{other}`: copies or launches").into()),
    };
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    let Some(raw) = RawDriver::new(&device, kernels::saxpy::KERNEL.images)? else {
        println!("no CUDA GPU with the kernels' image: no raw driver to compare with, nothing to measure");
        return Ok(());
    };
    if launches {
        let saxpy = raw.function("saxpy")?;
        queueing(&device, &raw, saxpy)?;
        resident_launch(&device, &raw, saxpy)?;
        small_copies(&device, &raw, saxpy)?;
        jacobi_in_region(&device, &raw, 4096, 200)?;
        replay(&device, &raw, saxpy)?;
    }
    if copies {
        mapped(&device)?;
    }
    Ok(())
}

fn micros(time: Duration) -> f64 {
    time.as_secs_f64() * 1e6
}

/// Per-iteration time of `BATCH` calls of `step`, then `settle` (untimed).
fn batch(
    step: impl FnMut() -> Result<()>,
    settle: impl FnOnce() -> Result<()>,
) -> Result<Duration> {
    let time = batch_of(BATCH, step)?;
    settle()?;
    Ok(time)
}

/// Per-iteration time of `calls` calls of `step`.
fn batch_of(calls: u32, mut step: impl FnMut() -> Result<()>) -> Result<Duration> {
    let start = Instant::now();
    for _ in 0..calls {
        step()?;
    }
    Ok(start.elapsed() / calls)
}

/// A launch figure's goal: a ratio, or microseconds (above the reference, or in all), which
/// the ratio line states as a ratio to this run's reference.
enum LaunchGoal {
    Ratio(f64),
    MicrosAbove(f64),
    MicrosAt(f64),
    None,
}

impl LaunchGoal {
    /// The goal as a ratio to a reference of `raw_us` microseconds, and as text.
    fn against(self, raw_us: f64) -> (Goal, String) {
        match self {
            LaunchGoal::Ratio(g) => (Goal::AtMost(g), format!("<= {g}x")),
            LaunchGoal::MicrosAbove(us) => (
                Goal::AtMost((raw_us + us) / raw_us),
                format!("<= raw + {us} us"),
            ),
            LaunchGoal::MicrosAt(us) => (Goal::AtMost(us / raw_us), format!("<= {us} us")),
            LaunchGoal::None => (Goal::None, "-".to_string()),
        }
    }
}

fn report(what: &str, ours: Duration, reference: &str, raw: Duration, goal: LaunchGoal) {
    let (o, r) = (micros(ours), micros(raw));
    let (goal, text) = goal.against(r);
    println!(
        "  {what:<44} {o:7.2} us   {reference:<36} {r:7.2} us   ratio {:.2}  (+{:.2} us; goal {text})",
        o / r,
        o - r
    );
    Ratio::print(
        "launch_bench",
        what.trim(),
        reference,
        Measure::Time,
        o / r,
        goal,
    );
}

/// saxpy's parameters as `cuLaunchKernel` takes them: `a`, then each slice as address, length.
struct SaxpyParams {
    a: f32,
    x: u64,
    y: u64,
    len: u64,
}

impl SaxpyParams {
    fn pointers(&mut self) -> [*mut c_void; 5] {
        let p = |v: &mut u64| v as *mut u64 as *mut c_void;
        let len = &mut self.len as *mut u64 as *mut c_void;
        [
            &mut self.a as *mut f32 as *mut c_void,
            p(&mut self.x),
            len,
            p(&mut self.y),
            len,
        ]
    }
}

/// Two device buffers of `N` floats on the raw stream, holding `x` and `y`.
fn raw_buffers(raw: &RawDriver, x: &[f32], y: &[f32]) -> Result<SaxpyParams> {
    let (dx, dy) = (raw.alloc(N * 4)?, raw.alloc(N * 4)?);
    // SAFETY: each buffer holds N floats; the host data outlives the synchronize below.
    unsafe {
        raw.copy_to_device(dx, x)?;
        raw.copy_to_device(dy, y)?;
    }
    raw.synchronize()?;
    Ok(SaxpyParams {
        a: 1.0,
        x: dx,
        y: dy,
        len: N as u64,
    })
}

fn free_raw(raw: &RawDriver, params: &SaxpyParams) -> Result<()> {
    raw.synchronize()?;
    // SAFETY: allocated by `raw_buffers`, the stream drained.
    unsafe {
        raw.free(params.x)?;
        raw.free(params.y)?;
    }
    Ok(raw.synchronize()?)
}

/// One raw saxpy launch of one block of `N` threads (the default shape for `N` elements).
fn raw_saxpy(
    raw: &RawDriver,
    saxpy: RawFunction,
    params: &mut SaxpyParams,
) -> std::result::Result<(), DriverError> {
    let mut pointers = params.pointers();
    // SAFETY: saxpy's parameters; the buffers live until `free_raw`, after the stream drained.
    unsafe { raw.launch(saxpy, 1, N as u32, &mut pointers) }
}

/// Rounds of interleaved batches in the launch-cost figures: each round times a batch of ours
/// and then a batch of the raw reference, so that both see the same state of the machine; the
/// median of the rounds' ratios is the figure, resolving 0.1 µs where the best of a few long
/// batches swung by 0.4 µs between invocations.
const PAIRED_ROUNDS: usize = 100;
/// Calls per batch of a round.
const PAIRED_BATCH: u32 = 100;

/// Per-call times of the rounds of one figure: ours and the reference's, in µs.
#[derive(Default)]
struct Paired {
    ours: Vec<f64>,
    raw: Vec<f64>,
}

impl Paired {
    /// Time a batch of `ours`, wait (`settle`, untimed), then a batch of `raw` and wait.
    fn round(
        &mut self,
        ours: impl FnMut() -> Result<()>,
        raw: impl FnMut() -> Result<()>,
        settle: impl FnOnce() -> Result<()>,
        raw_settle: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.ours.push(micros(batch_of(PAIRED_BATCH, ours)?));
        settle()?;
        self.raw.push(micros(batch_of(PAIRED_BATCH, raw)?));
        raw_settle()
    }

    fn ratios(&self) -> Vec<f64> {
        sorted(self.ours.iter().zip(&self.raw).map(|(o, r)| o / r))
    }

    fn excesses(&self) -> Vec<f64> {
        sorted(self.ours.iter().zip(&self.raw).map(|(o, r)| o - r))
    }
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The value at fraction `q` of sorted `v` (0.5: the median).
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// A figure from interleaved rounds: the medians of ours, the reference's, the ratio of each
/// round and the difference; the ratio's 10th–90th percentile over the rounds beside it.
fn report_paired(what: &str, paired: &Paired, reference: &str, goal: LaunchGoal) {
    let (ratios, excesses) = (paired.ratios(), paired.excesses());
    let (o, r) = (
        quantile(&sorted(paired.ours.iter().copied()), 0.5),
        quantile(&sorted(paired.raw.iter().copied()), 0.5),
    );
    let (ratio, excess) = (quantile(&ratios, 0.5), quantile(&excesses, 0.5));
    let (goal, text) = goal.against(r);
    println!(
        "  {what:<44} {o:7.2} us   {reference:<36} {r:7.2} us   ratio {ratio:.3} (rounds \
         {:.3}-{:.3})  ({excess:+.2} us; goal {text})",
        quantile(&ratios, 0.1),
        quantile(&ratios, 0.9),
    );
    Ratio::print(
        "launch_bench",
        what.trim(),
        reference,
        Measure::Time,
        ratio,
        goal,
    );
}

fn queueing(device: &Device, raw: &RawDriver, saxpy: RawFunction) -> Result<()> {
    let (x, y) = (vec![1.0f32; N], vec![2.0f32; N]);
    let mut params = raw_buffers(raw, &x, &y)?;
    let (mut generic, mut prepared) = (Paired::default(), Paired::default());
    let mut failed = None;
    let result = offload::scope(|s| {
        let stream = s.stream(device)?;
        let (dx, dy) = (stream.upload(&x)?, stream.upload(&y)?);
        let mut handle = kernels::saxpy::prepare(&stream, Launch::on(device))?;
        for _ in 0..10 {
            kernels::saxpy::enqueue(&stream, Launch::on(device), 1.0, dx, dy)?;
            handle.enqueue(1.0, dx, dy)?;
        }
        stream.synchronize()?;
        for _ in 0..PAIRED_ROUNDS {
            let rounds = generic
                .round(
                    || {
                        Ok(kernels::saxpy::enqueue(
                            &stream,
                            Launch::on(device),
                            1.0,
                            dx,
                            dy,
                        )?)
                    },
                    || Ok(raw_saxpy(raw, saxpy, &mut params)?),
                    || Ok(stream.synchronize()?),
                    || Ok(raw.synchronize()?),
                )
                .and_then(|()| {
                    prepared.round(
                        || Ok(handle.enqueue(1.0, dx, dy)?),
                        || Ok(raw_saxpy(raw, saxpy, &mut params)?),
                        || Ok(stream.synchronize()?),
                        || Ok(raw.synchronize()?),
                    )
                });
            if let Err(e) = rounds {
                failed = Some(e);
                break;
            }
        }
        stream.to_vec(dy)
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // Both ways add x (ones) to y (twos) at each launch.
    let launches = 20 + 2 * PAIRED_ROUNDS * PAIRED_BATCH as usize;
    let expected = 2.0 + launches as f32;
    if result.iter().any(|&v| v != expected) {
        return Err(format!(
            "saxpy queued {launches} times gave {} (expected {expected})",
            result[0]
        )
        .into());
    }
    free_raw(raw, &params)?;
    println!(
        "launch cost, saxpy of {N} elements, median of {PAIRED_ROUNDS} rounds of {PAIRED_BATCH} \
         ours then {PAIRED_BATCH} raw:"
    );
    report_paired(
        "queue on a stream (enqueue, device slices)",
        &generic,
        "cuLaunchKernel",
        LaunchGoal::Ratio(1.1),
    );
    report_paired(
        "queue on a stream (prepared, device slices)",
        &prepared,
        "cuLaunchKernel",
        LaunchGoal::Ratio(1.1),
    );
    Ok(())
}

fn resident_launch(device: &Device, raw: &RawDriver, saxpy: RawFunction) -> Result<()> {
    let (x, y) = (vec![1.0f32; N], vec![2.0f32; N]);
    let mut params = raw_buffers(raw, &x, &y)?;
    let dx = DeviceVec::from_slice(device, &x)?;
    let mut dy = DeviceVec::from_slice(device, &y)?;
    for _ in 0..10 {
        kernels::saxpy::launch(Launch::on(device), 1.0, &dx, &mut dy)?;
    }
    let mut paired = Paired::default();
    for _ in 0..PAIRED_ROUNDS {
        paired.round(
            || {
                Ok(kernels::saxpy::launch(
                    Launch::on(device),
                    1.0,
                    &dx,
                    &mut dy,
                )?)
            },
            || {
                raw_saxpy(raw, saxpy, &mut params)?;
                Ok(raw.synchronize()?)
            },
            || Ok(()),
            || Ok(()),
        )?;
    }
    free_raw(raw, &params)?;
    report_paired(
        "plain launch on DeviceVecs",
        &paired,
        "cuLaunchKernel + cuStreamSynchronize",
        LaunchGoal::MicrosAbove(1.0),
    );
    Ok(())
}

fn small_copies(device: &Device, raw: &RawDriver, saxpy: RawFunction) -> Result<()> {
    let x = vec![1.0f32; N];
    let (mut y, mut raw_y) = (vec![2.0f32; N], vec![2.0f32; N]);
    let mut params = raw_buffers(raw, &x, &raw_y)?;
    let mut launch =
        || -> Result<()> { Ok(kernels::saxpy::launch(Launch::on(device), 1.0, &x, &mut y)?) };
    for _ in 0..10 {
        launch()?;
    }
    let (mut ours, mut theirs, mut theirs_alloc) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        ours = ours.min(batch(&mut launch, || Ok(()))?);
        let raw_step = || {
            // SAFETY: the buffers hold N floats; the host data is alive until the synchronize.
            unsafe {
                raw.copy_to_device(params.x, &x)?;
                raw.copy_to_device(params.y, &raw_y)?;
                raw_saxpy(raw, saxpy, &mut params)?;
                raw.copy_from_device(&mut raw_y, params.y)?;
            }
            Ok(raw.synchronize()?)
        };
        theirs = theirs.min(batch(raw_step, || Ok(()))?);
        let raw_alloc_step = || {
            let mut own = SaxpyParams {
                a: 1.0,
                x: raw.alloc(N * 4)?,
                y: raw.alloc(N * 4)?,
                len: N as u64,
            };
            // SAFETY: as above; the buffers are freed after their last use on the stream.
            unsafe {
                raw.copy_to_device(own.x, &x)?;
                raw.copy_to_device(own.y, &raw_y)?;
                raw_saxpy(raw, saxpy, &mut own)?;
                raw.copy_from_device(&mut raw_y, own.y)?;
                raw.free(own.x)?;
                raw.free(own.y)?;
            }
            Ok(raw.synchronize()?)
        };
        theirs_alloc = theirs_alloc.min(batch(raw_alloc_step, || Ok(()))?);
    }
    // One more of each from the same start: the same result.
    y.fill(2.0);
    raw_y.fill(2.0);
    kernels::saxpy::launch(Launch::on(device), 1.0, &x, &mut y)?;
    // SAFETY: as above.
    unsafe {
        raw.copy_to_device(params.y, &raw_y)?;
        raw_saxpy(raw, saxpy, &mut params)?;
        raw.copy_from_device(&mut raw_y, params.y)?;
    }
    raw.synchronize()?;
    free_raw(raw, &params)?;
    if y != raw_y || y[0] != 3.0 {
        return Err("offload's and the raw saxpy's results differ".into());
    }
    report(
        "plain launch with copies (&x, &mut y)",
        ours,
        "2 copies in, launch, copy out, sync",
        theirs,
        LaunchGoal::Ratio(1.2),
    );
    report(
        "  (the same launch with copies)",
        ours,
        "the same + cuMemAllocAsync/FreeAsync",
        theirs_alloc,
        LaunchGoal::None,
    );
    Ok(())
}

fn jacobi_in_region(device: &Device, raw: &RawDriver, side: u32, sweeps: usize) -> Result<()> {
    let mut grid = jacobi::initial_grid(side, side);
    let mut scratch = vec![0.0f32; grid.len()];
    let mut region_time = Duration::MAX;
    offload::region_on(device, |r| {
        let mut a = r.tofrom(&mut grid)?;
        let mut b = r.alloc(&mut scratch)?;
        for round in 0..3 {
            let start = Instant::now();
            for _ in 0..sweeps / 2 {
                kernels::jacobi2d::launch(Launch::on(device), side, side, &a, &mut b)?;
                kernels::jacobi2d::launch(Launch::on(device), side, side, &b, &mut a)?;
            }
            // The first round loads the image and warms up.
            if round > 0 {
                region_time = region_time.min(start.elapsed());
            }
        }
        Ok(())
    })?;
    let shape = offload::last_launch().ok_or("no launch report")?;
    let (grid_x, block_x) = (shape.grid.unwrap().x, shape.block.unwrap().x);
    // The same launches back to back on the raw stream, timed by the device.
    let jacobi_fn = raw.function("jacobi2d")?;
    let bytes = grid.len() * 4;
    let (da, db) = (raw.alloc(bytes)?, raw.alloc(bytes)?);
    let start = jacobi::initial_grid(side, side);
    // SAFETY: both buffers hold the grid; `start` outlives the synchronize in `device_time`.
    unsafe { raw.copy_to_device(da, &start)? };
    let (mut width, mut height, mut len) = (side, side, grid.len() as u64);
    let mut sweep = |input: u64, output: u64| {
        let (mut input, mut output) = (input, output);
        let p = |v: &mut u64| v as *mut u64 as *mut c_void;
        let mut params = [
            &mut width as *mut u32 as *mut c_void,
            &mut height as *mut u32 as *mut c_void,
            p(&mut input),
            &mut len as *mut u64 as *mut c_void,
            p(&mut output),
            &mut len as *mut u64 as *mut c_void,
        ];
        // SAFETY: jacobi2d's parameters; the buffers live until freed after the stream drained.
        unsafe { raw.launch(jacobi_fn, grid_x, block_x, &mut params) }
    };
    let mut kernel_ms = f64::MAX;
    for _ in 0..3 {
        let ms = raw.device_time(|| {
            for _ in 0..sweeps / 2 {
                sweep(da, db)?;
                sweep(db, da)?;
            }
            Ok(())
        })?;
        kernel_ms = kernel_ms.min(ms);
    }
    // SAFETY: allocated above, the stream drained.
    unsafe {
        raw.free(da)?;
        raw.free(db)?;
    }
    raw.synchronize()?;
    let (region_ms, per) = (region_time.as_secs_f64() * 1e3, sweeps as f64);
    println!(
        "jacobi {side}x{side}, {sweeps} sweeps (grid {grid_x} x block {block_x}), best of 2 \
         (raw: 3): in a data region {:.4} ms/sweep, kernel only (raw launches, CUDA events) \
         {:.4} ms/sweep, kernel-only / region {:.2} (goal >= 0.8)",
        region_ms / per,
        kernel_ms / per,
        kernel_ms / region_ms
    );
    Ratio::print(
        "launch_bench",
        &format!("Jacobi {side}x{side}, {sweeps} sweeps in a data region"),
        "kernel only (raw launches)",
        Measure::Speed,
        kernel_ms / region_ms,
        Goal::AtLeast(0.8),
    );
    Ok(())
}

/// Launches in a recorded sequence.
const RECORDED: u32 = 20;
/// Replays per timed round.
const REPLAYS: u32 = 50;

fn replay(device: &Device, raw: &RawDriver, saxpy: RawFunction) -> Result<()> {
    let (x, y) = (vec![1.0f32; N], vec![2.0f32; N]);
    let mut params = raw_buffers(raw, &x, &y)?;
    let raw_graph =
        raw.capture(|| (0..RECORDED).try_for_each(|_| raw_saxpy(raw, saxpy, &mut params)))?;
    let kernels = RECORDED * REPLAYS;
    let (mut replayed, mut one_by_one, mut raw_replayed) =
        (Duration::MAX, Duration::MAX, Duration::MAX);
    let mut replay_call = Duration::MAX;
    let mut raw_failed = None;
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let (dx, dy) = (stream.upload(&x)?, stream.upload(&y)?);
        let enqueue = || kernels::saxpy::enqueue(&stream, Launch::on(device), 1.0, dx, dy);
        let graph = stream.record_graph(|r| {
            for _ in 0..RECORDED {
                kernels::saxpy::enqueue(r, Launch::on(device), 1.0, dx, dy)?;
            }
            Ok(())
        })?;
        graph.launch()?;
        stream.synchronize()?;
        for _ in 0..ROUNDS {
            let start = Instant::now();
            for _ in 0..REPLAYS {
                graph.launch()?;
            }
            replay_call = replay_call.min(start.elapsed() / REPLAYS);
            stream.synchronize()?;
            replayed = replayed.min(start.elapsed() / kernels);
            let start = Instant::now();
            for _ in 0..kernels {
                enqueue()?;
            }
            stream.synchronize()?;
            one_by_one = one_by_one.min(start.elapsed() / kernels);
            let start = Instant::now();
            let raw_round = (0..REPLAYS)
                .try_for_each(|_| raw.launch_graph(&raw_graph))
                .and_then(|()| raw.synchronize());
            if let Err(e) = raw_round {
                raw_failed = Some(e);
                break;
            }
            raw_replayed = raw_replayed.min(start.elapsed() / kernels);
        }
        Ok(())
    })?;
    if let Some(e) = raw_failed {
        return Err(e.into());
    }
    drop(raw_graph);
    free_raw(raw, &params)?;
    println!(
        "record and replay, {RECORDED} saxpy launches of {N} elements recorded once, {REPLAYS} \
         replays, best of {ROUNDS}, time per kernel until the stream drained (host call of one \
         replay: {:.2} us):",
        micros(replay_call)
    );
    report(
        "Graph::launch",
        replayed,
        "raw cuGraphLaunch of the same",
        raw_replayed,
        LaunchGoal::MicrosAt(2.0),
    );
    report(
        "(the same launches queued one by one)",
        one_by_one,
        "raw cuGraphLaunch",
        raw_replayed,
        LaunchGoal::None,
    );
    Ok(())
}

fn mapped(device: &Device) -> Result<()> {
    let bytes = 1 << 30;
    let Some(rows) = mapped_copies::measure(device, bytes)? else {
        return Ok(());
    };
    mapped_copies::print("launch_bench", bytes, &rows);
    let worst = rows
        .iter()
        .filter(|r| !r.page_locked)
        .min_by(|a, b| a.ratio().total_cmp(&b.ratio()))
        .expect("pageable rows");
    println!(
        "mapped copies of pageable memory: worst {:.2}x of the pinned memcpy ({}; goal >= 0.9)",
        worst.ratio(),
        worst.name
    );
    Ok(())
}
