//! `mpirun -n P cg_mpi N SLABS MAX_ITERATIONS`: conjugate gradient for the 2D Poisson problem
//! `A x = b` (A the 5-point Laplacian on an `N × N` grid, zero boundary; b a point source plus a
//! constant load, as `examples/ecosystem`'s `cg`), its rows cut into SLABS slabs dealt out to
//! the P ranks (`P <= SLABS <= N`). Each rank keeps its vectors on its device for the whole
//! solve, queues everything on one stream, exchanges one halo row of the search direction with
//! each neighbour an iteration, and all-reduces the dot products on the device (`offload_mpi`:
//! NCCL between CUDA GPUs, else through the host): each is one `#[reduce(sum)]` per slab, into
//! that slab's element of a vector of partial sums, summed in slab order by the kernels that use
//! it. The slabs, not the ranks, fix the order of every sum, so any number of ranks computes the
//! same bits.
//!
//! Rank 0 gathers x and prints the iterations, the residual by the recurrence, the true
//! residual `|b - A x| / |b|` computed on the CPU, the solve's time and a checksum of x (equal
//! across rank counts). Exit code 1 if the true residual is not within a factor 100 of the
//! recurrence's (a wrong halo would show there).

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use offload::{BackendKind, Device, DeviceVec, Launch};
use offload_ecosystem_examples::kernels::cg::{self as cg_kernels, total};
use offload_mpi::Comm;
use offload_mpi_example::kernels;
use offload_mpi_example::rows::{self, Neighbours};
use offload_mpi_example::{checksum, count, main_of, rank_device};
use std::ops::Range;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: mpirun -n P cg_mpi N SLABS MAX_ITERATIONS";
/// Stop once `|r| / |b|` is below this.
const TOLERANCE: f64 = 1e-10;
/// Read the residual every this many iterations (each read waits for the device).
const CHECK_EVERY: usize = 10;

struct Problem {
    n: usize,
    slabs: usize,
    max_iterations: usize,
}

/// A rank's share: its slabs, and its rows (theirs together).
struct Share {
    slabs: Range<usize>,
    rows: Range<usize>,
}

impl Share {
    fn of(problem: &Problem, ranks: usize, rank: usize) -> Share {
        let slabs = rows::split(problem.slabs, ranks, rank);
        let rows_of = |slab| rows::split(problem.n, problem.slabs, slab);
        let rows = rows_of(slabs.start).start..rows_of(slabs.end - 1).end;
        Share { slabs, rows }
    }
}

fn main() -> ExitCode {
    main_of("cg_mpi", USAGE, parse, run)
}

fn parse(args: Vec<String>, ranks: usize) -> Result<Problem, String> {
    let [n, slabs, max_iterations] = &args[..] else {
        return Err(format!("expected 3 numbers, got {}", args.len()));
    };
    let (n, slabs, max_iterations) = (count(n)?, count(slabs)?, count(max_iterations)?);
    if slabs < ranks || n < slabs {
        return Err(format!(
            "{slabs} slabs for {ranks} ranks and {n} rows: each rank needs a slab, each slab a row"
        ));
    }
    if n * n > u32::MAX as usize {
        return Err("the kernels index the grid with 32 bits".into());
    }
    Ok(Problem {
        n,
        slabs,
        max_iterations,
    })
}

