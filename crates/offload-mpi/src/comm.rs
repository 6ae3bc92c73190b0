//! [`Comm`]: the ranks of an MPI communicator, each with its device, and the transport chosen
//! for each pair of them.

use crate::halo::{Halo, Part};
use crate::nccl::{Message, Nccl, NcclComm};
use crate::{host_staging, Element, Error, Result, Transport};
use mpi::collective::CommunicatorCollectives;
use mpi::topology::{Color, Communicator, Rank, SimpleCommunicator};
use offload::{BackendKind, Device, DeviceVec, NativeQueue, Stream};
use std::ffi::{c_int, c_void};
use std::mem::size_of;

/// Setting it to `host` makes every rank stage through the host, on GPUs too.
const TRANSPORT_VARIABLE: &str = "OFFLOAD_MPI_TRANSPORT";

/// The ranks of an MPI communicator, each driving one device, with the path data takes between
/// each pair: [`Transport::Nccl`] where both ranks drive a GPU of their own through offload's
/// CUDA plugin and both loaded libnccl, else [`Transport::HostStaging`]. `OFFLOAD_INFO=1` prints
/// each rank's choice; `OFFLOAD_MPI_TRANSPORT=host` makes every pair stage through the host.
///
/// Every operation is collective over the ranks it involves, and, whatever the transport, is
/// done when it returns: it waits for the vector's writes queued on every stream, and kernels
/// queued on other streams keep running meanwhile (so an exchange overlaps them).
pub struct Comm {
    world: SimpleCommunicator,
    device: Device,
    /// For each rank, its rank in `nccl` when this rank and it both use NCCL.
    nccl_ranks: Vec<Option<c_int>>,
    nccl: Option<NcclComm>,
    all_reduce: Transport,
}

