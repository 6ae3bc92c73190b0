//! The host backend against the same loops written with rayon, on this machine's cores, in one
//! run: `saxpy` (2^24 f32), `add_sub` (a multi-array element-wise update: 2 inputs, 2 outputs,
//! 2^23 i64), `stencil5` (a 5-point 2D stencil, 4096 × 4096 f32, one element per iteration), the
//! same stencil through the grid API (`stencil5_tiles`) and the grid API's 7-point 3D stencil
//! (`stencil7_tiles`, 256³ f32). Each kernel is launched
//! with the default shape; every result is checked bit for bit against rayon's. The plain
//! `stencil5` is held to its own loop in rayon (an element per iteration, row and column from
//! the index) and also printed, without a goal, against the row-wise sweep that the grid API's
//! kernels are held to. Times are the
//! best of `REPEATS` runs of each, alternating offload and rayon so that load from elsewhere
//! hits both alike; the ratio is rayon's time over offload's (≥ 1: offload is as fast). On a
//! machine shared with other work, wall times favour the shorter runs (a short run may fit
//! between two preemptions): the CPU time that the process's threads spent (Linux's
//! `/proc/self/task/*/schedstat`) is printed too, with its own ratio.
//!
//! `host_bench [SCALE]`: sizes divided by 2^SCALE (default 0), for a quick check.

use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernels::stencils::{self, Params3};
use offload_examples::kernels::{self, Grid2};
use rayon::prelude::*;
use std::time::{Duration, Instant};

const REPEATS: usize = 7;
/// Elements per rayon task: large enough that each task's loop vectorises and its overhead
/// vanishes, small enough that both cores stay busy.
const CHUNK: usize = 1 << 14;

/// Best times of `REPEATS` runs of each of `offload` and `rayon`, alternating.
struct Times {
    /// The whole launch, as the caller sees it.
    offload: Duration,
    /// CPU time of all threads of the process during the launch, and during the rayon loop.
    offload_cpu: Duration,
    rayon_cpu: Duration,
    /// The kernel alone (`LaunchReport::kernel_time`): the rest is the launch's own work,
    /// mostly the backup of the outputs that a failed launch restores.
    kernel: Duration,
    rayon: Duration,
}

fn best_of(
    mut offload: impl FnMut() -> offload::Result<()>,
    mut rayon: impl FnMut(),
) -> offload::Result<Times> {
    let mut best = Times {
        offload: Duration::MAX,
        offload_cpu: Duration::MAX,
        rayon_cpu: Duration::MAX,
        kernel: Duration::MAX,
        rayon: Duration::MAX,
    };
    for _ in 0..REPEATS {
        let (start, cpu) = (Instant::now(), cpu_time());
        offload()?;
        best.offload = best.offload.min(start.elapsed());
        best.offload_cpu = best.offload_cpu.min(cpu_time().saturating_sub(cpu));
        best.kernel = best
            .kernel
            .min(offload::last_launch().expect("a launch").kernel_time);
        let (start, cpu) = (Instant::now(), cpu_time());
        rayon();
        best.rayon = best.rayon.min(start.elapsed());
        best.rayon_cpu = best.rayon_cpu.min(cpu_time().saturating_sub(cpu));
    }
    Ok(best)
}

/// CPU time of every thread of this process so far (zero where Linux's schedstat is missing).
fn cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// How a benchmark's rayon loop is written, and so what its ratio is held to.
struct Reference {
    name: &'static str,
    goal: Goal,
}

/// The same loop as the kernel's, in rayon.
const SAME_LOOP: Reference = Reference {
    name: "the same loop in rayon",
    goal: Goal::AtLeast(0.5),
};

