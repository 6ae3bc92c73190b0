//! Streams: queues of launches that run asynchronously, in order within a stream and
//! independently across streams (and devices), so that one stream's copies overlap another's
//! kernels.
//!
//! Queued work reads and writes host memory after the call that queued it has returned, so the
//! memory must stay borrowed until the work is done. [`scope`] guarantees that, as
//! `std::thread::scope` does for threads: streams are made inside it, whatever they are handed
//! must outlive the scope, and the scope waits for every stream before it returns (also when its
//! body fails or panics). A `&mut [T]` handed to a stream stays borrowed until the scope ends, so
//! the caller cannot read results before they have arrived. Data that stays on the device between
//! kernels lives in a [`crate::DeviceVec`] (borrowed for each call only, so it serves loops and
//! outlives the scope) or in [`DeviceSlice`]s of the scope.
//!
//! Device data used on several streams is ordered automatically (see `crate::mapping::ordering`): a
//! kernel queued on one stream that reads what another stream's kernel writes waits for it, on
//! the device. Work that stays on one stream records no event for that.
//!
//! On a GPU a launch on a stream queues the allocation of its device buffers, the copies in, the
//! kernel, the copies back and the release, then returns. Copies from and to pageable memory are
//! staged, and wait; from and to [`crate::PinnedVec`] they overlap with kernels. A kernel that
//! panics or faults is reported by the next [`Stream::synchronize`] (or by the scope) as
//! `Err(KernelFailed)`; unlike a plain launch, its outputs may then have been written. Panic
//! records are per device image, not per launch: while a kernel panics on one stream, a launch of
//! the same crate's kernels completing on another queue of the device may be the one that reports
//! it. The host device runs each launch when it is queued, so its streams are complete when a
//! call returns.

use crate::api::device_slice::{DeviceSlice, ScopeAllocation};
use crate::api::graph::{Graph, Recording, ReplayQueue};
use crate::api::launch::Launch;
use crate::api::map::{InArg, OutArg, StreamArg};
use crate::api::param_layout::KeptParams;
use crate::api::prepared::{self, KeptLaunch};
use crate::api::stream_mode::{Records, Runs, StreamMode};
use crate::mapping::device::{check_resident, Device};
use crate::mapping::kernel::{claim_uses, ArgData, Kernel, KernelArg, OutKind};
use crate::mapping::loaded::{Entry, LoadedImage};
use crate::mapping::ordering::Uses;
use crate::mapping::trace::{self, CopySource, LaunchSummary};
use crate::mapping::transfer::{kernel_failed, HostData};
use crate::plugins::{Backend, DevicePtr, NativeQueue, QueueEvent, Shape};
use crate::{Error, Result};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::{size_of, size_of_val};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Run `body` with a scope in which streams may queue work on host data borrowed from outside
/// it; wait for all of it before returning. The result is `body`'s error if it failed, else the
/// first error a stream reports when it is waited for, else `body`'s value.
pub fn scope<'env, R>(
    body: impl for<'scope> FnOnce(&'scope StreamScope<'scope, 'env>) -> Result<R>,
) -> Result<R> {
    let scope = StreamScope {
        queues: Mutex::new(Vec::new()),
        _scope: PhantomData,
        _env: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&scope)));
    // Whatever happened, queued work must finish before the borrows it uses end.
    let queues = std::mem::take(&mut *scope.queues.lock().unwrap_or_else(|p| p.into_inner()));
    let drained: Result<()> = queues
        .iter()
        .map(|q| q.synchronize())
        .fold(Ok(()), Result::and);
    // Only now, with every stream drained, may device slices go.
    drop(queues);
    match outcome {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(value)) => drained.map(|()| value),
    }
}

/// The scope of [`scope`]: makes streams on any device.
pub struct StreamScope<'scope, 'env: 'scope> {
    queues: Mutex<Vec<Arc<Queue>>>,
    /// Invariant in both lifetimes, as `std::thread::Scope`: borrows handed to streams cannot be
    /// shortened to less than the scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope> StreamScope<'scope, '_> {
    /// A new stream on `device`, independent of every other stream.
    pub fn stream(&'scope self, device: &Device) -> Result<Stream<'scope>> {
        let queue = Arc::new(Queue {
            device: device.clone(),
            backend: device.backend().new_queue()?,
            launched: Mutex::new(Vec::new()),
            allocations: Mutex::new(Vec::new()),
            recording: Mutex::new(None),
            is_recording: AtomicBool::new(false),
            launched_epoch: AtomicU64::new(new_epoch()),
        });
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(queue.clone());
        Ok(Stream::on(queue))
    }
}

