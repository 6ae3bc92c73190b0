//! Stencils written with the grid API (`#[grid(..)]` outputs, `GridOut2`/`GridOut3::stencil`)
//! against a device-to-device memcpy of the same bytes measured in the same run, on the default
//! device: the 5-point 2D stencil at 16384² f32 (the plain per-element `stencil5` beside it) and a
//! 7-point 3D one at 512³ f32, each with the default launch (strips of `MIN_STRIP_ROWS` = 8 rows)
//! and with launches of taller strips (rows each thread walks: `chunk rows / threads`), and the 3D
//! one through the copy engine (`kernels::stencil_tma`, sm_90) in several tile shapes, rings and
//! runs. Every result is checked against the CPU loop, bit for bit. `stencil_bench 3d` runs the
//! 3D stencils alone.
//!
//! Times are the kernel's alone (events around it, `kernel_timing`), the best of several launches;
//! bandwidth counts one read and one write of every point.

use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernel_timing::best_kernel_time;
use offload_examples::kernels::stencil_tma::{stencil_tma_shared_bytes, TmaMarch};
use offload_examples::kernels::stencils::{self, Params3};
use offload_examples::kernels::{self, Grid2};
use offload_examples::stencil_tma_launch::{stencil7_tma_on, TmaTile};
use offload_examples::{reference, reference_bandwidth};
use std::time::Duration;

const REPEATS: usize = 5;
const BLOCK: u32 = 256;

/// `stencil7_tma`'s measured shapes, each on a block per work item: tile, ring slots and planes
/// per run. The first carries the goal (issue 30).
const TMA_VARIANTS: &[(TmaTile, u32, u32)] = &[
    (TmaTile::new(128, 32, 2), 4, 64),
    (TmaTile::new(128, 16, 2), 4, 64),
    (TmaTile::new(128, 16, 2), 4, 32),
    (TmaTile::new(128, 16, 2), 5, 64),
    (TmaTile::new(128, 16, 2), 4, 128),
    (TmaTile::new(128, 16, 4), 4, 64),
    (TmaTile::new(128, 16, 4), 6, 64),
    (TmaTile::new(128, 16, 4), 4, 32),
    (TmaTile::new(128, 32, 4), 3, 64),
    (TmaTile::new(128, 32, 4), 4, 64),
    (TmaTile::new(128, 32, 4), 4, 32),
    (TmaTile::new(128, 32, 2), 3, 64),
    (TmaTile::new(64, 32, 4), 4, 64),
    (TmaTile::new(64, 32, 2), 4, 64),
    (TmaTile::new(64, 16, 4), 4, 64),
    (TmaTile::new(64, 16, 2), 4, 64),
];

/// One measured variant: its name, whether it carries the goal (issues 11 and 30), its time and
/// whether it matched the CPU.
struct Run {
    what: String,
    goal: bool,
    time: Duration,
    ok: bool,
}

/// The launch giving strips of `rows` rows when `chunk_rows` chunk rows are shared out.
fn strips(device: &Device, chunk_rows: usize, rows: usize) -> Launch<'_> {
    let blocks = chunk_rows.div_ceil(rows * BLOCK as usize) as u32;
    Launch::on(device).grid(blocks).block(BLOCK)
}

fn report(title: &str, points: usize, runs: &[Run], memcpy: Option<f64>) {
    let gbps = |t: Duration| (2 * points * 4) as f64 / t.as_secs_f64() / 1e9;
    println!("{title}:");
    for r in runs {
        let ratio = memcpy.map_or(String::new(), |m| {
            format!(", {:.3} x memcpy", gbps(r.time) / m)
        });
        println!(
            "  {:<44} {:.3} ms, {:.0} GB/s{ratio}, {}",
            r.what,
            r.time.as_secs_f64() * 1e3,
            gbps(r.time),
            if r.ok { "ok" } else { "MISMATCH" }
        );
        if let Some(m) = memcpy {
            let goal = if r.goal {
                Goal::AtLeast(0.85)
            } else {
                Goal::None
            };
            Ratio::print(
                "stencil_bench",
                &r.what,
                "device-to-device memcpy",
                Measure::Speed,
                gbps(r.time) / m,
                goal,
            );
        }
    }
    if let Some(m) = memcpy {
        println!("  device-to-device memcpy of the same bytes: {m:.0} GB/s (read + write)");
    }
}