fn run(
    world: &SimpleCommunicator,
    problem: &Problem,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let (rank, ranks) = (world.rank(), world.size());
    let n = problem.n;
    let (device, _) = rank_device(world)?;
    let comm = Comm::new(world, &device)?;
    let share = Share::of(problem, ranks as usize, rank as usize);
    println!(
        "rank {rank}: rows {}..{} of {n} (slabs {}..{} of {}) on {}",
        share.rows.start,
        share.rows.end,
        share.slabs.start,
        share.slabs.end,
        problem.slabs,
        device.name()
    );
    let b = right_hand_side(n);
    let own_b = &b[share.rows.start * n..share.rows.end * n];
    world.barrier();
    let solved = solve(&comm, &device, problem, &share, own_b)?;

    let mut slowest = 0.0f64;
    let time = solved.time.as_secs_f64();
    world.all_reduce_into(&time, &mut slowest, SystemOperation::max());
    let root = world.process_at_rank(0);
    if rank != 0 {
        root.gather_varcount_into(&solved.x[..]);
        return Ok(ExitCode::SUCCESS);
    }
    let mut x = vec![0.0f64; n * n];
    let shares: Vec<Share> = (0..ranks as usize)
        .map(|r| Share::of(problem, ranks as usize, r))
        .collect();
    let counts: Vec<Count> = shares.iter().map(|s| (s.rows.len() * n) as Count).collect();
    let displs: Vec<Count> = shares.iter().map(|s| (s.rows.start * n) as Count).collect();
    {
        let mut partition = PartitionMut::new(&mut x[..], counts, displs);
        root.gather_varcount_into_root(&solved.x[..], &mut partition);
    }
    let true_residual = true_residual(n, &b, &x);
    println!(
        "{ranks} rank(s), {n}x{n}, {} slabs: {} iterations, residual {:.3e} (true {true_residual:.3e}), {:.1} ms on the slowest rank, {:.3} ms an iteration; checksum {:016x}",
        problem.slabs,
        solved.iterations,
        solved.residual,
        slowest * 1e3,
        slowest * 1e3 / solved.iterations.max(1) as f64,
        checksum(x.iter().flat_map(|v| v.to_bits().to_le_bytes()))
    );
    let agree = true_residual <= 100.0 * solved.residual.max(TOLERANCE);
    Ok(if agree {
        ExitCode::SUCCESS
    } else {
        println!("the true residual disagrees with the recurrence's");
        ExitCode::FAILURE
    })
}

/// The right-hand side of `examples/ecosystem`'s `cg`: a point source off centre plus a
/// constant load.
fn right_hand_side(n: usize) -> Vec<f64> {
    let mut b = vec![1.0 / (n * n) as f64; n * n];
    b[(n / 3) * n + n / 4] += 1.0;
    b
}

/// `|b - A x| / |b|` on the CPU, from scratch.
fn true_residual(n: usize, b: &[f64], x: &[f64]) -> f64 {
    let (mut rr, mut bb) = (0.0, 0.0);
    for i in 0..n * n {
        let (row, col) = (i / n, i % n);
        let mut ax = 4.0 * x[i];
        let neighbours = [
            (col > 0).then(|| i - 1),
            (col + 1 < n).then_some(i + 1),
            (row > 0).then(|| i - n),
            (row + 1 < n).then_some(i + n),
        ];
        for j in neighbours.into_iter().flatten() {
            ax -= x[j];
        }
        rr += (b[i] - ax) * (b[i] - ax);
        bb += b[i] * b[i];
    }
    (rr / bb).sqrt()
}

/// One rank's outcome.
struct Solved {
    /// Its rows of x.
    x: Vec<f64>,
    iterations: usize,
    /// `|r| / |b|` by the recurrence, at the last check.
    residual: f64,
    /// The iterations' time (after `|b|`), up to the last residual read.
    time: Duration,
}

/// The launch shape of every kernel: the default on a GPU; on the host backend one block of one
/// thread per worker (the default runs many GPU threads per worker there; see
/// `examples/ecosystem`'s `cg::host_shape`). A fixed shape fixes the order of each slab's sum.
fn shape(device: &Device) -> Launch<'static> {
    match device.kind() {
        BackendKind::Host => Launch::auto()
            .grid(device.limits().multiprocessors.max(1))
            .block(1),
        _ => Launch::auto(),
    }
}