impl Comm {
    /// Collective over `world`: every rank calls it with the device it keeps its data on.
    /// Chooses the transports (see the type's docs); `Err` if NCCL was chosen and failed to
    /// start (another rank may then wait in NCCL: abort the job).
    pub fn new(world: &SimpleCommunicator, device: &Device) -> Result<Comm> {
        let world = world.duplicate();
        let (rank, size) = (world.rank(), world.size());
        let shared = shares_its_gpu(&world, device);
        let local = nccl_candidate(device, shared);
        let mut users = vec![0i32; size as usize];
        world.all_gather_into(&i32::from(local.is_ok()), &mut users[..]);
        let count = users.iter().filter(|&&u| u == 1).count();
        let joins = local.is_ok() && count >= 2;
        let color = if joins {
            Color::with_value(0)
        } else {
            Color::undefined()
        };
        // Collective over `world`; the ranks that join get the communicator of those that do.
        let ranks = world.split_by_color(color);
        let (nccl, reason) = match (local, ranks) {
            (Ok((library, context)), Some(ranks)) => (
                Some(NcclComm::new(library, &ranks, context)?),
                String::new(),
            ),
            (Ok(_), None) => (None, "no other rank uses NCCL".to_string()),
            (Err(reason), _) => (None, reason),
        };
        let nccl_ranks = users
            .iter()
            .scan(0, |next, &u| {
                let mine = (u == 1).then_some(*next);
                *next += u;
                Some(mine.filter(|_| nccl.is_some()))
            })
            .collect();
        let all_reduce = match nccl {
            Some(_) if count == size as usize => Transport::Nccl,
            _ => Transport::HostStaging,
        };
        let comm = Comm {
            world,
            device: device.clone(),
            nccl_ranks,
            nccl,
            all_reduce,
        };
        if offload::trace::enabled() {
            comm.print_choice(rank, &reason);
        }
        Ok(comm)
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.world.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> Rank {
        self.world.size()
    }

    /// The device this rank's data lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The path between this rank and `peer`.
    pub fn transport(&self, peer: Rank) -> Transport {
        match self.nccl_ranks.get(peer as usize) {
            Some(Some(_)) if peer != self.rank() => Transport::Nccl,
            _ => Transport::HostStaging,
        }
    }

    /// The path of [`Comm::all_reduce_sum`]: NCCL only when every rank uses it.
    pub fn all_reduce_transport(&self) -> Transport {
        self.all_reduce
    }

    /// Sends the parts `halo` names for sending to their peers and overwrites the parts it names
    /// for receiving with what the peers send (see [`Halo`]); every rank of a pair calls it.
    /// Through NCCL the transfers are queued on `stream` (a stream of the comm's device) and
    /// waited for; through the host they are copies and MPI messages.
    ///
    /// The parts sent are read after the vector's writes queued on any stream. The parts
    /// received must not be in use by kernels still running on other streams (the vector's
    /// other elements may be: an interior sweep overlaps the exchange of its halos).
    /// `Err(InvalidArgument)`, with nothing sent, for a part outside the vector, a peer that is
    /// no other rank, a received part overlapping another part, or a stream or vector on
    /// another device. The peer's matching part must have the same length (MPI aborts the job
    /// otherwise, NCCL's result is undefined).
    pub fn exchange<T: Element>(
        &self,
        stream: &Stream<'_>,
        vec: &mut DeviceVec<T>,
        halo: &Halo,
    ) -> Result<()> {
        const WHAT: &str = "offload_mpi::Comm::exchange";
        self.check_devices(WHAT, stream, vec)?;
        halo.check(vec.len(), self.rank(), self.size())?;
        let by_nccl = |part: &&Part| self.transport(part.peer) == Transport::Nccl;
        let (nccl_sends, host_sends): (Vec<&Part>, Vec<&Part>) =
            halo.sends().iter().partition(by_nccl);
        let (nccl_receives, host_receives): (Vec<&Part>, Vec<&Part>) =
            halo.receives().iter().partition(by_nccl);
        if let Some(nccl) = self.nccl.as_ref() {
            if !nccl_sends.is_empty() || !nccl_receives.is_empty() {
                let queue = cuda_stream(WHAT, stream)?;
                wait_for_uses(vec, false)?;
                let base = vec.device_ptr_mut();
                let messages = |parts: &[&Part]| -> Vec<Message> {
                    parts
                        .iter()
                        .filter(|p| !p.range.is_empty())
                        .map(|p| Message {
                            peer: self.nccl_ranks[p.peer as usize].expect("an NCCL peer"),
                            addr: base + (p.range.start * size_of::<T>()) as u64,
                            count: p.range.len(),
                        })
                        .collect()
                };
                let (sends, receives) = (messages(&nccl_sends), messages(&nccl_receives));
                // SAFETY: the parts lie within `vec` (checked), which is borrowed until the
                // stream has run the group (synchronized below); the stream is a CUDA stream
                // of the vector's device (checked).
                unsafe { nccl.exchange(queue, T::NCCL_TYPE, &sends, &receives)? };
                stream.synchronize()?;
            }
        }
        host_staging::exchange(&self.world, vec, &host_sends, &host_receives)
    }

    /// Replaces each element of `vec` by its sum over all ranks (every rank calls it, with a
    /// vector of the same length). Through NCCL on `stream`, in place on the device; else
    /// through the host. Ordered after the vector's uses on every stream. A sum of one non-zero
    /// value and zeros is that value exactly, whichever order the ranks are added in, so
    /// partial results kept in separate elements (one per part of the domain) can be summed
    /// afterwards in a fixed order: results independent of the number of ranks.
    pub fn all_reduce_sum<T: Element>(
        &self,
        stream: &Stream<'_>,
        vec: &mut DeviceVec<T>,
    ) -> Result<()> {
        const WHAT: &str = "offload_mpi::Comm::all_reduce_sum";
        self.check_devices(WHAT, stream, vec)?;
        if self.size() == 1 || vec.is_empty() {
            return Ok(());
        }
        match (&self.nccl, self.all_reduce) {
            (Some(nccl), Transport::Nccl) => {
                let queue = cuda_stream(WHAT, stream)?;
                wait_for_uses(vec, true)?;
                let (addr, count) = (vec.device_ptr_mut(), vec.len());
                // SAFETY: `vec` holds `count` elements and is borrowed until the stream has run
                // the sum (synchronized below); the stream is of the vector's device.
                unsafe { nccl.all_reduce_sum(queue, T::NCCL_TYPE, addr, count)? };
                Ok(stream.synchronize()?)
            }
            _ => host_staging::all_reduce_sum(&self.world, vec),
        }
    }

    fn check_devices<T: Element>(
        &self,
        what: &'static str,
        stream: &Stream<'_>,
        vec: &DeviceVec<T>,
    ) -> Result<()> {
        let same =
            |d: &Device| d.kind() == self.device.kind() && d.ordinal() == self.device.ordinal();
        if same(stream.device()) && same(vec.device()) {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            what,
            reason: format!(
                "the stream is on {} and the vector on {}, the comm's device is {}",
                stream.device().name(),
                vec.device().name(),
                self.device.name()
            ),
        })
    }

