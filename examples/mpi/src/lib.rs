//! What the MPI examples share: the kernels that sweep and solve one rank's block of rows
//! (`kernels`), how rows are dealt out to ranks and which rows they exchange (`rows`), the
//! device a rank drives, the checksum the runs compare, and the examples' `main` ([`main_of`]).

pub mod kernels;
pub mod rows;

use mpi::topology::{Communicator, SimpleCommunicator};
use offload::Device;
use std::process::ExitCode;

offload::embed_images!();

/// This rank's device: GPU `node rank % GPUs` of its node, else the default device (the host
/// CPU; an error under OFFLOAD_REQUIRE_GPU=1). Collective over `world`; also returns the rank
/// on its node.
pub fn rank_device(world: &SimpleCommunicator) -> offload::Result<(Device, usize)> {
    let node_rank = world.split_shared(world.rank()).rank() as usize;
    let gpus = offload::devices().iter().filter(|d| d.is_gpu()).count();
    let device = match gpus {
        0 => offload::default_device()?,
        _ => Device::gpu(node_rank % gpus)?,
    };
    Ok((device, node_rank))
}

/// FNV-1a over `bytes` (the values' bits): equal grids, equal sums, across runs and rank counts.
pub fn checksum(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, byte| {
        (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `main` of an MPI example named `name`: initialises MPI, parses the command line with
/// `parse` (given the number of ranks; its error and `usage` are printed by rank 0, exit code
/// 2), then runs `run`. A rank whose `run` fails prints the error and aborts the job: the other
/// ranks may be waiting on it.
pub fn main_of<P>(
    name: &str,
    usage: &str,
    parse: impl FnOnce(Vec<String>, usize) -> Result<P, String>,
    run: impl FnOnce(&SimpleCommunicator, &P) -> Result<ExitCode, Box<dyn std::error::Error>>,
) -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("{name}: MPI was already initialized");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let problem = match parse(std::env::args().skip(1).collect(), world.size() as usize) {
        Ok(p) => p,
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("{name}: {e}\n{usage}");
            }
            return ExitCode::from(2);
        }
    };
    match run(&world, &problem) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: rank {}: {e}", world.rank());
            world.abort(1)
        }
    }
}

/// A command-line count, or what is wrong with it.
pub fn count(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .map_err(|e| format!("`{s}` is not a count: {e}"))
}
