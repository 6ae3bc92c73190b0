//! Devices: one per device of a plugin (GPUs, then the host CPU), discovered once. A `Device` is
//! the runtime's handle of a plugin's device, with what the layers above keep for it: the code it
//! has loaded (`loaded`) and its launch lock.
//!
//! `OFFLOAD_BACKEND=host|cuda|liboffload|opencl` forces a backend for the default device (and,
//! for a GPU two plugins drive, which one lists it; `opencl` also offers OpenCL CPU runtimes); `OFFLOAD_REQUIRE_GPU=1` turns every fallback to
//! the host into an error.

use crate::mapping::bounce::{Bounce, BouncePool};
use crate::mapping::kernel::Kernel;
use crate::mapping::loaded::{Entry, Loaded};
use crate::plugins::{self, Backend, BackendKind, Limits, MemoryInfo, Platform};
use crate::{Error, Result};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// A place kernels run: a GPU, or the host CPU, each behind its plugin.
#[derive(Clone)]
pub struct Device {
    shared: Arc<Shared>,
}

/// One device, shared by the clones of its handle.
struct Shared {
    backend: Arc<dyn Backend>,
    loaded: Loaded,
    /// See [`Device::launch_lock`].
    launches: Mutex<()>,
    /// Page-locked buffers for the small copies of plain launches.
    bounce: BouncePool,
}

impl Device {
    fn new(backend: Arc<dyn Backend>) -> Device {
        Device {
            shared: Arc::new(Shared {
                backend,
                loaded: Loaded::default(),
                launches: Mutex::new(()),
                bounce: BouncePool::default(),
            }),
        }
    }

    /// The host CPU, which runs every kernel's host build.
    pub fn host() -> Device {
        devices()
            .iter()
            .find(|d| d.kind() == BackendKind::Host)
            .expect("the host device is always listed")
            .clone()
    }

    /// The device at `index` in [`devices()`] (GPUs first, the host last): how `offload!`'s
    /// `device = N` names one. Out of range is `Error::NoDevice` listing the devices there are.
    pub fn by_index(index: usize) -> Result<Device> {
        let all = devices();
        all.get(index).cloned().ok_or_else(|| {
            let names: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{i}: {}", d.name()))
                .collect();
            let plural = if all.len() == 1 { "" } else { "s" };
            Error::NoDevice(format!(
                "device index {index} is out of range: {} device{plural} ({})",
                all.len(),
                names.join(", ")
            ))
        })
    }

    /// The GPU at `index` among the GPUs (in driver order: `gpu(0)` is CUDA device 0). Out of
    /// range is `Error::NoDevice` naming how many GPUs there are.
    pub fn gpu(index: usize) -> Result<Device> {
        let gpus: Vec<&Device> = devices().iter().filter(|d| d.is_gpu()).collect();
        gpus.get(index).map(|d| (*d).clone()).ok_or_else(|| {
            let why = match &discovery().no_gpu_reason {
                Some(reason) => format!(" ({reason})"),
                None => String::new(),
            };
            let plural = if gpus.len() == 1 { "" } else { "s" };
            Error::NoDevice(format!(
                "GPU index {index} is out of range: this machine has {} GPU{plural}{why}",
                gpus.len()
            ))
        })
    }

    /// The name users see (`NVIDIA H200 (CUDA device 0, sm_90)`), unique in the process.
    pub fn name(&self) -> &str {
        self.backend().name()
    }

    /// The plugin that drives it.
    pub fn kind(&self) -> BackendKind {
        self.backend().kind()
    }

    /// What kind of processor it is (an NVIDIA or AMD GPU, the host), whichever plugin drives it.
    pub fn platform(&self) -> Platform {
        self.backend().platform()
    }

    /// Index among the devices of its backend (0 for the host).
    pub fn ordinal(&self) -> usize {
        self.backend().ordinal()
    }

    /// Whether it is a GPU (any device but the host CPU).
    pub fn is_gpu(&self) -> bool {
        self.kind() != BackendKind::Host
    }

    /// Free and total memory of a GPU, as its driver reports them now; `None` for the host, whose
    /// kernels use the process's own memory. Memory the CUDA plugin freed but keeps for reuse
    /// counts as used (it goes back before an allocation would fail, and at [`Device::release`]).
    pub fn memory_info(&self) -> Option<Result<MemoryInfo>> {
        let backend = self.backend();
        (!backend.memory_is_host()).then(|| backend.memory_info())
    }

    /// Gives the device's resources back: waits for its queued work, unloads the kernel images
    /// and frees what the runtime holds for them. Every later launch or allocation on it, through
    /// any clone of this `Device`, is `Err(Error::Released)`; buffers allocated before can still
    /// be dropped. Releasing the host device makes host launches fail too (the host fallback
    /// included). There is no way back within the process.
    pub fn release(&self) -> Result<()> {
        // No launch is between its start and its panic check while this is held.
        let _launches = self.launch_lock();
        let released = self.backend().release();
        self.shared.loaded.clear();
        released
    }