    /// One line to stderr (`OFFLOAD_INFO`): this rank's device and the transport to each peer.
    fn print_choice(&self, rank: Rank, reason: &str) {
        let mut peers = String::new();
        for peer in (0..self.size()).filter(|&p| p != rank) {
            peers += &format!(" {peer}:{}", self.transport(peer));
        }
        let nccl = match &self.nccl {
            Some(nccl) => {
                let library = nccl.library();
                format!("NCCL {} from {}", library.version(), library.origin)
            }
            None => format!("no NCCL: {reason}"),
        };
        eprintln!(
            "offload-mpi: rank {rank} on {}: {nccl}; peers{peers}; all-reduce by {}",
            self.device.name(),
            self.all_reduce
        );
    }
}

/// Whether `device` is a CUDA GPU that another rank of this node uses too (NCCL refuses a GPU
/// twice in one communicator). Collective over `world`.
fn shares_its_gpu(world: &SimpleCommunicator, device: &Device) -> bool {
    let node = world.split_shared(world.rank());
    let gpu = match device.kind() {
        BackendKind::Cuda => device.ordinal() as u64,
        _ => u64::MAX,
    };
    let mut gpus = vec![0u64; node.size() as usize];
    node.all_gather_into(&gpu, &mut gpus[..]);
    gpu != u64::MAX && gpus.iter().filter(|&&g| g == gpu).count() > 1
}

/// libnccl and the device's CUDA context if this rank can use NCCL, else why not.
fn nccl_candidate(
    device: &Device,
    shared: bool,
) -> std::result::Result<(Nccl, *mut c_void), String> {
    if std::env::var(TRANSPORT_VARIABLE).is_ok_and(|v| v == "host") {
        return Err(format!("{TRANSPORT_VARIABLE}=host"));
    }
    let native = offload::scope(|s| Ok(s.stream(device)?.native_queue()));
    let Ok(Some(NativeQueue::Cuda { context, .. })) = native else {
        return Err(format!(
            "{} is not a GPU of offload's CUDA plugin",
            device.name()
        ));
    };
    if shared {
        return Err(format!(
            "another rank of this node uses {} too",
            device.name()
        ));
    }
    Ok((Nccl::load()?, context))
}

/// The `CUstream` of `stream`.
fn cuda_stream(what: &'static str, stream: &Stream<'_>) -> Result<*mut c_void> {
    match stream.native_queue() {
        Some(NativeQueue::Cuda { stream, .. }) => Ok(stream),
        _ => Err(Error::InvalidArgument {
            what,
            reason: "NCCL needs a stream of offload's CUDA plugin".to_string(),
        }),
    }
}

/// Returns once the work queued on any stream that uses `vec` in a way conflicting with a read
/// (`write`: with a write) has run, by copying one element to the host (and back): offload's
/// ordering of DeviceVec uses across streams has no public entry for work queued by a library.
fn wait_for_uses<T: Element>(vec: &mut DeviceVec<T>, write: bool) -> Result<()> {
    // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
    let mut first = [unsafe { std::mem::zeroed::<T>() }];
    if vec.is_empty() {
        return Ok(());
    }
    vec.copy_to_host_at(0, &mut first)?;
    if write {
        vec.copy_from_host_at(0, &first)?;
    }
    Ok(())
}