/// CG on this rank's share: `x`, `r` and `ap` hold its rows, `p` its rows with a halo row above
/// and below (zeros beyond the grid); `pap` and the three `rr` (this iteration's, the next and
/// the one after, which this iteration zeroes) one partial sum per slab of the grid.
fn solve(
    comm: &Comm,
    device: &Device,
    problem: &Problem,
    share: &Share,
    own_b: &[f64],
) -> Result<Solved, Box<dyn std::error::Error>> {
    let (n, rows) = (problem.n, share.rows.len());
    let halo = rows::row_halo(n, rows + 2, Neighbours::of(comm.rank(), comm.size()));
    let mut x = DeviceVec::zeroed(device, rows * n)?;
    let mut r = DeviceVec::from_slice(device, own_b)?;
    let mut p_start = vec![0.0; (rows + 2) * n];
    p_start[n..(rows + 1) * n].copy_from_slice(own_b);
    let mut p = DeviceVec::from_slice(device, &p_start)?;
    let mut ap = DeviceVec::zeroed(device, rows * n)?;
    let mut pap = DeviceVec::zeroed(device, problem.slabs)?;
    let mut rr = [
        DeviceVec::zeroed(device, problem.slabs)?,
        DeviceVec::zeroed(device, problem.slabs)?,
        DeviceVec::zeroed(device, problem.slabs)?,
    ];
    // Each slab of this rank: its index, and its elements within the rank's rows.
    let slabs: Vec<(usize, Range<usize>)> = share
        .slabs
        .clone()
        .map(|slab| {
            let global = rows::split(n, problem.slabs, slab);
            let local = global.start - share.rows.start..global.end - share.rows.start;
            (slab, local.start * n..local.end * n)
        })
        .collect();
    let one = |slab: usize| slab..slab + 1;
    let shape = shape(device);
    let outcome = offload::scope(|s| {
        let stream = s.stream(device)?;
        let mut iterate = || -> offload_mpi::Result<(usize, f64, Duration)> {
            for (slab, part) in &slabs {
                let target = rr[0].slice_mut(one(*slab));
                cg_kernels::norm2::enqueue(&stream, shape, r.slice(part.clone()), target)?;
            }
            comm.all_reduce_sum(&stream, &mut rr[0])?;
            let b_norm = total(&rr[0].to_vec()?).sqrt();
            let start = Instant::now();
            let (mut iterations, mut residual) = (0, 1.0);
            while iterations < problem.max_iterations {
                comm.exchange(&stream, &mut p, &halo)?;
                for (slab, part) in &slabs {
                    // The slab's rows of p with the rows above and below.
                    let around = part.start..part.end + 2 * n;
                    kernels::laplacian_dot::enqueue(
                        &stream,
                        shape,
                        n as u32,
                        p.slice(around),
                        ap.slice_mut(part.clone()),
                        pap.slice_mut(one(*slab)),
                    )?;
                }
                comm.all_reduce_sum(&stream, &mut pap)?;
                let [old, new, next] = &mut rr;
                for (slab, part) in &slabs {
                    cg_kernels::update_residual::enqueue(
                        &stream,
                        shape,
                        &*old,
                        &pap,
                        p.slice(part.start + n..part.end + n),
                        ap.slice(part.clone()),
                        x.slice_mut(part.clone()),
                        r.slice_mut(part.clone()),
                        new.slice_mut(one(*slab)),
                    )?;
                }
                comm.all_reduce_sum(&stream, new)?;
                let own_p = p.slice_mut(n..(rows + 1) * n);
                cg_kernels::next_direction_reset::enqueue(
                    &stream, shape, &*new, &*old, &r, own_p, &mut pap, next,
                )?;
                iterations += 1;
                if iterations % CHECK_EVERY == 0 || iterations == problem.max_iterations {
                    residual = total(&new.to_vec()?).sqrt() / b_norm;
                    if residual < TOLERANCE {
                        break;
                    }
                }
                rr.rotate_left(1);
            }
            Ok((iterations, residual, start.elapsed()))
        };
        Ok(iterate())
    })?;
    let (iterations, residual, time) = outcome?;
    Ok(Solved {
        x: x.to_vec()?,
        iterations,
        residual,
        time,
    })
}
