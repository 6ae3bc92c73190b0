//! Device data across MPI ranks: halo exchange of [`offload::DeviceVec`] parts and all-reduce
//! of device values, the same calls on every plugin and the host backend.
//!
//! [`Comm::new`] takes an rsmpi communicator and this rank's device, and picks a
//! [`Transport`] for each pair of ranks: NCCL (libnccl opened at run time; MPI only
//! bootstraps it) between two ranks that each drive a GPU of their own through offload's CUDA
//! plugin, else device → host → MPI → host → device. [`Comm::exchange`] moves the parts a
//! [`Halo`] names; [`Comm::all_reduce_sum`] sums a vector over the ranks in place.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use mpi::topology::Communicator;
//! use offload::DeviceVec;
//! use offload_mpi::{Comm, Halo};
//! let universe = mpi::initialize().expect("MPI initialised once");
//! let world = universe.world();
//! let device = offload::default_device()?;
//! let comm = Comm::new(&world, &device)?;
//! let (rank, size) = (comm.rank(), comm.size());
//! // A ring: element 0 is a halo filled from the rank before, element 1 is sent to the next.
//! let mut v = DeviceVec::from_slice(&device, &[0.0f64, rank as f64])?;
//! let halo = Halo::new()
//!     .send((rank + 1) % size, 1..2)
//!     .receive((rank + size - 1) % size, 0..1);
//! let done = offload::scope(|s| {
//!     let stream = s.stream(&device)?;
//!     // offload's errors are the scope's; offload-mpi's are returned as its value.
//!     Ok(comm.exchange(&stream, &mut v, &halo).and_then(|()| comm.all_reduce_sum(&stream, &mut v)))
//! })?;
//! done?;
//! # Ok(())
//! # }
//! ```
//!
//! The NCCL path has not been run yet (no machine with two GPUs was available); the host path
//! is what `scripts/mpi-check` runs, with 4 ranks against 1.

mod comm;
mod element;
mod error;
mod halo;
mod host_staging;
mod nccl;
mod transport;

pub use comm::Comm;
pub use element::Element;
pub use error::{Error, Result};
pub use halo::{Halo, Part};
pub use transport::Transport;