fn report(name: &str, reference: Reference, bytes: usize, times: Times, equal: bool) {
    let Times {
        offload,
        kernel,
        rayon,
        offload_cpu,
        rayon_cpu,
    } = times;
    let gbps = |t: Duration| bytes as f64 / t.as_secs_f64() / 1e9;
    let ms = |t: Duration| t.as_secs_f64() * 1e3;
    println!(
        "{name}: {}\n  offload {:8.3} ms {:6.2} GB/s (kernel {:8.3} ms, CPU {:8.3} ms)\n  \
         rayon   {:8.3} ms {:6.2} GB/s (CPU {:8.3} ms)\n  \
         ratio {:.2} (CPU time: {:.2})",
        if equal { "equal" } else { "MISMATCH" },
        ms(offload),
        gbps(offload),
        ms(kernel),
        ms(offload_cpu),
        ms(rayon),
        gbps(rayon),
        ms(rayon_cpu),
        rayon.as_secs_f64() / offload.as_secs_f64(),
        rayon_cpu.as_secs_f64() / offload_cpu.as_secs_f64(),
    );
    Ratio::print(
        "host_bench",
        name,
        reference.name,
        Measure::Speed,
        rayon.as_secs_f64() / offload.as_secs_f64(),
        reference.goal,
    );
}

fn saxpy(host: &Device, n: usize) -> offload::Result<()> {
    let a = 1.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.25).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 977) as f32 - 400.0).collect();
    let (mut y, mut want) = (y0.clone(), y0.clone());
    // Each run updates `y` in place; the check below repeats the same number of updates.
    let times = best_of(
        || kernels::saxpy::launch(Launch::on(host), a, &x, &mut y),
        || {
            want.par_chunks_mut(CHUNK)
                .zip(x.par_chunks(CHUNK))
                .for_each(|(y, x)| y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x))
        },
    )?;
    report(
        &format!("saxpy {n} f32"),
        SAME_LOOP,
        3 * 4 * n,
        times,
        y == want,
    );
    Ok(())
}

fn add_sub(host: &Device, n: usize) -> offload::Result<()> {
    let a: Vec<i64> = (0..n as i64).map(|i| i * 7 - 3).collect();
    let b: Vec<i64> = (0..n as i64).map(|i| i % 1009 - 500).collect();
    let (mut sum, mut diff) = (vec![0i64; n], vec![0i64; n]);
    let (mut want_sum, mut want_diff) = (vec![0i64; n], vec![0i64; n]);
    let times = best_of(
        || kernels::add_sub::launch(Launch::on(host), true, &a, &b, &mut sum, &mut diff),
        || {
            (
                want_sum.par_chunks_mut(CHUNK),
                want_diff.par_chunks_mut(CHUNK),
            )
                .into_par_iter()
                .zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK)))
                .for_each(|((s, d), (a, b))| {
                    for i in 0..s.len() {
                        let bi = b[i].wrapping_neg();
                        s[i] = a[i].wrapping_add(bi);
                        d[i] = a[i].wrapping_sub(bi);
                    }
                })
        },
    )?;
    let equal = sum == want_sum && diff == want_diff;
    report(
        &format!("add_sub {n} i64 (2 in, 2 out)"),
        SAME_LOOP,
        4 * 8 * n,
        times,
        equal,
    );
    Ok(())
}

/// The 5-point stencil's sweep in rayon, as the kernel written one element per iteration does
/// it (`Grid2::point`: row and column from the index, then the point).
fn stencil5_per_element(grid: Grid2, input: &[f32], output: &mut [f32]) {
    output
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            for (k, out) in out.iter_mut().enumerate() {
                *out = grid.point(input, chunk * CHUNK + k);
            }
        })
}

/// The 5-point stencil's sweep in rayon one row per task, each row a loop over its columns
/// (what the grid API's walk does).
fn stencil5_rows(grid: Grid2, input: &[f32], output: &mut [f32]) {
    let (w, h) = (grid.width as usize, grid.height as usize);
    let (centre, edge) = (grid.centre, (1.0 - grid.centre) * 0.25);
    output.par_chunks_mut(w).enumerate().for_each(|(r, row)| {
        if r == 0 || r + 1 == h {
            row.copy_from_slice(&input[r * w..(r + 1) * w]);
            return;
        }
        let (above, here, below) = (
            &input[(r - 1) * w..r * w],
            &input[r * w..(r + 1) * w],
            &input[(r + 1) * w..(r + 2) * w],
        );
        row[0] = here[0];
        row[w - 1] = here[w - 1];
        for c in 1..w - 1 {
            row[c] = centre * here[c] + edge * (here[c - 1] + here[c + 1] + above[c] + below[c]);
        }
    })
}