/// A queue of launches on one device, made by [`StreamScope::stream`]. Launch on it with a
/// kernel's generated `enqueue(&stream, launch, args…)`. Its mode `M` is [`Runs`]; the handle
/// that [`Stream::record_graph`] gives its body is [`Records`] (see `crate::api::stream_mode`).
pub struct Stream<'scope, M: StreamMode = Runs> {
    queue: Arc<Queue>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _mode: PhantomData<M>,
}

struct Queue {
    device: Device,
    /// The device's queue.
    backend: Arc<dyn Backend>,
    /// Kernels queued since the last synchronization, with their images: whose panic records to
    /// read then.
    launched: Mutex<Vec<(&'static str, Arc<LoadedImage>)>>,
    /// Memory of the device slices this stream made, released when the scope drops the queue
    /// (after waiting for every stream of the scope). Boxed: slices refer to their uses by
    /// address, which the vector's growth would move.
    #[allow(clippy::vec_box)]
    allocations: Mutex<Vec<Box<ScopeAllocation>>>,
    /// The recording in progress ([`Stream::record_graph`]), which takes the launches queued.
    recording: Mutex<Option<Recording>>,
    /// Whether `recording` holds one: read by every launch and call on the stream, without
    /// taking the lock when it does not. Changed with the lock held.
    is_recording: AtomicBool,
    /// Renewed (`new_epoch`) each time `synchronize` takes `launched`, with its lock held: a
    /// launch that noted its kernel under the same epoch finds it there still. Unique in the
    /// process, so that it also names the stream.
    launched_epoch: AtomicU64,
}

/// A value of `Queue::launched_epoch` that no queue had before.
fn new_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl ReplayQueue for Queue {
    fn device(&self) -> &Device {
        &self.device
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn scope_scratch(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        self.keep(self.device.queue(), kernel, bytes, true)
            .map(|(ptr, _)| ptr)
    }

    fn after_device_queue(&self) -> Result<()> {
        self.backend.wait_for(self.device.backend())
    }

    fn launched(&self, kernels: &[(&'static str, Arc<LoadedImage>)]) {
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(kernels.iter().cloned());
    }
}

impl Queue {
    /// `bytes` (more than zero) of device memory allocated on `on` (this stream's queue or its
    /// device's own), zeroed there when `zero`, kept until the scope drops this queue; with the
    /// uses of it, which stay at that address as long.
    fn keep(
        &self,
        on: &Arc<dyn Backend>,
        what: &'static str,
        bytes: usize,
        zero: bool,
    ) -> Result<(DevicePtr, *const Uses)> {
        let ptr = on.alloc(what, bytes)?;
        let allocation = Box::new(ScopeAllocation::new(on.clone(), ptr));
        if zero {
            // SAFETY: `ptr` holds `bytes`.
            unsafe { on.fill_zero(ptr, bytes)? };
        }
        let mut allocations = self.allocations.lock().unwrap_or_else(|p| p.into_inner());
        allocations.push(allocation);
        // Taken from the box in its place, which it keeps until the scope drops the queue.
        let uses: *const Uses = &allocations[allocations.len() - 1].uses;
        Ok((ptr, uses))
    }

    /// Note a kernel queued, unless it is the one noted last: a loop of the same launch keeps
    /// one entry (the panic record is per image, the names are for messages). A launch passes
    /// the epoch under which it noted its kernel last (`noted`, `u64::MAX` at first; one per
    /// launch kept per thread or prepared once), and takes no lock while that is this queue's
    /// epoch: its entry is still there for the next `synchronize`, which takes the list only
    /// after this launch was queued (it would have renewed the epoch before). Epochs are unique
    /// in the process, so a note on another stream never matches.
    fn note_launched(&self, kernel: &'static str, image: &Arc<LoadedImage>, noted: &mut u64) {
        if self.launched_epoch.load(Ordering::SeqCst) == *noted {
            return;
        }
        let mut launched = self.launched.lock().unwrap_or_else(|p| p.into_inner());
        let repeated = launched
            .last()
            .is_some_and(|(k, i)| std::ptr::eq(*k, kernel) && Arc::ptr_eq(i, image));
        if !repeated {
            launched.push((kernel, image.clone()));
        }
        *noted = self.launched_epoch.load(Ordering::SeqCst);
    }

    /// Wait for the queued work, then report a kernel that panicked in it.
    fn synchronize(&self) -> Result<()> {
        let backend = &*self.backend;
        let launched = {
            let mut launched = self.launched.lock().unwrap_or_else(|p| p.into_inner());
            self.launched_epoch.store(new_epoch(), Ordering::SeqCst);
            std::mem::take(&mut *launched)
        };
        let failed = |kernel: &'static str, message: String| Error::KernelFailed {
            kernel,
            device: backend.name().to_string(),
            message,
        };
        if let Err(e) = backend.synchronize() {
            // A fault surfaces at the first synchronization after it: name the stream's kernels.
            return Err(match launched.first() {
                None => e,
                Some(&(first, _)) => {
                    let names: Vec<&str> = launched.iter().map(|(name, _)| *name).collect();
                    failed(
                        first,
                        format!("{e} (kernels queued on the stream: {})", names.join(", ")),
                    )
                }
            });
        }
        // Not while a plain launch on the device waits for its own panic report.
        let _reading = self.device.launch_lock();
        let mut checked: Vec<*const LoadedImage> = Vec::new();
        for (kernel, image) in launched {
            // One panic record per image: read each once.
            if checked.contains(&Arc::as_ptr(&image)) {
                continue;
            }
            checked.push(Arc::as_ptr(&image));
            if let Some(message) = image.take_panic(backend)? {
                return Err(failed(kernel, message));
            }
        }
        Ok(())
    }
}

impl<'scope, M: StreamMode> Stream<'scope, M> {
    fn on(queue: Arc<Queue>) -> Self {
        Stream {
            queue,
            _scope: PhantomData,
            _mode: PhantomData,
        }
    }

    /// The device the stream queues work on.
    pub fn device(&self) -> &Device {
        &self.queue.device
    }

    fn recording(&self) -> std::sync::MutexGuard<'_, Option<Recording>> {
        self.queue
            .recording
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

impl<'scope> Stream<'scope> {
    /// Wait until everything queued so far has run; `Err(KernelFailed)` if a kernel of it
    /// panicked or faulted.
    pub fn synchronize(&self) -> Result<()> {
        self.refuse_while_recording("offload::Stream::synchronize")?;
        self.queue.synchronize()
    }

    /// Record the launches `body` queues on the handle it is given into a [`Graph`] instead of
    /// running them, to queue them again, all at once, with [`Graph::launch`] (see
    /// [`crate::api::graph`]: device data and values only; a `DeviceVec` stays borrowed while the
    /// graph lives; nothing is queued on this stream meanwhile).
    pub fn record_graph<'g>(
        &self,
        body: impl FnOnce(&Stream<'scope, Records<'g>>) -> Result<()>,
    ) -> Result<Graph<'scope, 'g>> {
        let queue = &*self.queue.backend;
        {
            let mut recording = self.recording();
            if recording.is_some() {
                return Err(Error::InvalidLaunch {
                    kernel: "offload::Stream::record_graph",
                    device: self.queue.device.name().to_string(),
                    reason: "the stream is already recording".to_string(),
                });
            }
            *recording = Some(Recording::begin(queue)?);
            self.queue.is_recording.store(true, Ordering::Release);
        }
        let recorder = Stream::on(self.queue.clone());
        let recorded = catch_unwind(AssertUnwindSafe(|| body(&recorder)));
        let recording = {
            let mut recording = self.recording();
            self.queue.is_recording.store(false, Ordering::Release);
            recording.take().expect("recording since `begin`")
        };
        // Ended whatever `body` did, so that the stream stops recording.
        let graph = recording.end(self.queue.clone());
        match recorded {
            Err(panic) => resume_unwind(panic),
            Ok(recorded) => recorded?,
        }
        graph
    }

    /// `Err` naming `what` while the stream records: only launches on the handle that
    /// `record_graph` gives its body can be recorded.
    pub(crate) fn refuse_while_recording(&self, what: &'static str) -> Result<()> {
        if !self.queue.is_recording.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(Error::InvalidLaunch {
            kernel: what,
            device: self.queue.device.name().to_string(),
            reason: "the stream is recording: only kernel launches on the handle that \
                     record_graph gives its body can be recorded"
                .to_string(),
        })
    }

    /// Device memory holding a copy of `src`, queued on this stream. From a
    /// [`crate::PinnedVec`] the copy runs asynchronously; from ordinary memory it is staged.
    pub fn upload<T: DeviceCopy>(&self, src: &'scope [T]) -> Result<DeviceSlice<'scope, T>> {
        self.refuse_while_recording("offload::Stream::upload")?;
        let slice = self.alloc_zeroed_unqueued::<T>(src.len(), false, "offload::Stream::upload")?;
        if !src.is_empty() {
            // SAFETY: the slice holds `src.len()` elements; `src` is borrowed for the scope,
            // which waits for the copy.
            unsafe { self.copy_in(DevicePtr(slice.addr), src)? };
        }
        Ok(slice)
    }

    /// Queue a copy of `src` into `dst`, device data of this stream's device of the same length:
    /// a `&mut DeviceVec`, a view `dv.slice_mut(a..b)` or a `DeviceSlice`. It is ordered after
    /// the other streams' uses of `dst`, as a kernel writing it would be.
    pub fn upload_into<T: DeviceCopy>(
        &self,
        src: &'scope [T],
        dst: impl OutArg<T> + StreamArg<'scope>,
    ) -> Result<()> {
        let what = "offload::Stream::upload_into";
        self.queue_copy(what, "dst", dst.into_kernel_arg(), src.len(), |dst| {
            // SAFETY: `dst` holds `src.len()` elements; `src` is borrowed for the scope, which
            // waits for the copy.
            unsafe { self.copy_in(dst, src) }
        })
    }

    /// A copy between host memory of `host_len` elements and `device_data` (the `argument` of
    /// `what`): refused while recording, unless `device_data` is device data of this stream's
    /// device of that length, then ordered after the other streams' uses of it and queued by
    /// `copy`, given its address (not called when empty).
    fn queue_copy(
        &self,
        what: &'static str,
        argument: &'static str,
        device_data: KernelArg<'_>,
        host_len: usize,
        copy: impl FnOnce(DevicePtr) -> Result<()>,
    ) -> Result<()> {
        self.refuse_while_recording(what)?;
        let (addr, len) = self.resident(what, argument, &device_data)?;
        if len != host_len {
            return Err(Error::LengthMismatch {
                // Named as the method (`Stream::download`).
                what: what.strip_prefix("offload::").unwrap_or(what),
                expected: len,
                found: host_len,
            });
        }
        if host_len == 0 {
            return Ok(());
        }
        let claim = claim_uses(std::slice::from_ref(&device_data));
        claim.order_on(&self.queue.backend)?;
        copy(DevicePtr(addr))?;
        claim.queued_on(&self.queue.backend);
        Ok(())
    }

    /// Queue a copy of `src` to `dst`, traced.
    ///
    /// # Safety
    /// `dst` holds `src.len()` elements, and `src` is borrowed for the scope.
    unsafe fn copy_in<T: DeviceCopy>(&self, dst: DevicePtr, src: &'scope [T]) -> Result<()> {
        let (host, bytes) = (src.as_ptr() as *const u8, size_of_val(src));
        // SAFETY: per the contract.
        unsafe { self.queue.backend.copy_to_device(dst, host, bytes)? };
        let device = &self.queue.device;
        if !device.memory_is_host() {
            let source = CopySource::StreamUpload;
            trace::queued_copy_to_device(device.id(), device.name(), host, bytes, source);
        }
        Ok(())
    }

    /// Address and length of `arg`, device data on this stream's device; else an error naming
    /// `what` and `argument`.
    fn resident(
        &self,
        what: &'static str,
        argument: &'static str,
        arg: &KernelArg<'_>,
    ) -> Result<(u64, usize)> {
        let device = &self.queue.device;
        match arg.data {
            ArgData::Resident {
                device: on,
                addr,
                len,
                ..
            } => {
                check_resident(what, device, on)?;
                Ok((addr, len))
            }
            _ => Err(Error::InvalidArgument {
                kernel: what,
                argument,
                reason: "is host data: it takes device data (a DeviceVec, a view of one, or a \
                         DeviceSlice)"
                    .to_string(),
            }),
        }
    }

    /// `len` zeroed elements of device memory, zeroed in order on this stream.
    pub fn alloc_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<DeviceSlice<'scope, T>> {
        self.refuse_while_recording("offload::Stream::alloc_zeroed")?;
        self.alloc_zeroed_unqueued(len, true, "offload::Stream::alloc_zeroed")
    }

    /// A device slice of `len` elements; zeroed on the queue when `zero`.
    fn alloc_zeroed_unqueued<T: DeviceCopy>(
        &self,
        len: usize,
        zero: bool,
        what: &'static str,
    ) -> Result<DeviceSlice<'scope, T>> {
        let device_id = self.queue.device.id();
        let bytes = len * size_of::<T>();
        if bytes == 0 {
            return Ok(DeviceSlice::new(device_id, 0, len, None));
        }
        let queue = &self.queue.backend;
        let (ptr, uses) = self.queue.keep(queue, what, bytes, zero)?;
        // SAFETY: the allocation's box stays in this queue's allocations, unmoved and
        // unchanged, until the scope drops the queue, after `'scope` (the scope holds the queue
        // until it returns).
        let uses: &'scope Uses = unsafe { &*uses };
        // Written on this stream (zeroed, or about to be uploaded).
        uses.claim(true).queued_on(queue);
        Ok(DeviceSlice::new(device_id, ptr.0, len, Some(uses)))
    }

    /// Queue a copy of `src` into `dst` (same length), which holds the data once the stream has
    /// been synchronized (at the latest when the scope ends). `src` is device data of this
    /// stream's device: a `DeviceSlice`, a `&DeviceVec` or a view `dv.slice(a..b)`; the copy is
    /// ordered after the other streams' writes to it. To a [`crate::PinnedVec`] it runs
    /// asynchronously; to ordinary memory it is staged.
    pub fn download<T: DeviceCopy>(
        &self,
        src: impl InArg<T> + StreamArg<'scope>,
        dst: &'scope mut [T],
    ) -> Result<()> {
        let (host, bytes) = (dst.as_mut_ptr() as *mut u8, size_of_val(dst));
        let what = "offload::Stream::download";
        self.queue_copy(what, "src", src.into_kernel_arg(), dst.len(), |src| {
            // SAFETY: `src` holds `dst.len()` elements; `dst` is borrowed for the scope, which
            // waits for the copy.
            unsafe { self.queue.backend.copy_from_device(host, src, bytes)? };
            let device = &self.queue.device;
            if !device.memory_is_host() {
                trace::queued_copy_from_device(device.id(), device.name(), host, bytes);
            }
            Ok(())
        })
    }

    /// The vendor's handle of this stream, for vendor libraries to queue work in order with
    /// the kernels and copies queued on it: on a CUDA device through the CUDA plugin,
    /// [`NativeQueue::Cuda`] (the `CUstream` and its context; `cublasSetStream` takes the
    /// stream); through liboffload, its queue; `None` on the host device, whose streams run
    /// each launch when it is queued.
    ///
    /// The handle is valid until the scope ends. Work queued through it may only use memory
    /// that outlives the scope (a [`DeviceSlice`] of the scope, a `DeviceVec` borrowed for it),
    /// and must not be waited for by destroying the stream: the scope owns it.
    pub fn native_queue(&self) -> Option<NativeQueue> {
        self.queue.backend.native_queue()
    }

    /// Copies `src` (of this stream's device) into a new vector once the work queued on the
    /// stream before has run: waits for the stream, so a kernel failure in it is the error.
    pub fn to_vec<T: DeviceCopy>(&self, src: DeviceSlice<'scope, T>) -> Result<Vec<T>> {
        self.refuse_while_recording("offload::Stream::to_vec")?;
        let device = &self.queue.device;
        check_resident("offload::Stream::to_vec", device, src.device_id)?;
        // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
        let mut out = vec![unsafe { std::mem::zeroed() }; src.len()];
        let arg = InArg::into_kernel_arg(src);
        let claim = claim_uses(std::slice::from_ref(&arg));
        claim.order_on(&self.queue.backend)?;
        if !out.is_empty() {
            // SAFETY: `src` holds `out.len()` elements; `out` is waited for below, before it
            // is returned or dropped.
            let queued = unsafe {
                self.queue.backend.copy_from_device(
                    out.as_mut_ptr() as *mut u8,
                    DevicePtr(src.addr),
                    size_of_val(out.as_slice()),
                )
            };
            if let Err(e) = queued {
                // The queue may still hold the copy's parts that were accepted.
                let _ = self.queue.backend.synchronize();
                return Err(e);
            }
            claim.queued_on(&self.queue.backend);
        }
        self.synchronize()?;
        Ok(out)
    }

    /// A mark after the work queued so far.
    pub fn record(&self) -> Result<Event> {
        self.refuse_while_recording("offload::Stream::record")?;
        Ok(Event {
            device_id: self.queue.device.id(),
            event: self.queue.backend.record_event()?,
        })
    }

    /// Make the work queued on this stream from now on wait for `event`, recorded on any stream
    /// (of another device, the calling thread waits for it here).
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.refuse_while_recording("offload::Stream::wait")?;
        if event.device_id == self.queue.device.id() {
            self.queue.backend.wait_event(&*event.event)
        } else {
            event.synchronize()
        }
    }
}

/// A point in a stream, from [`Stream::record`]: to wait for, or to time the work between two.
pub struct Event {
    device_id: usize,
    event: Box<dyn QueueEvent>,
}

impl Event {
    /// Wait until the work before the event has run.
    pub fn synchronize(&self) -> Result<()> {
        self.event.synchronize()
    }