    /// What the device accepts as a launch: block and grid extents, shared memory, and its size
    /// (multiprocessors), for choosing launch shapes.
    pub fn limits(&self) -> Limits {
        self.backend().limits()
    }

    /// Identifies the device within the process (devices live as long as the process).
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    /// The device with this [`Device::id`], listed or reachable through [`devices_of`].
    pub(crate) fn by_id(id: usize) -> Option<Device> {
        let found = discovery();
        found
            .devices
            .iter()
            .chain(&found.alternates)
            .find(|d| d.id() == id)
            .cloned()
    }

    /// A device on a plugin that is not listed (the tests' mock GPU).
    #[cfg(test)]
    pub(crate) fn unlisted(backend: Arc<dyn Backend>) -> Device {
        Device::new(backend)
    }

    /// The device's own queue (where plain launches, `DeviceVec` copies and data regions run).
    pub(crate) fn queue(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    /// The plugin's device.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.shared.backend
    }

    /// Whether the device's memory is the host's (the host CPU): host data is used in place.
    pub(crate) fn memory_is_host(&self) -> bool {
        self.backend().memory_is_host()
    }

    /// The entry of `kernel` on this device, its code loaded on first use.
    pub(crate) fn entry(&self, kernel: &'static Kernel) -> Result<Entry> {
        self.shared.loaded.entry(&self.shared.backend, kernel)
    }

    /// How many blocks of `entry`, of `threads` threads and `dynamic_shared` bytes each, one of
    /// the device's multiprocessors runs at once; `None` where its driver cannot say.
    pub(crate) fn resident_blocks(
        &self,
        entry: &Entry,
        threads: u32,
        dynamic_shared: u32,
    ) -> Result<Option<u32>> {
        self.shared
            .backend
            .resident_blocks(entry.handle, threads, dynamic_shared)
    }

    /// The generation of the code loaded on the device (see `crate::api::prepared`).
    pub(crate) fn code_generation(&self) -> u64 {
        self.shared.loaded.generation()
    }

    /// A bounce buffer for one launch's small copies (see `bounce`).
    pub(crate) fn bounce(&self) -> Bounce<'_> {
        self.shared.bounce.launch(&self.shared.backend)
    }

    /// Held from a launch until its panic record was read, when its image has one, so that when
    /// several host threads launch on one device a panic is reported to the launch that caused
    /// it (one record per image). One lock for all queues of the device: streams take it to read
    /// panic records, and `release` to wait for launches in flight.
    pub(crate) fn launch_lock(&self) -> MutexGuard<'_, ()> {
        self.shared
            .launches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({:?}: {})", self.kind(), self.name())
    }
}

struct Discovery {
    devices: Vec<Device>,
    /// The handles of listed GPUs through their other plugins (see [`devices_of`]).
    alternates: Vec<Device>,
    /// Why no GPU was found, when none was.
    no_gpu_reason: Option<String>,
    /// For each GPU plugin that found no device, why.
    plugin_reasons: Vec<String>,
}

fn discovery() -> &'static Discovery {
    static DISCOVERY: OnceLock<Discovery> = OnceLock::new();
    DISCOVERY.get_or_init(|| {
        let forced = forced_backend();
        let host_only = forced.as_deref() == Some("host");
        let found = plugins::discover_all(!host_only, forced.as_deref().and_then(plugin_named));
        let devices: Vec<Device> = found.listed.into_iter().map(Device::new).collect();
        let alternates = found.alternates.into_iter().map(Device::new).collect();
        let no_gpu_reason = if host_only {
            Some("OFFLOAD_BACKEND=host".to_string())
        } else if !devices.iter().any(Device::is_gpu) {
            Some(found.reasons.join("; "))
        } else {
            None
        };
        if let Some(reason) = &no_gpu_reason {
            tracing::info!("offload: no GPU ({reason}); kernels run on the host");
        }
        Discovery {
            devices,
            alternates,
            no_gpu_reason,
            plugin_reasons: found.reasons,
        }
    })
}

/// Every device, GPUs first (by plugin, in driver order), the host last. Each GPU is listed
/// once, through its preferred plugin: the CUDA plugin for NVIDIA GPUs (liboffload with
/// `OFFLOAD_BACKEND=liboffload`), liboffload for AMD GPUs; so code that splits work over all
/// GPUs counts each once. Discovered once.
pub fn devices() -> &'static [Device] {
    &discovery().devices
}

