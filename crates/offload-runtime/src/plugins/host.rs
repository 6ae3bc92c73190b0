//! The host CPU plugin. Its memory is host memory ([`Backend::memory_is_host`]), so the layer
//! above hands kernels host data in place; its code is each kernel's host build ([`Code::Host`]),
//! of which one call runs one GPU thread. A launch runs the grid before it returns: blocks in
//! parallel on rayon's pool, the threads of a block as coroutines (`scheduler`) so that barriers,
//! warp operations and per-block shared memory behave as on a GPU. A kernel whose threads never
//! wait for one another comes with a build that runs a range of threads: its launch gives each
//! worker contiguous ranges of thread ids instead, with no coroutine and no per-block setup
//! (grid-stride views give consecutive threads consecutive elements, so each worker walks
//! contiguous memory). Where the launch can put its outputs back (`launch_restartable`), each
//! range runs as one call of the kernel's body, whose ownership loops then walk the range's
//! elements as one loop, and name the runs of output elements they are about to write: the task
//! saves those first, in cache, instead of a copy of the whole outputs before the launch. A
//! kernel that turns out to read per-thread ids, or to reach an output without naming its
//! elements (raw pointers, `at`), has its outputs put back and runs again, one thread per call
//! or after a copy of the whole outputs, as its later launches do. A panicking thread makes the
//! launch fail with the panic's message. Warps have 32 lanes, or 64 (AMD's CDNA wavefronts) under
//! `OFFLOAD_HOST_WARP_SIZE=64`, read at each launch, so warp code is tested at both widths without
//! an AMD GPU.

pub mod scheduler;
mod stack_overflow;
#[cfg(all(test, target_os = "linux", not(miri)))]
mod stack_overflow_tests;

use crate::plugins::code::{Code, EntryHandle, HostThread, HostThreads, ImageHandle};
use crate::plugins::interface::{
    Backend, BackendKind, DevicePtr, MemoryInfo, NativeQueue, Platform, QueueEvent, SavedOutputs,
};
use crate::plugins::limits::{EntryLimits, Limits, Shape};
use crate::plugins::packed::PackedArgs;
use crate::{Error, Result};
use offload_kernel::host_block::NeedsBlockModel;
use offload_kernel::host_context::{
    with_output_saving, NeedsThreadIds, NeedsWholeBackup, ThreadRange,
};
use offload_kernel::Dim3;
use rayon::prelude::*;
use std::alloc::{alloc, dealloc, Layout};
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Threads of a kernel without the block model per task on rayon's pool: enough that a task's
/// cost is its threads', few enough that the workers share the grid evenly and that a task's
/// elements of a few arrays stay in the core's cache between the loops of one kernel body.
/// (Few under Miri, so that its tests still run several tasks of a small grid.)
pub(crate) const THREADS_PER_TASK: u64 = if cfg!(miri) { 1 << 6 } else { 1 << 12 };

/// Alignment of `alloc`'s memory, as CUDA's.
const ALLOC_ALIGN: usize = 256;
/// Alignment of `alloc_pinned`'s memory: a page.
const PAGE: usize = 4096;

/// The host CPU, always there.
pub fn discover() -> std::result::Result<Vec<Arc<dyn Backend>>, String> {
    Ok(vec![Arc::new(HostBackend::new())])
}

/// A loaded host build: the kernel's name, its one-thread build, and its build for ranges of
/// threads where the kernel's threads never wait for one another.
#[derive(Clone)]
struct HostEntry {
    name: &'static str,
    thread: HostThread,
    threads: Option<HostThreads>,
    /// Whether `threads` is known to fit the kernel (its PTX shows no barrier, warp operation or
    /// shared memory); else it is tried where the launch can run again (see `run`).
    independent: bool,
    /// Set once a launch found that the kernel needs the block model (`NeedsBlockModel`): later
    /// launches go to the scheduler at once.
    needs_block_model: Arc<AtomicBool>,
    /// Set once a launch found that the kernel reads per-thread ids, so that a range of its
    /// threads cannot run as one call (`NeedsThreadIds`): later launches run one per call.
    reads_thread_ids: Arc<AtomicBool>,
    /// Set once a launch found that the kernel reaches an output without naming the elements
    /// it writes (`NeedsWholeBackup`): later launches save the outputs whole first.
    reaches_outputs_unnamed: Arc<AtomicBool>,
}

