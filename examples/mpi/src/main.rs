//! `mpirun -n P jacobi_mpi WIDTH HEIGHT SWEEPS [--check]`: Jacobi sweeps for Laplace's equation
//! on a WIDTH × HEIGHT grid (top edge 1.0, the rest 0.0), its interior rows dealt out to the P
//! ranks in blocks (`rows`). Each rank drives one device, picked by its rank on its node (GPU
//! `node rank % GPUs`; the host CPU without GPUs), keeps its block there for all sweeps, and
//! before each sweep exchanges one halo row with each neighbour (`halo`). Rank 0 gathers the
//! grid. With `--check`, rank 0 also runs the same sweeps on the whole grid alone (the
//! single-rank run) and compares the two bit for bit; exit code 1 if they differ.
//!
//! Prints each rank's rows and device, then from rank 0 the time of the sweeps on the slowest
//! rank, the update rate, and a checksum of the grid (equal across rank counts).

mod halo;
mod rows;

use halo::{Halo, Neighbours};
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use offload::{Device, DeviceVec, Launch};
use offload_examples::{jacobi, kernels};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: mpirun -n P jacobi_mpi WIDTH HEIGHT SWEEPS [--check]";

struct Problem {
    width: usize,
    height: usize,
    sweeps: usize,
    check: bool,
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("jacobi_mpi: MPI was already initialized");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let problem = match parse(std::env::args().skip(1).collect()) {
        Ok(p) => p,
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("jacobi_mpi: {e}\n{USAGE}");
            }
            return ExitCode::from(2);
        }
    };
    match run(&world, &problem) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jacobi_mpi: rank {}: {e}", world.rank());
            // The other ranks may be waiting on this one.
            world.abort(1)
        }
    }
}

fn parse(args: Vec<String>) -> Result<Problem, String> {
    let check = args.iter().any(|a| a == "--check");
    let numbers: Vec<&String> = args.iter().filter(|a| *a != "--check").collect();
    let [width, height, sweeps] = numbers[..] else {
        return Err(format!("expected 3 numbers, got {}", numbers.len()));
    };
    let number = |s: &str| {
        s.parse::<usize>()
            .map_err(|e| format!("`{s}` is not a count: {e}"))
    };
    let (width, height, sweeps) = (number(width)?, number(height)?, number(sweeps)?);
    if width < 3 || height < 3 {
        return Err(format!("a {width} x {height} grid has no interior"));
    }
    if width * height > u32::MAX as usize {
        return Err("the kernel indexes the grid with 32 bits".into());
    }
    Ok(Problem {
        width,
        height,
        sweeps,
        check,
    })
}

fn run(
    world: &SimpleCommunicator,
    problem: &Problem,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let (rank, ranks) = (world.rank(), world.size());
    let &Problem {
        width,
        height,
        sweeps,
        check,
    } = problem;
    if height < ranks as usize + 2 {
        if rank == 0 {
            eprintln!("jacobi_mpi: {height} rows leave fewer interior rows than the {ranks} ranks");
        }
        return Ok(ExitCode::from(2));
    }
    let node_rank = world.split_shared(rank).rank() as usize;
    let device = device_for(node_rank)?;
    let owned = rows::owned(height, ranks as usize, rank as usize);
    let held = rows::held(&owned);
    println!(
        "rank {rank} (node rank {node_rank}): rows {}..{} of {height} on {}",
        owned.start,
        owned.end,
        device.name()
    );

    let mut block = vec![0.0f32; held.len() * width];
    if held.start == 0 {
        block[..width].fill(1.0);
    }
    let mut halo = Halo::new(world, Neighbours::of(rank, ranks), width);
    world.barrier();
    let (block, elapsed) = sweep(&device, width, block, sweeps, Some(&mut halo))?;
    let own_rows = &block[width..block.len() - width];

    let mut slowest = 0.0f64;
    world.all_reduce_into(&elapsed.as_secs_f64(), &mut slowest, SystemOperation::max());
    let root = world.process_at_rank(0);
    if rank != 0 {
        root.gather_varcount_into(own_rows);
        return Ok(ExitCode::SUCCESS);
    }
    let mut grid = jacobi::initial_grid(width as u32, height as u32);
    let blocks: Vec<_> = (0..ranks as usize)
        .map(|r| rows::owned(height, ranks as usize, r))
        .collect();
    let counts: Vec<Count> = blocks.iter().map(|b| (b.len() * width) as Count).collect();
    let displs: Vec<Count> = blocks
        .iter()
        .map(|b| ((b.start - 1) * width) as Count)
        .collect();
    {
        let interior = &mut grid[width..(height - 1) * width];
        let mut partition = PartitionMut::new(interior, counts, displs);
        root.gather_varcount_into_root(own_rows, &mut partition);
    }
    let updates = ((height - 2) * (width - 2) * sweeps) as f64;
    println!(
        "{ranks} rank(s), grid {width}x{height}, {sweeps} sweeps: {:.1} ms on the slowest rank, {:.2} G point updates/s; checksum {:016x}",
        slowest * 1e3,
        updates / slowest / 1e9,
        checksum(&grid)
    );
    if !check {
        return Ok(ExitCode::SUCCESS);
    }
    let whole = jacobi::initial_grid(width as u32, height as u32);
    let (alone, _) = sweep(&device, width, whole, sweeps, None)?;
    let differ = grid
        .iter()
        .zip(&alone)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    if differ == 0 {
        println!("matches the single-rank run bit for bit");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{differ} of {} points differ from the single-rank run",
            grid.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

/// This rank's device: GPU `node_rank % GPUs` of its node, else the default device (the host
/// CPU; an error under OFFLOAD_REQUIRE_GPU=1).
fn device_for(node_rank: usize) -> offload::Result<Device> {
    let gpus = offload::devices().iter().filter(|d| d.is_gpu()).count();
    if gpus == 0 {
        return offload::default_device();
    }
    Device::gpu(node_rank % gpus)
}

/// `sweeps` Jacobi sweeps over `block` (`width` columns) on `device`, where it stays throughout;
/// with `halo`, its first and last rows are refreshed from the neighbours before each sweep.
/// The block after the sweeps, and the time they took.
fn sweep(
    device: &Device,
    width: usize,
    block: Vec<f32>,
    sweeps: usize,
    mut halo: Option<&mut Halo<'_>>,
) -> offload::Result<(Vec<f32>, Duration)> {
    let rows = (block.len() / width) as u32;
    let mut a = DeviceVec::from_slice(device, &block)?;
    let mut b = DeviceVec::zeroed(device, block.len())?;
    let start = Instant::now();
    for _ in 0..sweeps {
        if let Some(halo) = halo.as_deref_mut() {
            halo.exchange(&mut a)?;
        }
        // A plain launch returns once the kernel has run.
        kernels::jacobi2d::launch(Launch::on(device), width as u32, rows, &a, &mut b)?;
        std::mem::swap(&mut a, &mut b);
    }
    let elapsed = start.elapsed();
    Ok((a.to_vec()?, elapsed))
}

/// FNV-1a over the values' bits: equal grids, equal sums, across runs and rank counts.
fn checksum(grid: &[f32]) -> u64 {
    grid.iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, byte| {
            (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}