/// For each GPU plugin that found no device, why (`"CUDA: cannot load libcuda.so: …"`): what
/// `cargo offload devices` prints. Empty when every plugin found a device, and with
/// `OFFLOAD_BACKEND=host`, which asks no GPU plugin.
pub fn plugins_without_devices() -> &'static [String] {
    &discovery().plugin_reasons
}

/// Every device `plugin` drives, in its order, whether [`devices()`] lists it or lists the same
/// GPU through another plugin: how to reach a GPU through a plugin of your choosing (its
/// [`Device::name`] says which plugin drives it). Several plugins may return the same GPU.
pub fn devices_of(plugin: BackendKind) -> Vec<Device> {
    let found = discovery();
    found
        .devices
        .iter()
        .chain(&found.alternates)
        .filter(|d| d.kind() == plugin)
        .cloned()
        .collect()
}

fn forced_backend() -> Option<String> {
    std::env::var("OFFLOAD_BACKEND")
        .ok()
        .map(|s| s.to_ascii_lowercase())
        .filter(|s| !s.is_empty() && s != "auto")
}

/// The GPU plugin an `OFFLOAD_BACKEND` value names.
fn plugin_named(name: &str) -> Option<BackendKind> {
    match name {
        "cuda" => Some(BackendKind::Cuda),
        "liboffload" => Some(BackendKind::LibOffload),
        "opencl" => Some(BackendKind::OpenCl),
        _ => None,
    }
}

fn gpu_required() -> bool {
    std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The device launches use when none is named: the first GPU, else the host (or what
/// `OFFLOAD_BACKEND` forces). With `OFFLOAD_REQUIRE_GPU=1`, the host is an error.
pub fn default_device() -> Result<Device> {
    let found = discovery();
    let first_gpu = found.devices.iter().find(|d| d.is_gpu());
    let no_gpu = || {
        found
            .no_gpu_reason
            .clone()
            .unwrap_or_else(|| "no GPU found".to_string())
    };
    let device = match forced_backend().as_deref() {
        None => first_gpu.cloned().unwrap_or_else(Device::host),
        Some("host") => Device::host(),
        Some(name) => match plugin_named(name) {
            Some(plugin) => found
                .devices
                .iter()
                .find(|d| d.kind() == plugin)
                .cloned()
                .ok_or_else(|| {
                    let why = match first_gpu {
                        Some(_) => format!(
                            "it drives none of the GPUs found ({})",
                            found.plugin_reasons.join("; ")
                        ),
                        None => no_gpu(),
                    };
                    Error::NoDevice(format!("OFFLOAD_BACKEND={name}, but {why}"))
                })?,
            None => {
                return Err(Error::NoDevice(format!(
                    "OFFLOAD_BACKEND={name} is not a backend (use host, cuda, liboffload, opencl or auto)"
                )))
            }
        },
    };
    if gpu_required() && !device.is_gpu() {
        return Err(Error::NoDevice(format!(
            "OFFLOAD_REQUIRE_GPU=1, but {}",
            no_gpu()
        )));
    }
    Ok(device)
}

/// The device a launch of `kernel` runs on: the named one, else the default one, falling back to
/// the host when the default GPU has no image of the kernel (no device toolchain at build time),
/// unless a GPU was required.
pub(crate) fn resolve_device(kernel: &Kernel, named: Option<&Device>) -> Result<Device> {
    if let Some(device) = named {
        return Ok(device.clone());
    }
    let device = default_device()?;
    if device.is_gpu() && !kernel.images.has_kernel(kernel.name) {
        let reason = kernel
            .images
            .unavailable
            .unwrap_or("the device images do not hold it");
        if gpu_required() || forced_backend().is_some() {
            return Err(Error::NoImage {
                kernel: kernel.name,
                device: device.name().to_string(),
                reason: reason.to_string(),
            });
        }
        tracing::warn!(
            "offload: kernel `{}` has no device image ({reason}); running it on the host",
            kernel.name
        );
        return Ok(Device::host());
    }
    Ok(device)
}

/// `Err(WrongDevice)` unless data resident on the device with id `resident_on` is on `device`,
/// where `kernel` (or the named operation) uses it.
#[inline]
pub(crate) fn check_resident(
    kernel: &'static str,
    device: &Device,
    resident_on: usize,
) -> Result<()> {
    if resident_on == device.id() {
        return Ok(());
    }
    Err(wrong_device(kernel, device, resident_on))
}

/// `check_resident`'s error, apart: the launch path asks only for the device's id.
#[cold]
fn wrong_device(kernel: &'static str, device: &Device, resident_on: usize) -> Error {
    Error::WrongDevice {
        kernel,
        device: device.name().to_string(),
        resident_on: Device::by_id(resident_on)
            .map_or("another device".to_string(), |d| d.name().to_string()),
    }
}