/// The host device, or one queue of it: all queues share the device.
pub struct HostBackend {
    device: Arc<HostDevice>,
}

struct HostDevice {
    name: String,
    /// Set by `release`: the host device then refuses everything, like a released GPU.
    released: AtomicBool,
    /// The loaded host builds, by handle: an image and its one entry share their index.
    entries: RwLock<Vec<HostEntry>>,
    /// The layouts of live allocations, by address.
    allocations: Mutex<HashMap<u64, Layout>>,
}

impl HostBackend {
    pub(crate) fn new() -> Self {
        HostBackend {
            device: Arc::new(HostDevice {
                name: format!("host CPU ({} threads)", rayon::current_num_threads()),
                released: AtomicBool::new(false),
                entries: RwLock::new(Vec::new()),
                allocations: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// `Err(Released)` once `release` was called.
    fn check_live(&self) -> Result<()> {
        if self.device.released.load(Ordering::Acquire) {
            return Err(self.released());
        }
        Ok(())
    }

    fn released(&self) -> Error {
        Error::Released {
            device: self.device.name.clone(),
        }
    }

    fn driver_error(&self, operation: &'static str, message: impl Into<String>) -> Error {
        Error::Driver {
            device: self.device.name.clone(),
            operation,
            message: message.into(),
        }
    }

    /// Host memory of `layout` (non-zero size), recorded for `free`.
    fn allocate(&self, requester: &'static str, layout: Layout) -> Result<*mut u8> {
        self.check_live()?;
        // SAFETY: the size is not zero (callers ask for > 0 bytes).
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                kernel: requester,
                device: self.device.name.clone(),
                bytes: layout.size(),
            });
        }
        self.allocations().insert(ptr as usize as u64, layout);
        Ok(ptr)
    }

    /// Frees what `allocate` returned.
    fn deallocate(&self, ptr: *mut u8) {
        let layout = self
            .allocations()
            .remove(&(ptr as usize as u64))
            .expect("freed a live allocation of the host device");
        // SAFETY: allocated by `allocate` with this layout, and freed once (removed above).
        unsafe { dealloc(ptr, layout) };
    }

    fn allocations(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Layout>> {
        self.device
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The host build with this handle.
    fn entry(&self, handle: u64) -> Result<HostEntry> {
        let entries = self
            .device
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        // Only `release` empties the list, so a handle it does not hold is one of before.
        entries
            .get(handle as usize)
            .cloned()
            .ok_or_else(|| self.released())
    }
}

/// How a launch runs the threads of a kernel with a range build (see `HostBackend::run`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// One thread per call.
    OnePerCall,
    /// Each task's range of threads as one call.
    Ranges,
    /// As `Ranges`, each task saving the output elements its ownership loops name before they
    /// are written.
    RangesSavingRuns,
}

impl HostBackend {
    /// Runs a launch to its end. With `outputs`, ranges of threads of a kernel that never waits
    /// may run as one call each, saving the output elements each range is about to write, in
    /// its task; the launch runs again another way (after `outputs` put back what was saved)
    /// if the kernel reads per-thread ids, or reaches an output without naming its elements. A
    /// kernel not known to never wait (no PTX says so) runs as plain calls too where `outputs`
    /// can put everything back, and on the scheduler once a thread reaches a barrier, a warp
    /// operation or shared memory; so does one whose PTX was wrong about it.
    ///
    /// # Safety
    /// As [`Backend::launch`].
    unsafe fn run(
        &self,
        entry: EntryHandle,
        shape: Shape,
        args: &PackedArgs,
        outputs: Option<&dyn SavedOutputs>,
    ) -> Result<()> {
        self.check_live()?;
        let entry = self.entry(entry.0)?;
        let warp_size = warp_size().map_err(|reason| Error::InvalidLaunch {
            kernel: entry.name,
            device: self.device.name.clone(),
            reason,
        })?;
        // Plain calls where they are known to fit, or where a launch that finds they do not
        // (a thread reaching a barrier, a warp operation or shared memory) can be put back and
        // run again on the scheduler. "Known" from the PTX is a guess too: an image that left a
        // kernel's body out (a stub that panics, for a GPU that lacks its instructions) shows no
        // barrier, so a kernel found to need the block model leaves the plain calls for good.
        let plain = entry.threads.filter(|_| {
            !entry.needs_block_model.load(Ordering::Relaxed)
                && (entry.independent || outputs.is_some())
        });
        if let (Some(_), Some(saved)) = (plain, outputs) {
            // SAFETY: the caller keeps the contract.
            let ran = unsafe { self.run_ways(&entry, plain, shape, warp_size, args, saved) };
            let Err(e) = ran else { return Ok(()) };
            if !entry.needs_block_model.load(Ordering::Relaxed) {
                return Err(e);
            }
            saved.restore();
            // SAFETY: as above.
            return unsafe { self.run_ways(&entry, None, shape, warp_size, args, saved) };
        }
        match outputs {
            // SAFETY: the caller keeps the contract.
            Some(saved) => unsafe { self.run_ways(&entry, plain, shape, warp_size, args, saved) },
            None => {
                let ran = catch_unwind(AssertUnwindSafe(|| {
                    // SAFETY: as above.
                    unsafe {
                        run_once(&entry, plain, shape, warp_size, args, Way::OnePerCall, None)
                    }
                }));
                self.finished(ran)
            }
        }
    }

    /// Runs the launch with `plain` (or on the scheduler without it), saving and restoring the
    /// outputs through `outputs` as the ways tried need. A thread that needs the block model sets
    /// the entry's flag and fails the run.
    ///
    /// # Safety
    /// As `launch`.
    unsafe fn run_ways(
        &self,
        entry: &HostEntry,
        plain: Option<HostThreads>,
        shape: Shape,
        warp_size: u32,
        args: &PackedArgs,
        outputs: &dyn SavedOutputs,
    ) -> Result<()> {
        let run = |way: Way| {
            // SAFETY: the caller's contract.
            unsafe { run_once(entry, plain, shape, warp_size, args, way, Some(outputs)) }
        };
        let attempt = |way: Way| {
            let ran = catch_unwind(AssertUnwindSafe(|| run(way)));
            if matches!(&ran, Err(payload) if payload.is::<NeedsBlockModel>()) {
                entry.needs_block_model.store(true, Ordering::Relaxed);
            }
            ran
        };
        let ranges = plain.is_some();
        if ranges
            && !entry.reads_thread_ids.load(Ordering::Relaxed)
            && !entry.reaches_outputs_unnamed.load(Ordering::Relaxed)
        {
            let ran = attempt(Way::RangesSavingRuns);
            match &ran {
                Err(payload) if payload.is::<NeedsWholeBackup>() => {
                    entry.reaches_outputs_unnamed.store(true, Ordering::Relaxed)
                }
                Err(payload) if payload.is::<NeedsThreadIds>() => {
                    entry.reads_thread_ids.store(true, Ordering::Relaxed)
                }
                _ => return self.finished(ran),
            }
            outputs.restore();
        }
        outputs.save_all();
        let as_one = ranges && !entry.reads_thread_ids.load(Ordering::Relaxed);
        if !as_one {
            return self.finished(attempt(Way::OnePerCall));
        }
        let mut ran = attempt(Way::Ranges);
        if matches!(&ran, Err(payload) if payload.is::<NeedsThreadIds>()) {
            entry.reads_thread_ids.store(true, Ordering::Relaxed);
            outputs.restore();
            ran = attempt(Way::OnePerCall);
        }
        self.finished(ran)
    }
}

/// One run of a launch: ranges of threads as plain calls through `plain` (a task's range holds
/// whole blocks where they fit in one, for the reductions' fast path), else every block on the
/// scheduler.
///
/// # Safety
/// As `Backend::launch`; `plain` is the entry's range build.
unsafe fn run_once(
    entry: &HostEntry,
    plain: Option<HostThreads>,
    shape: Shape,
    warp_size: u32,
    args: &PackedArgs,
    way: Way,
    outputs: Option<&dyn SavedOutputs>,
) {
    let Shape {
        grid,
        block,
        dynamic_shared,
    } = shape;
    match plain {
        Some(threads) => {
            let total = grid.count() * block.count();
            let per_block = block.count();
            // Whole blocks per task where a block fits in one (a reduction's block combines on
            // its last thread), and at least a few tasks per worker for a small grid.
            let spread = total.div_ceil(rayon::current_num_threads() as u64 * 4);
            let span = if per_block <= THREADS_PER_TASK {
                (spread.min(THREADS_PER_TASK) / per_block).max(1) * per_block
            } else {
                THREADS_PER_TASK
            };
            let task = |t: u64| {
                let first = t * span;
                let range = ThreadRange {
                    grid,
                    block,
                    first,
                    end: (first + span).min(total),
                    warp_size,
                    as_one: way != Way::OnePerCall,
                };
                // SAFETY: `args` are this entry's packed parameters (the trait contract),
                // `range` lies in the grid, and the entry's threads never wait for one
                // another (how the layer above chose this build).
                let call = || unsafe { threads(args, range) };
                match (way, outputs) {
                    (Way::RangesSavingRuns, Some(outputs)) => saving_runs(outputs, call),
                    _ => call(),
                }
            };
            (0..total.div_ceil(span)).into_par_iter().for_each(task)
        }
        None => {
            // SAFETY: `args` are this entry's packed parameters (the trait contract), and
            // every thread runs through the scheduler.
            let run_thread = || unsafe { (entry.thread)(args) };
            let run_block = |b: u64| {
                scheduler::run_block(
                    entry.name,
                    Dim3::from_linear(b, grid),
                    grid,
                    block,
                    dynamic_shared as usize,
                    warp_size,
                    &run_thread,
                )
            };
            (0..grid.count()).into_par_iter().for_each(run_block)
        }
    }
}

impl HostBackend {
    /// The launch's outcome: a panic of the kernel is a failed launch with its message.
    fn finished(&self, ran: std::thread::Result<()>) -> Result<()> {
        ran.map_err(|payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .or_else(|| {
                    payload.is::<NeedsBlockModel>().then(|| {
                        "a thread reached a barrier, a warp operation or shared memory while the \
                         threads ran as plain calls, and this launch cannot put its outputs back \
                         to run again on the block scheduler (later launches start there)"
                            .to_string()
                    })
                })
                .unwrap_or_else(|| "panic with a non-string payload".to_string());
            self.driver_error("running the kernel", format!("panicked: {message}"))
        })
    }
}

/// Runs `call` (a task's range of threads as one call), saving through `outputs` each run of
/// output bytes that its ownership loops name before writing it, once per task (a kernel may
/// loop over one output twice).
fn saving_runs(outputs: &dyn SavedOutputs, call: impl FnOnce()) {
    let saved = RefCell::new(Vec::<Range<usize>>::new());
    let save = |address: *const u8, bytes: usize| {
        let mut saved = saved.borrow_mut();
        for part in unsaved(&saved, address as usize..address as usize + bytes) {
            // SAFETY: ownership loops name the elements of their own threads only, which no
            // other task reaches, before writing them; this task has not saved this part.
            unsafe { outputs.save(part.start, part.len()) };
            saved.push(part);
        }
    };
    with_output_saving(&save, call)
}

/// The parts of `range` that no range of `saved` covers.
fn unsaved(saved: &[Range<usize>], range: Range<usize>) -> Vec<Range<usize>> {
    let mut parts = vec![range];
    for s in saved {
        parts = parts
            .into_iter()
            .flat_map(|p| [p.start..p.end.min(s.start), p.start.max(s.end)..p.end])
            .filter(|p| !p.is_empty())
            .collect();
    }
    parts
}

/// The variable that sets the lanes per warp of host launches.
pub const WARP_SIZE_VAR: &str = "OFFLOAD_HOST_WARP_SIZE";

/// Lanes per warp of a host launch: `OFFLOAD_HOST_WARP_SIZE` (32 or 64), else 32.
pub fn warp_size() -> std::result::Result<u32, String> {
    parse_warp_size(std::env::var(WARP_SIZE_VAR))
}

fn parse_warp_size(
    value: std::result::Result<String, std::env::VarError>,
) -> std::result::Result<u32, String> {
    match value {
        Err(std::env::VarError::NotPresent) => Ok(32),
        Ok(v) if v.trim() == "32" => Ok(32),
        Ok(v) if v.trim() == "64" => Ok(64),
        Ok(v) => Err(format!(
            "{WARP_SIZE_VAR}={v:?}: the host backend runs warps of 32 or 64 lanes"
        )),
        Err(e) => Err(format!("{WARP_SIZE_VAR}: {e}")),
    }
}

impl Backend for HostBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn platform(&self) -> Platform {
        Platform::Host
    }