/// The 5-point 2D stencil's figures; whether every result matched the CPU.
fn two_d(device: &Device) -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = device.is_gpu();
    let side = if gpu { 16384u32 } else { 1024 };
    let n = side as usize * side as usize;
    let grid = Grid2 {
        width: side,
        height: side,
        centre: 0.5,
    };
    let input: Vec<f32> = (0..n).map(|i| (i % 4099) as f32 * 0.25).collect();
    let mut want = vec![0.0f32; n];
    reference::stencil5(grid, &input, &mut want);
    let mut out = vec![0.0f32; n];
    let mut runs = Vec::new();
    let mut measure = |what: String,
                       goal: bool,
                       launch: &mut dyn FnMut(&mut Vec<f32>) -> offload::Result<()>|
     -> offload::Result<()> {
        out.fill(0.0);
        let time = best_kernel_time(REPEATS, || launch(&mut out))?;
        runs.push(Run {
            what,
            goal,
            time,
            ok: out == want,
        });
        Ok(())
    };
    measure(
        format!("stencil5 (plain, per element) {side}² f32"),
        false,
        &mut |o| kernels::stencil5::launch(Launch::on(device), grid, &input, o),
    )?;
    measure(
        format!("stencil5_tiles {side}² f32, default launch"),
        true,
        &mut |o| stencils::stencil5_tiles::launch(Launch::on(device), grid, &input, o),
    )?;
    let chunk_rows = n / 4;
    for rows in [16, 32, 64] {
        measure(
            format!("stencil5_tiles {side}² f32, strips of {rows} rows"),
            false,
            &mut |o| {
                let launch = strips(device, chunk_rows, rows);
                stencils::stencil5_tiles::launch(launch, grid, &input, o)
            },
        )?;
    }
    let memcpy = reference_bandwidth::device_to_device(device, n * 4)?;
    report("5-point 2D stencil", n, &runs, memcpy);
    Ok(runs.iter().all(|r| r.ok))
}

/// The 7-point 3D stencil's figures: `stencil7_tiles`, and `stencil7_tma` in the shapes of
/// `TMA_VARIANTS`; whether every result matched the CPU.
fn three_d(device: &Device) -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = device.is_gpu();
    let edge = if gpu { 512u32 } else { 64 };
    let n = (edge as usize).pow(3);
    let grid = Params3 {
        nx: edge,
        ny: edge,
        nz: edge,
        centre: 0.25,
    };
    let input: Vec<f32> = (0..n).map(|i| (i % 4099) as f32 * 0.25).collect();
    let mut want = vec![0.0f32; n];
    reference::stencil7(grid, &input, &mut want);
    let mut out = vec![0.0f32; n];
    let mut runs = Vec::new();
    let chunk_rows = n / 4;
    for rows in [0, 16, 32, 64] {
        out.fill(0.0);
        let launch = match rows {
            0 => Launch::on(device),
            _ => strips(device, chunk_rows, rows),
        };
        let time = best_kernel_time(REPEATS, || {
            stencils::stencil7_tiles::launch(launch, grid, &input, &mut out)
        })?;
        let shape = match rows {
            0 => "default launch".to_string(),
            _ => format!("strips of {rows} planes"),
        };
        runs.push(Run {
            what: format!("stencil7_tiles {edge}³ f32, {shape}"),
            goal: rows == 0,
            time,
            ok: out == want,
        });
    }
    offload::region_on(device, |r| {
        let i = r.to(&input)?;
        let mut o = r.from(&mut out)?;
        for &(tile, ring, planes) in TMA_VARIANTS {
            let march = TmaMarch { ring, planes };
            let shared = stencil_tma_shared_bytes(tile.tx, tile.ty, ring);
            if shared > device.limits().max_shared_per_block {
                println!(
                    "  {tile:?} with a ring of {ring}: not run, {shared} bytes of shared memory"
                );
                continue;
            }
            o.update_to(|o| o.fill(0.0))?;
            let time = best_kernel_time(REPEATS, || {
                stencil7_tma_on(device, (tile, march, None), grid, &i, &mut o)
            })?;
            let TmaTile { tx, ty, cpt } = tile;
            runs.push(Run {
                what: format!(
                    "stencil7_tma {edge}³ f32, {tx}x{ty} tiles, {cpt} chunks/thread, ring {ring}, \
                     runs of {planes}"
                ),
                goal: (tile, ring, planes) == TMA_VARIANTS[0],
                time,
                ok: o.update_from()? == want.as_slice(),
            });
        }
        Ok(())
    })?;
    let memcpy = reference_bandwidth::device_to_device(device, n * 4)?;
    report("7-point 3D stencil", n, &runs, memcpy);
    Ok(runs.iter().all(|r| r.ok))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device: Device = offload::default_device()?;
    println!("device: {}", device.name());
    let only_3d = std::env::args().nth(1).is_some_and(|a| a == "3d");
    let ok_2d = only_3d || two_d(&device)?;
    if !(three_d(&device)? && ok_2d) {
        return Err("a stencil does not match the CPU loop".into());
    }
    Ok(())
}