    /// Time from `start`, an earlier event of the same device, to this event (waits for both).
    /// On a GPU measured by the device; on the host, between the two `record` calls.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        if start.device_id != self.device_id {
            return Err(Error::NoDevice(
                "timing events of two different devices".to_string(),
            ));
        }
        self.event.elapsed_since(&*start.event)
    }
}

/// Queue `kernel` with `args` on `stream` (what the generated `enqueue` calls): as
/// [`crate::api::launch::launch`], on the stream's device, without waiting.
pub fn enqueue<M: StreamMode>(
    kernel: &'static Kernel,
    stream: &Stream<'_, M>,
    launch: Launch<'_>,
    args: &[KernelArg<'_>],
) -> Result<()> {
    let device = stream.check_launch_device(kernel, &launch)?;
    let key = launch.key(kernel, device, args)?;
    prepared::with_kept(
        &key,
        || launch.prepare(kernel, device, key.items),
        |kept| stream.queue_kernel(kernel, kept, args),
    )
}

/// The error of a launch that names `named` on a stream of `device`.
#[cold]
fn another_device(kernel: &'static Kernel, named: &Device, device: &Device) -> Error {
    Error::InvalidLaunch {
        kernel: kernel.name,
        device: named.name().to_string(),
        reason: format!(
            "the launch names {}, but its stream is on {}",
            named.name(),
            device.name()
        ),
    }
}

impl<'scope, M: StreamMode> Stream<'scope, M> {
    /// Another handle of this stream, in the same mode (for BLAS calls on it; a launch prepared
    /// once keeps one).
    pub(crate) fn another(&self) -> Self {
        Stream::on(self.queue.clone())
    }

    /// The stream's device, unless `launch` names another one.
    #[inline]
    pub(crate) fn check_launch_device(
        &self,
        kernel: &'static Kernel,
        launch: &Launch<'_>,
    ) -> Result<&Device> {
        let device = &self.queue.device;
        match launch.device {
            Some(named) if named.id() != device.id() => Err(another_device(kernel, named, device)),
            _ => Ok(device),
        }
    }

    /// Queue the kept launch `kept` of `kernel` (its entry, in its shape) with `args`, checked
    /// (`Launch::key`), packing the parameters over its last ones when they fit and noting the
    /// kernel for `Queue::note_launched` under its note; while the stream records, add it to the
    /// graph instead.
    pub(crate) fn queue_kernel(
        &self,
        kernel: &'static Kernel,
        kept: &mut KeptLaunch,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        let KeptLaunch {
            shape,
            ref entry,
            ref mut params,
            ref mut noted,
        } = *kept;
        let device = &self.queue.device;
        let backend = &*self.queue.backend;
        let mut recording = self
            .queue
            .is_recording
            .load(Ordering::Acquire)
            .then(|| self.recording());
        if let Some(recording) = recording.as_mut().and_then(|r| r.as_mut()) {
            // A running handle's arguments are borrowed for the call only: a graph could outlive
            // them.
            if !M::RECORDS {
                return Err(Error::InvalidLaunch {
                    kernel: kernel.name,
                    device: device.name().to_string(),
                    reason: "the stream is recording: enqueue on the handle that record_graph \
                             gives its body"
                        .to_string(),
                });
            }
            return recording.add(&*self.queue, kernel, entry, shape, args);
        }
        drop(recording);
        let mut buffers = Vec::new();
        let mut summary = LaunchSummary::default();
        let queued = queue_launch(
            self,
            kernel,
            entry,
            shape,
            args,
            params,
            &mut buffers,
            &mut summary,
        );
        for ptr in buffers {
            // SAFETY: allocated above on this queue; the release is ordered after the work
            // queued on it, which is the only user of the buffer.
            unsafe { backend.free(ptr) };
        }
        queued?;
        self.queue.note_launched(kernel.name, &entry.image, noted);
        trace::queued_launch(device, kernel.name, &summary);
        let LaunchSummary {
            bytes_to_device,
            bytes_from_device,
            ..
        } = summary;
        crate::mapping::report::record_queued(
            kernel.name,
            shape,
            bytes_to_device,
            bytes_from_device,
            device,
        );
        Ok(())
    }
}

/// Queue the copies in, the kernel and the copies back; `buffers` gets every allocation, to be
/// released by the caller whatever happens. Map kinds are honoured as by a plain launch, except
/// that data regions are not consulted: host slices are copied for the launch, and `present(..)`
/// is refused (pass the region's mapped handle instead). Device data is ordered after its
/// conflicting uses on other queues.
#[allow(clippy::too_many_arguments)]
fn queue_launch<M: StreamMode>(
    stream: &Stream<'_, M>,
    kernel: &'static Kernel,
    entry: &Entry,
    shape: Shape,
    args: &[KernelArg<'_>],
    params: &mut KeptParams,
    buffers: &mut Vec<DevicePtr>,
    summary: &mut LaunchSummary,
) -> Result<()> {
    let device = &stream.queue.device;
    let backend = &*stream.queue.backend;
    // Asked only when something is copied: a launch on device data needs no answer.
    let traced = || !device.memory_is_host();
    let mut copy_back = Vec::new();
    let copy_in = |d: DevicePtr, ptr: *const u8, bytes: usize, summary: &mut LaunchSummary| {
        // SAFETY: the host slice is borrowed for the stream's scope, which outlives the copy;
        // `d` holds `bytes`.
        unsafe { backend.copy_to_device(d, ptr, bytes)? };
        summary.bytes_to_device += bytes;
        if traced() {
            let source = CopySource::StreamArgument;
            trace::queued_copy_to_device(device.id(), device.name(), ptr, bytes, source);
        }
        Ok::<(), Error>(())
    };
    let resident = params.pack(
        device,
        kernel.name,
        args,
        shape.grid.count(),
        |data| match data {
            HostData::Scratch { bytes } => {
                let d = alloc(backend, kernel, bytes, buffers)?;
                // SAFETY: `d` holds `bytes` >= the header.
                unsafe { backend.fill_zero(d, offload_kernel::reduce::SCRATCH_HEADER)? };
                Ok(d)
            }
            HostData::Input {
                present_only: true, ..
            } => Err(Error::InvalidLaunch {
                kernel: kernel.name,
                device: device.name().to_string(),
                reason: "a stream does not look data regions up: pass the region's mapped \
                     handle instead of present(..)"
                    .to_string(),
            }),
            HostData::Input { ptr, bytes, .. } => {
                let d = alloc(backend, kernel, bytes, buffers)?;
                summary.copied += 1;
                copy_in(d, ptr, bytes, summary)?;
                Ok(d)
            }
            HostData::Output { ptr, bytes, kind } => {
                let d = alloc(backend, kernel, bytes, buffers)?;
                summary.copied += 1;
                if matches!(kind, OutKind::ToFrom | OutKind::To) {
                    copy_in(d, ptr, bytes, summary)?;
                } else {
                    // SAFETY: `d` holds `bytes`.
                    unsafe { backend.fill_zero(d, bytes)? };
                }
                if matches!(kind, OutKind::ToFrom | OutKind::From) {
                    copy_back.push((ptr, d, bytes));
                }
                Ok(d)
            }
        },
    )?;
    summary.resident = resident;
    let claim = claim_uses(args);
    // Data whose uses are not tracked (a region's handles; any, with tracking off) may have been
    // written on the device's own queue.
    let untracked = |a: &KernelArg<'_>| a.uses.is_none() || claim.is_empty();
    if args
        .iter()
        .any(|a| matches!(a.data, ArgData::Resident { .. }) && untracked(a))
    {
        stream.queue.after_device_queue()?;
    }
    claim.order_on(&stream.queue.backend)?;
    // SAFETY: `params` were packed from the arguments of this kernel's launcher; the buffers
    // they name are freed after the queued work, and the host data they name stays borrowed for
    // the stream's scope.
    unsafe { backend.launch(entry.handle, shape, params.params()) }
        .map_err(|e| kernel_failed(kernel.name, e))?;
    claim.queued_on(&stream.queue.backend);
    for (host, d, bytes) in copy_back {
        summary.bytes_from_device += bytes;
        // SAFETY: the `&mut` host slice is borrowed for the stream's scope, which waits for the
        // copy before it ends.
        unsafe { backend.copy_from_device(host, d, bytes)? };
        if traced() {
            trace::queued_copy_from_device(device.id(), device.name(), host, bytes);
        }
    }
    Ok(())
}

/// A launch's own device buffer of `bytes` (> 0), recorded in `buffers`.
fn alloc(
    backend: &dyn Backend,
    kernel: &'static Kernel,
    bytes: usize,
    buffers: &mut Vec<DevicePtr>,
) -> Result<DevicePtr> {
    let d = backend.alloc(kernel.name, bytes)?;
    buffers.push(d);
    Ok(d)
}

/// Ordering of device data across streams, on the mock GPU (the launch path's own tests, in
/// `launch`, cover the rest).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::map::OutArg;
    use crate::mapping::kernel::KernelArg;
    use crate::mapping::mock_kernels::{mock, record, FILL};
    use std::sync::atomic::Ordering;

    /// `fill` of `out`, device data, queued on `stream`.
    fn enqueue_fill(stream: &crate::Stream<'_>, out: crate::DeviceSlice<'_, u32>) -> Result<()> {
        let args = [KernelArg::value(&7u32), OutArg::into_kernel_arg(out)];
        enqueue(&FILL, stream, Launch::auto(), &args)
    }

    /// Work on one stream waits for nothing; a write on another stream waits for the last
    /// one, once per switch.
    #[test]
    fn device_data_waits_only_when_it_changes_streams() {
        let (gpu, device) = mock();
        scope(|s| {
            let (a, b) = (s.stream(&device)?, s.stream(&device)?);
            let out = a.alloc_zeroed::<u32>(8)?;
            for _ in 0..3 {
                enqueue_fill(&a, out)?;
            }
            assert_eq!(gpu.events.load(Ordering::Relaxed), 0);
            enqueue_fill(&b, out)?;
            enqueue_fill(&b, out)?;
            enqueue_fill(&a, out)?;
            assert_eq!(gpu.events.load(Ordering::Relaxed), 2);
            Ok(())
        })
        .unwrap();
        assert_eq!(gpu.launches.lock().unwrap().len(), 6);
    }

    /// The thread's last report names the device of each launch, also when launches alternate
    /// between devices.
    #[test]
    fn the_last_report_names_the_device_of_the_last_launch() {
        let (_gpu, device) = mock();
        let host = Device::host();
        let named = || crate::last_launch().unwrap().device;
        scope(|s| {
            let (a, h) = (s.stream(&device)?, s.stream(&host)?);
            let (on_mock, on_host) = (a.alloc_zeroed::<u32>(8)?, h.alloc_zeroed::<u32>(8)?);
            for _ in 0..2 {
                enqueue_fill(&a, on_mock)?;
                assert_eq!(named(), "mock GPU");
                enqueue_fill(&h, on_host)?;
                assert_eq!(named(), host.name());
            }
            Ok(())
        })
        .unwrap();
        assert_ne!(host.name(), "mock GPU");
    }

    /// The launch kept per thread notes its kernel on each stream it is queued on, and again
    /// after each synchronize: a panic in a later launch, on either stream, is reported.
    #[test]
    fn a_panic_in_an_enqueued_launch_is_reported_by_its_own_stream() {
        let (gpu, device) = mock();
        let failed = |synchronized: Result<()>| match synchronized {
            Err(Error::KernelFailed { kernel, .. }) => assert_eq!(kernel, "fill"),
            other => panic!("expected KernelFailed, got {other:?}"),
        };
        scope(|s| {
            let (a, b) = (s.stream(&device)?, s.stream(&device)?);
            let out = a.alloc_zeroed::<u32>(8)?;
            enqueue_fill(&a, out)?;
            enqueue_fill(&a, out)?;
            gpu.panic_next_launch(record());
            enqueue_fill(&b, out)?;
            failed(b.synchronize());
            a.synchronize()?;
            gpu.panic_next_launch(record());
            enqueue_fill(&a, out)?;
            failed(a.synchronize());
            Ok(())
        })
        .unwrap();
    }
}