    fn uuid(&self) -> Option<[u8; 16]> {
        None
    }

    fn name(&self) -> &str {
        &self.device.name
    }

    fn ordinal(&self) -> usize {
        0
    }

    /// CUDA's limits, so that a shape valid on the host is valid on a GPU too.
    fn limits(&self) -> Limits {
        Limits {
            max_threads_per_block: 1024,
            max_block: Dim3::new(1024, 1024, 64),
            max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
            multiprocessors: rayon::current_num_threads() as u32,
            threads_per_multiprocessor: 1024,
            // What every CUDA GPU gives without opting in.
            max_shared_per_block: 48 * 1024,
        }
    }

    fn memory_is_host(&self) -> bool {
        true
    }

    fn memory_info(&self) -> Result<MemoryInfo> {
        Err(self.driver_error(
            "querying device memory",
            "the host CPU's memory is the process's",
        ))
    }

    fn alloc(&self, requester: &'static str, bytes: usize) -> Result<DevicePtr> {
        let layout =
            Layout::from_size_align(bytes, ALLOC_ALIGN).map_err(|_| Error::OutOfMemory {
                kernel: requester,
                device: self.device.name.clone(),
                bytes,
            })?;
        let ptr = self.allocate(requester, layout)?;
        Ok(DevicePtr(ptr as usize as u64))
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        self.deallocate(ptr.0 as usize as *mut u8);
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, bytes: usize) -> Result<()> {
        self.check_live()?;
        // SAFETY: per the trait contract, both hold `bytes` bytes (host memory on this device).
        unsafe { std::ptr::copy(src, dst.0 as usize as *mut u8, bytes) };
        Ok(())
    }

