//! What the MPI examples share: the kernels that sweep and solve one rank's block of rows
//! (`kernels`), how rows are dealt out to ranks and which rows they exchange (`rows`), the
//! device a rank drives, and the checksum the runs compare.

pub mod kernels;
pub mod rows;

use mpi::topology::{Communicator, SimpleCommunicator};
use offload::Device;

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
