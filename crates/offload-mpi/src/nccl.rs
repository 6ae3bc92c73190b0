//! NCCL, opened at run time (as offload's CUDA plugin opens the driver): the library, found
//! through `OFFLOAD_NCCL`, the dynamic loader's search path, or the `nvidia-nccl` Python wheel;
//! a communicator over the ranks that use it; point-to-point parts and in-place sums queued on
//! a CUDA stream.
//!
//! Not yet run: no machine with two GPUs was available when this was written. It builds, and
//! its calls follow nccl.h (2.x); see docs/guide/platforms.md.

use crate::{Error, Result};
use libloading::Library;
use mpi::collective::Root;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;

/// `ncclUniqueId`: the bytes rank 0 makes and every rank of the communicator passes in.
#[repr(C)]
#[derive(Clone, Copy)]
struct UniqueId {
    internal: [c_char; 128],
}

/// `ncclComm_t`.
type RawComm = *mut c_void;
/// `ncclSum` of `ncclRedOp_t`.
const SUM: c_int = 0;
/// `ncclSuccess` of `ncclResult_t`.
const SUCCESS: c_int = 0;
/// `CUDA_SUCCESS`.
const CUDA_SUCCESS: c_int = 0;

/// The functions used, from libnccl (and `cuCtxSetCurrent` from the driver, already loaded by
/// offload's CUDA plugin).
pub(crate) struct Nccl {
    get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> c_int,
    comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> c_int,
    comm_destroy: unsafe extern "C" fn(RawComm) -> c_int,
    group_start: unsafe extern "C" fn() -> c_int,
    group_end: unsafe extern "C" fn() -> c_int,
    #[allow(clippy::type_complexity)]
    send: unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, *mut c_void) -> c_int,
    #[allow(clippy::type_complexity)]
    recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, *mut c_void) -> c_int,
    #[allow(clippy::type_complexity)]
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        RawComm,
        *mut c_void,
    ) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    ctx_set_current: unsafe extern "C" fn(*mut c_void) -> c_int,
    /// Where libnccl was found, for `OFFLOAD_INFO`.
    pub(crate) origin: String,
    _nccl: Library,
    _driver: Library,
}

impl Nccl {
    /// libnccl from `OFFLOAD_NCCL` (a file) if set, else `libnccl.so.2` on the loader's path,
    /// else the one in the `nvidia-nccl-cu*` wheel of `python3`; the reason when none loads.
    pub(crate) fn load() -> std::result::Result<Nccl, String> {
        match std::env::var_os("OFFLOAD_NCCL") {
            Some(path) => Self::load_first(vec![path.into()]),
            None => Self::load_first(
                std::iter::once(PathBuf::from("libnccl.so.2"))
                    .chain(python_wheel())
                    .collect(),
            ),
        }
    }

    /// The first of `candidates` that loads, with its functions.
    fn load_first(candidates: Vec<PathBuf>) -> std::result::Result<Nccl, String> {
        let mut failures = Vec::new();
        for path in candidates {
            // SAFETY: libnccl's initialisers are the vendor's; loading it runs nothing else.
            match unsafe { Library::new(&path) } {
                Ok(library) => return Self::bind(library, path.display().to_string()),
                Err(e) => failures.push(format!("{}: {e}", path.display())),
            }
        }
        Err(format!("libnccl not loaded ({})", failures.join("; ")))
    }

    fn bind(nccl: Library, origin: String) -> std::result::Result<Nccl, String> {
        // SAFETY: loading the driver runs its initialisers only (the CUDA plugin loaded it).
        let driver = unsafe { Library::new("libcuda.so.1") }.map_err(|e| e.to_string())?;
        macro_rules! symbol {
            ($library:expr, $name:literal) => {
                // SAFETY: the symbol's type is its declaration in nccl.h (cuda.h for the
                // driver's), and the library outlives the copy (both are kept in `Nccl`).
                *unsafe { $library.get($name) }.map_err(|e| format!("{origin}: {e}"))?
            };
        }
        Ok(Nccl {
            get_version: symbol!(nccl, "ncclGetVersion"),
            get_unique_id: symbol!(nccl, "ncclGetUniqueId"),
            comm_init_rank: symbol!(nccl, "ncclCommInitRank"),
            comm_destroy: symbol!(nccl, "ncclCommDestroy"),
            group_start: symbol!(nccl, "ncclGroupStart"),
            group_end: symbol!(nccl, "ncclGroupEnd"),
            send: symbol!(nccl, "ncclSend"),
            recv: symbol!(nccl, "ncclRecv"),
            all_reduce: symbol!(nccl, "ncclAllReduce"),
            error_string: symbol!(nccl, "ncclGetErrorString"),
            ctx_set_current: symbol!(driver, "cuCtxSetCurrent"),
            origin,
            _nccl: nccl,
            _driver: driver,
        })
    }

    /// NCCL's version, as `major.minor.patch`.
    pub(crate) fn version(&self) -> String {
        let mut code = 0;
        // SAFETY: writes one int.
        if unsafe { (self.get_version)(&mut code) } != SUCCESS {
            return "of unknown version".to_string();
        }
        format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
    }