    unsafe fn copy_from_device(&self, dst: *mut u8, src: DevicePtr, bytes: usize) -> Result<()> {
        self.check_live()?;
        // SAFETY: per the trait contract, both hold `bytes` bytes (host memory on this device).
        unsafe { std::ptr::copy(src.0 as usize as *const u8, dst, bytes) };
        Ok(())
    }

    unsafe fn fill_zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        self.check_live()?;
        // SAFETY: per the trait contract, `dst` holds `bytes` bytes.
        unsafe { std::ptr::write_bytes(dst.0 as usize as *mut u8, 0, bytes) };
        Ok(())
    }

    /// Ordinary host memory, page aligned: the host reads it as directly as any other.
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8> {
        let layout = Layout::from_size_align(bytes, PAGE)
            .map_err(|e| self.driver_error("allocating pinned host memory", e.to_string()))?;
        self.allocate("offload::PinnedVec", layout)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        self.deallocate(ptr);
    }

    fn pinned_device_address(&self, ptr: *mut u8) -> Option<DevicePtr> {
        Some(DevicePtr(ptr as usize as u64))
    }

    fn code_rank(&self, code: &Code<'_>) -> Option<u32> {
        matches!(code, Code::Host { .. }).then_some(1)
    }

    fn target(&self) -> String {
        "a host build".to_string()
    }

    fn load_image(&self, code: &Code<'static>) -> Result<ImageHandle> {
        self.check_live()?;
        let Code::Host {
            name,
            thread,
            threads,
            independent,
        } = *code
        else {
            return Err(self.driver_error(
                "loading an image",
                "the host CPU runs kernels' host builds only",
            ));
        };
        let mut entries = self
            .device
            .entries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        entries.push(HostEntry {
            name,
            thread,
            threads,
            independent,
            needs_block_model: Arc::new(AtomicBool::new(false)),
            reads_thread_ids: Arc::new(AtomicBool::new(false)),
            reaches_outputs_unnamed: Arc::new(AtomicBool::new(false)),
        });
        Ok(ImageHandle(entries.len() as u64 - 1))
    }

    fn find_entry(&self, image: ImageHandle, name: &str) -> Result<EntryHandle> {
        let entry = self.entry(image.0)?.name;
        if entry != name {
            return Err(self.driver_error(
                "finding a kernel entry",
                format!("the host build of `{entry}` has no entry `{name}`"),
            ));
        }
        Ok(EntryHandle(image.0))
    }

    fn entry_limits(&self, _entry: EntryHandle) -> Result<EntryLimits> {
        // Shared memory is allocated per block as the kernel asks; registers are the CPU's.
        Ok(EntryLimits {
            max_threads_per_block: self.limits().max_threads_per_block,
            registers: 0,
            static_shared: 0,
        })
    }

    fn find_global(&self, _image: ImageHandle, _name: &str) -> Result<Option<(DevicePtr, usize)>> {
        Ok(None)
    }

    unsafe fn launch(&self, entry: EntryHandle, shape: Shape, args: &PackedArgs) -> Result<()> {
        // SAFETY: the caller keeps the contract.
        unsafe { self.run(entry, shape, args, None) }
    }

    /// A kernel whose threads never wait for one another runs each task's range of threads as
    /// one call when it can, saving in each task the output elements it is about to write (see
    /// `run`); otherwise the outputs are saved whole first.
    unsafe fn launch_restartable(
        &self,
        entry: EntryHandle,
        shape: Shape,
        args: &PackedArgs,
        outputs: &dyn SavedOutputs,
    ) -> Result<()> {
        // SAFETY: the caller keeps the contract.
        unsafe { self.run(entry, shape, args, Some(outputs)) }
    }

    /// Launches and copies are complete when their calls return.
    fn synchronize(&self) -> Result<()> {
        self.check_live()
    }

    fn release(&self) -> Result<()> {
        self.device.released.store(true, Ordering::Release);
        self.device
            .entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        Ok(())
    }

    fn new_queue(&self) -> Result<Arc<dyn Backend>> {
        self.check_live()?;
        Ok(Arc::new(HostBackend {
            device: self.device.clone(),
        }))
    }

    /// Work on the host device runs when it is queued: there is no queue to hand out.
    fn native_queue(&self) -> Option<NativeQueue> {
        None
    }

    fn record_event(&self) -> Result<Box<dyn QueueEvent>> {
        self.check_live()?;
        Ok(Box::new(HostEvent(Instant::now())))
    }

    /// The work before any event is complete already.
    fn wait_event(&self, _event: &dyn QueueEvent) -> Result<()> {
        self.check_live()
    }
}