/// `launch` (the plain `stencil5` or the grid API's `stencil5_tiles`) against `rayon`, one of
/// the sweeps above.
fn stencil5(
    host: &Device,
    side: usize,
    name: &str,
    launch: impl Fn(Launch<'_>, Grid2, &[f32], &mut [f32]) -> offload::Result<()>,
    rayon: fn(Grid2, &[f32], &mut [f32]),
    reference: Reference,
) -> offload::Result<()> {
    let grid = Grid2 {
        width: side as u32,
        height: side as u32,
        centre: 0.5,
    };
    let n = side * side;
    let input: Vec<f32> = (0..n).map(|i| ((i * 37) % 1019) as f32 * 0.125).collect();
    let (mut output, mut want) = (vec![0.0f32; n], vec![0.0f32; n]);
    let times = best_of(
        || launch(Launch::on(host), grid, &input, &mut output),
        || rayon(grid, &input, &mut want),
    )?;
    report(
        &format!("{name} {side}x{side} f32"),
        reference,
        2 * 4 * n,
        times,
        output == want,
    );
    Ok(())
}

/// `stencil7_tiles` (the grid API's 7-point 3D kernel) against the same sweep in rayon, one row
/// of x per task.
fn stencil7(host: &Device, side: usize) -> offload::Result<()> {
    let grid = Params3 {
        nx: side as u32,
        ny: side as u32,
        nz: side as u32,
        centre: 0.25,
    };
    let (nx, plane, n) = (side, side * side, side * side * side);
    let input: Vec<f32> = (0..n).map(|i| ((i * 37) % 1019) as f32 * 0.125).collect();
    let (mut output, mut want) = (vec![0.0f32; n], vec![0.0f32; n]);
    let (centre, edge) = (grid.centre, (1.0 - grid.centre) / 6.0);
    let times = best_of(
        || stencils::stencil7_tiles::launch(Launch::on(host), grid, &input, &mut output),
        || {
            want.par_chunks_mut(nx).enumerate().for_each(|(r, row)| {
                let (z, y) = (r / side, r % side);
                let start = r * nx;
                let here = &input[start..start + nx];
                if z == 0 || y == 0 || z + 1 == side || y + 1 == side {
                    row.copy_from_slice(here);
                    return;
                }
                let row_at = |start: usize| &input[start..start + nx];
                let (north, south) = (row_at(start - nx), row_at(start + nx));
                let (back, front) = (row_at(start - plane), row_at(start + plane));
                row[0] = here[0];
                row[nx - 1] = here[nx - 1];
                for x in 1..nx - 1 {
                    row[x] = centre * here[x]
                        + edge
                            * (here[x - 1]
                                + here[x + 1]
                                + north[x]
                                + south[x]
                                + back[x]
                                + front[x]);
                }
            })
        },
    )?;
    report(
        &format!("stencil7_tiles {side}x{side}x{side} f32"),
        SAME_LOOP,
        2 * 4 * n,
        times,
        output == want,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scale: u32 = std::env::args().nth(1).map_or(Ok(0), |s| s.parse())?;
    let host = Device::host();
    println!(
        "{} ({} rayon threads), best of {REPEATS}; ratio = rayon's time / offload's (≥ 0.5: the goal)",
        host.name(),
        rayon::current_num_threads()
    );
    saxpy(&host, (1 << 24) >> scale)?;
    add_sub(&host, (1 << 23) >> scale)?;
    let side = 4096 >> (scale / 2);
    fn plain(
        launch: Launch<'_>,
        grid: Grid2,
        input: &[f32],
        output: &mut [f32],
    ) -> offload::Result<()> {
        kernels::stencil5::launch(launch, grid, input, output)
    }
    // The plain kernel against its own loop, then against the row-wise sweep that the grid
    // API's walk matches (no goal: what writing it one element per iteration costs).
    stencil5(
        &host,
        side,
        "stencil5",
        plain,
        stencil5_per_element,
        SAME_LOOP,
    )?;
    stencil5(
        &host,
        side,
        "stencil5",
        plain,
        stencil5_rows,
        Reference {
            name: "rayon row by row",
            goal: Goal::None,
        },
    )?;
    stencil5(
        &host,
        side,
        "stencil5_tiles",
        |launch, grid, input, output| stencils::stencil5_tiles::launch(launch, grid, input, output),
        stencil5_rows,
        SAME_LOOP,
    )?;
    stencil7(&host, 256 >> (scale / 3))?;
    Ok(())
}