    fn check(&self, call: &'static str, result: c_int) -> Result<()> {
        if result == SUCCESS {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static string for any code.
        let message = unsafe { CStr::from_ptr((self.error_string)(result)) };
        Err(Error::Nccl {
            call,
            message: format!("{} (code {result})", message.to_string_lossy()),
        })
    }

    /// Makes `context` current on the calling thread: NCCL works on the current device.
    fn make_current(&self, context: *mut c_void) -> Result<()> {
        // SAFETY: `context` is the primary context of a device offload's CUDA plugin drives.
        let result = unsafe { (self.ctx_set_current)(context) };
        if result == CUDA_SUCCESS {
            return Ok(());
        }
        Err(Error::Nccl {
            call: "cuCtxSetCurrent",
            message: format!("CUDA error {result}"),
        })
    }
}

/// The directory of `python3`'s `nvidia.nccl` package, if it has one: where pip's
/// `nvidia-nccl-cu12`/`-cu13` wheels put `lib/libnccl.so.2`.
fn python_wheel() -> Option<PathBuf> {
    let script = "import nvidia.nccl as m; print(list(m.__path__)[0])";
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !dir.trim().is_empty())
        .then(|| PathBuf::from(dir.trim()).join("lib/libnccl.so.2"))
}

/// An NCCL communicator over the ranks that use NCCL, on the device whose primary context is
/// `context`.
pub(crate) struct NcclComm {
    nccl: Nccl,
    comm: RawComm,
    context: *mut c_void,
}

/// A part of a point-to-point group: `count` elements at device address `addr`, to or from
/// NCCL rank `peer`.
pub(crate) struct Message {
    pub(crate) peer: c_int,
    pub(crate) addr: u64,
    pub(crate) count: usize,
}

impl NcclComm {
    /// Collective over `ranks`: rank 0 makes the id, MPI broadcasts it, every rank joins.
    pub(crate) fn new(
        nccl: Nccl,
        ranks: &SimpleCommunicator,
        context: *mut c_void,
    ) -> Result<NcclComm> {
        nccl.make_current(context)?;
        let mut id = UniqueId { internal: [0; 128] };
        if ranks.rank() == 0 {
            // SAFETY: writes one ncclUniqueId.
            nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })?;
        }
        let mut bytes = id.internal.map(|c| c as u8);
        ranks.process_at_rank(0).broadcast_into(&mut bytes[..]);
        id.internal = bytes.map(|b| b as c_char);
        let mut comm: RawComm = std::ptr::null_mut();
        // SAFETY: writes one communicator handle; the id is the one rank 0 made.
        let joined = unsafe { (nccl.comm_init_rank)(&mut comm, ranks.size(), id, ranks.rank()) };
        nccl.check("ncclCommInitRank", joined)?;
        Ok(NcclComm {
            nccl,
            comm,
            context,
        })
    }

    pub(crate) fn library(&self) -> &Nccl {
        &self.nccl
    }

    /// Queues `sends` and `receives` of `element_type` on `stream` as one group.
    ///
    /// # Safety
    /// Each message's `count` elements at `addr` are device memory of this communicator's device
    /// that stays allocated until the stream has run the group; `stream` is a CUDA stream of
    /// that device.
    pub(crate) unsafe fn exchange(
        &self,
        stream: *mut c_void,
        element_type: c_int,
        sends: &[Message],
        receives: &[Message],
    ) -> Result<()> {
        self.nccl.make_current(self.context)?;
        // SAFETY: no argument.
        let started = unsafe { (self.nccl.group_start)() };
        self.nccl.check("ncclGroupStart", started)?;
        let mut queued = Ok(());
        for m in sends {
            // SAFETY: per the contract.
            let r = unsafe {
                (self.nccl.send)(
                    m.addr as *const c_void,
                    m.count,
                    element_type,
                    m.peer,
                    self.comm,
                    stream,
                )
            };
            queued = queued.and(self.nccl.check("ncclSend", r));
        }
        for m in receives {
            // SAFETY: per the contract.
            let r = unsafe {
                (self.nccl.recv)(
                    m.addr as *mut c_void,
                    m.count,
                    element_type,
                    m.peer,
                    self.comm,
                    stream,
                )
            };
            queued = queued.and(self.nccl.check("ncclRecv", r));
        }
        // The group is closed whatever failed in it.
        // SAFETY: no argument.
        let ended = unsafe { (self.nccl.group_end)() };
        queued.and(self.nccl.check("ncclGroupEnd", ended))
    }

    /// Queues an in-place sum of `count` elements at `addr` over all ranks on `stream`.
    ///
    /// # Safety
    /// As [`NcclComm::exchange`], for the one buffer.
    pub(crate) unsafe fn all_reduce_sum(
        &self,
        stream: *mut c_void,
        element_type: c_int,
        addr: u64,
        count: usize,
    ) -> Result<()> {
        self.nccl.make_current(self.context)?;
        let buffer = addr as *mut c_void;
        // SAFETY: per the contract; NCCL allows the send and receive buffers to be the same.
        let r = unsafe {
            (self.nccl.all_reduce)(buffer, buffer, count, element_type, SUM, self.comm, stream)
        };
        self.nccl.check("ncclAllReduce", r)
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // Finishes the operations still queued, then frees the communicator's resources.
        // SAFETY: the handle came from ncclCommInitRank and is destroyed once.
        let _ = unsafe { (self.nccl.comm_destroy)(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_that_does_not_load_is_named_in_the_reason() {
        let missing = PathBuf::from("/nonexistent/libnccl.so.2");
        let Err(reason) = Nccl::load_first(vec![missing.clone(), missing]) else {
            panic!("a missing file loaded");
        };
        assert!(reason.starts_with("libnccl not loaded (/nonexistent/libnccl.so.2: "));
        assert_eq!(reason.matches("/nonexistent/libnccl.so.2").count(), 2);
    }
}