/// When an event was recorded: the work queued before it had run by then.
struct HostEvent(Instant);

impl QueueEvent for HostEvent {
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn elapsed_since(&self, start: &dyn QueueEvent) -> Result<Duration> {
        let start = start
            .as_any()
            .downcast_ref::<HostEvent>()
            .ok_or_else(|| Error::NoDevice("timing events of two different devices".to_string()))?;
        Ok(self.0.saturating_duration_since(start.0))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::env::VarError;

    /// Loads a host build with a range entry on a fresh host device and launches it.
    fn launch_ranges(threads: HostThreads, grid: Dim3, block: Dim3) -> Result<()> {
        /// The scheduler's build: never chosen while a range build is there.
        unsafe fn one_thread(_: &PackedArgs) {
            panic!("the one-thread build ran although the range build was given");
        }
        let host = HostBackend::new();
        let image = host.load_image(&Code::Host {
            name: "ranges",
            thread: one_thread,
            threads: Some(threads),
            independent: true,
        })?;
        let entry = host.find_entry(image, "ranges")?;
        let shape = Shape {
            grid,
            block,
            dynamic_shared: 0,
        };
        // SAFETY: the builds read no parameters.
        unsafe { host.launch(entry, shape, &PackedArgs::default()) }
    }

    /// A kernel whose threads never wait for one another runs as ranges of consecutive thread
    /// ids that cover the grid exactly once, none longer than a task, in the launch's shape.
    #[test]
    fn range_builds_cover_the_grid_once_in_contiguous_ranges() {
        static RANGES: Mutex<Vec<ThreadRange>> = Mutex::new(Vec::new());
        unsafe fn record(_: &PackedArgs, range: ThreadRange) {
            RANGES.lock().unwrap().push(range);
        }
        let (grid, block) = (Dim3::new(7, 3, 2), Dim3::new(33, 2, 1));
        launch_ranges(record, grid, block).unwrap();
        let mut ranges = RANGES.lock().unwrap().clone();
        ranges.sort_by_key(|r| r.first);
        let total = grid.count() * block.count();
        assert_eq!(ranges.first().map(|r| r.first), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(total));
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].end, pair[1].first, "contiguous, no overlap");
        }
        for r in &ranges {
            assert!(
                r.first < r.end && r.end - r.first <= THREADS_PER_TASK,
                "{r:?}"
            );
            assert_eq!((r.grid, r.block), (grid, block));
        }
    }

    /// A panic in a range build fails the launch with its message, as a thread's does.
    #[test]
    fn a_panic_in_a_range_build_is_a_failed_launch() {
        unsafe fn panic_at_500(_: &PackedArgs, range: ThreadRange) {
            if (range.first..range.end).contains(&500) {
                panic!("thread 500 failed");
            }
        }
        let failed = launch_ranges(panic_at_500, Dim3::new(8, 1, 1), Dim3::new(256, 1, 1));
        match failed {
            Err(Error::Driver { message, .. }) => {
                assert_eq!(message, "panicked: thread 500 failed")
            }
            other => panic!("expected a driver error, got {other:?}"),
        }
    }

    #[test]
    fn warp_size_setting() {
        assert_eq!(parse_warp_size(Err(VarError::NotPresent)), Ok(32));
        assert_eq!(parse_warp_size(Ok("64".into())), Ok(64));
        assert_eq!(parse_warp_size(Ok(" 32 ".into())), Ok(32));
        let e = parse_warp_size(Ok("48".into())).unwrap_err();
        assert_eq!(
            e,
            "OFFLOAD_HOST_WARP_SIZE=\"48\": the host backend runs warps of 32 or 64 lanes"
        );
    }
}
