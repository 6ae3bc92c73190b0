//! `mpirun -n P jacobi_mpi WIDTH HEIGHT SWEEPS [--check]`: Jacobi sweeps for Laplace's equation
//! on a WIDTH × HEIGHT grid (top edge 1.0, the rest 0.0), its interior rows dealt out to the P
//! ranks in blocks (`rows`). Each rank drives one device, picked by its rank on its node (GPU
//! `node rank % GPUs`; the host CPU without GPUs), and keeps its block there for all sweeps.
//! Each sweep runs on two streams: one sweeps the rows that need no halo while the other
//! exchanges one halo row with each neighbour (`offload_mpi`: NCCL between CUDA GPUs, else
//! through the host; `OFFLOAD_INFO=1` prints which) and then sweeps the two rows next to the
//! halos. Rank 0 gathers the grid. With `--check`, rank 0 also runs the same sweeps on the whole grid alone (the
//! single-rank run) and compares the two bit for bit; exit code 1 if they differ.
//!
//! Prints each rank's rows and device, then from rank 0 the time of the sweeps on the slowest
//! rank, the update rate, and a checksum of the grid (equal across rank counts).

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use offload::{Device, DeviceVec, Launch, Stream};
use offload_examples::jacobi;
use offload_mpi::{Comm, Halo};
use offload_mpi_example::rows::{self, Neighbours};
use offload_mpi_example::{checksum, count, kernels, main_of, rank_device};
use std::ops::Range;
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
    main_of("jacobi_mpi", USAGE, parse, run)
}

fn parse(args: Vec<String>, ranks: usize) -> Result<Problem, String> {
    let check = args.iter().any(|a| a == "--check");
    let numbers: Vec<&String> = args.iter().filter(|a| *a != "--check").collect();
    let [width, height, sweeps] = numbers[..] else {
        return Err(format!("expected 3 numbers, got {}", numbers.len()));
    };
    let (width, height, sweeps) = (count(width)?, count(height)?, count(sweeps)?);
    if width < 3 || height < 3 {
        return Err(format!("a {width} x {height} grid has no interior"));
    }
    if width * height > u32::MAX as usize {
        return Err("the kernel indexes the grid with 32 bits".into());
    }
    if height < ranks + 2 {
        return Err(format!(
            "{height} rows leave fewer interior rows than the {ranks} ranks"
        ));
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
    let (device, node_rank) = rank_device(world)?;
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
    let comm = Comm::new(world, &device)?;
    let halo = rows::row_halo(width, held.len(), Neighbours::of(rank, ranks));
    world.barrier();
    let (block, elapsed) = sweep(&device, width, block, sweeps, &comm, &halo)?;
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
        checksum(grid.iter().flat_map(|v| v.to_bits().to_le_bytes()))
    );
    if !check {
        return Ok(ExitCode::SUCCESS);
    }
    let alone = single_rank(&device, width, height, sweeps)?;
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

/// `sweeps` Jacobi sweeps over `block` (`width` columns) on `device`, where it stays throughout;
/// its first and last rows are refreshed from the neighbours (`halo`) for each sweep,
/// overlapping the sweep of the rows that do not need them. The block after the sweeps, and
/// the time they took.
fn sweep(
    device: &Device,
    width: usize,
    block: Vec<f32>,
    sweeps: usize,
    comm: &Comm,
    halo: &Halo,
) -> Result<(Vec<f32>, Duration), Box<dyn std::error::Error>> {
    let rows = block.len() / width;
    // Both hold the block's first and last rows, which the kernel keeps (the grid's boundary,
    // or halos that the exchange overwrites).
    let mut a = DeviceVec::from_slice(device, &block)?;
    let mut b = DeviceVec::from_slice(device, &block)?;
    // Rows 2..rows - 2 read no halo; rows 1 and rows - 2 do (one row when they coincide).
    let inner = 2..(rows - 2).max(2);
    let edges: &[usize] = match rows {
        3 => &[1],
        _ => &[1, rows - 2],
    };
    let start = Instant::now();
    let swept = offload::scope(|s| {
        let (interior, halos) = (s.stream(device)?, s.stream(device)?);
        let mut run = || -> offload_mpi::Result<()> {
            for _ in 0..sweeps {
                sweep_rows(&interior, width, inner.clone(), &a, &mut b)?;
                comm.exchange(&halos, &mut a, halo)?;
                for &edge in edges {
                    sweep_rows(&halos, width, edge..edge + 1, &a, &mut b)?;
                }
                std::mem::swap(&mut a, &mut b);
            }
            Ok(())
        };
        Ok(run())
    })?;
    swept?;
    let elapsed = start.elapsed();
    Ok((a.to_vec()?, elapsed))
}

/// Queues the Jacobi sweep of rows `rows` of `input` (`width` columns) into the same rows of
/// `output`. The automatic ordering of DeviceVec uses across streams orders it after the
/// previous sweep's writes of `input` and reads of `output`.
fn sweep_rows(
    stream: &Stream<'_>,
    width: usize,
    rows: Range<usize>,
    input: &DeviceVec<f32>,
    output: &mut DeviceVec<f32>,
) -> offload::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let part = output.slice_mut(rows.start * width..rows.end * width);
    kernels::jacobi_rows::enqueue(
        stream,
        Launch::auto(),
        width as u32,
        rows.start as u32,
        input,
        part,
    )
}

/// The same sweeps on the whole grid on `device` alone, with the whole-grid kernel.
fn single_rank(
    device: &Device,
    width: usize,
    height: usize,
    sweeps: usize,
) -> offload::Result<Vec<f32>> {
    let grid = jacobi::initial_grid(width as u32, height as u32);
    let mut a = DeviceVec::from_slice(device, &grid)?;
    let mut b = DeviceVec::zeroed(device, grid.len())?;
    for _ in 0..sweeps {
        // A plain launch returns once the kernel has run.
        offload_examples::kernels::jacobi2d::launch(
            Launch::on(device),
            width as u32,
            height as u32,
            &a,
            &mut b,
        )?;
        std::mem::swap(&mut a, &mut b);
    }
    a.to_vec()
}
