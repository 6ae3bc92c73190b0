//! How data moves between two ranks.

use std::fmt;

/// The path chosen for a pair of ranks (and for the all-reduce, which needs one path for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Device to device through NCCL, queued on the caller's CUDA stream: both ranks drive a
    /// GPU of their own through offload's CUDA plugin and both loaded libnccl.
    Nccl,
    /// Device → host, MPI, host → device (`DeviceVec::copy_to_host_at`, rsmpi,
    /// `copy_from_host_at`): every other case, any plugin and the host backend.
    HostStaging,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Nccl => "NCCL",
            Transport::HostStaging => "host staging",
        })
    }
}
