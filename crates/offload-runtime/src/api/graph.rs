//! Record and replay: a sequence of launches queued on a stream once, recorded into a [`Graph`]
//! ([`crate::Stream::record_graph`]), and queued again as a whole with [`Graph::launch`], at a fraction of
//! the host cost of queueing each launch (on CUDA one `cuGraphLaunch` for all of them).
//!
//! Recording goes through the plugin interface: a plugin that records
//! ([`Backend::begin_recording`], CUDA's stream capture) keeps the launches itself; for the
//! others (the host CPU, liboffload) the launches are kept here, packed, and replayed one by one
//! on the stream's queue. Either way a replay runs what was recorded: each kernel with the
//! device data and the values it was given then.
//!
//! Safety rules: a recorded launch takes device-resident data (stream-scope [`DeviceSlice`]s,
//! `DeviceVec`s, data regions' handles, a reduction's target among them) and values only, never host slices, whose copies would
//! have to be redone with each replay. Launches are recorded through the handle that
//! `record_graph` gives its body (a `Stream<'scope, Records<'g>>`, see `crate::api::stream_mode`):
//! its `enqueue` borrows a `DeviceVec` (or a view of one) for the graph's lifetime `'g`, and the
//! rest for the stream's scope, which the graph cannot outlive, so everything a replay reaches is
//! alive. Only those launches are queued while recording: launches, uploads, downloads,
//! allocations, events and BLAS calls on the recording stream itself are refused. A replay is
//! ordered across streams as a launch is (see `crate::mapping::ordering`): it waits for the other streams'
//! conflicting uses of the data it uses. A kernel that panics in a replay is reported as a
//! queued launch is, by the next synchronization of the stream.
//!
//! [`DeviceSlice`]: crate::DeviceSlice

use crate::mapping::device::Device;
use crate::mapping::kernel::{uses_of, ArgData, Kernel, KernelArg};
use crate::mapping::loaded::{Entry, LoadedImage};
use crate::mapping::ordering::{Claim, Uses};
use crate::mapping::transfer::{kernel_failed, pack, HostData};
use crate::plugins::{Backend, DevicePtr, EntryHandle, PackedArgs, RecordedWork, Shape};
use crate::{Error, Result};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

/// Launches recorded on a stream by [`Stream::record_graph`], to queue again with [`Graph::launch`].
/// Lives within the stream's scope, and keeps the `DeviceVec`s it uses borrowed (`'g`).
///
/// [`Stream::record_graph`]: crate::Stream::record_graph
pub struct Graph<'scope, 'g> {
    queue: Arc<dyn ReplayQueue>,
    /// Invariant, as the stream's: the graph cannot be carried beyond the scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    /// The borrows of the recorded launches' `DeviceVec`s.
    _borrows: PhantomData<&'g ()>,
    work: Work,
    /// The recorded kernels with their images: whose panic records the stream reads after a
    /// replay.
    kernels: Vec<(&'static str, Arc<LoadedImage>)>,
    /// The uses of the tracked device data the recorded launches take (each once, written if
    /// any launch writes it), ordered at each replay.
    uses: Vec<RecordedUse>,
}

/// The uses of one argument of a recorded launch, and whether the launch writes the data.
struct RecordedUse {
    uses: NonNull<Uses>,
    write: bool,
}

// SAFETY: `Uses` is `Sync` (a mutex); the pointer is only read through while the data it belongs
// to is borrowed (see `Graph::launch`).
unsafe impl Send for RecordedUse {}
// SAFETY: as `Send`.
unsafe impl Sync for RecordedUse {}

/// What replays the launches.
enum Work {
    /// The plugin's recording (a CUDA graph).
    Plugin(Box<dyn RecordedWork>),
    /// The launches themselves, for plugins that do not record.
    Launches(Vec<RecordedLaunch>),
}

/// One launch kept for a replay: what the plugin's `launch` takes.
struct RecordedLaunch {
    kernel: &'static str,
    entry: EntryHandle,
    shape: Shape,
    params: PackedArgs,
}

/// What a recording and its graph need of the stream that recorded it (its queue, implemented
/// by the stream).
pub(crate) trait ReplayQueue: Send + Sync {
    /// The stream's device.
    fn device(&self) -> &Device;
    /// The stream's queue on its device.
    fn backend(&self) -> &Arc<dyn Backend>;
    /// `bytes` of zeroed device memory for `kernel`'s reduction scratch, kept for the stream's
    /// scope, which every replay is in. Zeroed on the device's own queue, which every replay
    /// waits for ([`Graph::launch`]): the stream's own queue is recording.
    fn scope_scratch(&self, kernel: &'static str, bytes: usize) -> Result<DevicePtr>;
    /// Order the work queued from now on after the work queued on the device's own queue.
    fn after_device_queue(&self) -> Result<()>;
    /// Note kernels queued on the stream, whose panic records its next synchronization reads.
    fn launched(&self, kernels: &[(&'static str, Arc<LoadedImage>)]);
}

/// A recording in progress on a stream's queue.
pub(crate) struct Recording {
    /// The plugin records (its queue is capturing): launches are queued as usual.
    by_plugin: bool,
    launches: Vec<RecordedLaunch>,
    kernels: Vec<(&'static str, Arc<LoadedImage>)>,
    uses: Vec<RecordedUse>,
}

impl Recording {
    /// Start recording on `queue`.
    pub(crate) fn begin(queue: &dyn Backend) -> Result<Recording> {
        Ok(Recording {
            by_plugin: queue.begin_recording()?,
            launches: Vec::new(),
            kernels: Vec::new(),
            uses: Vec::new(),
        })
    }

    /// Record a launch of `kernel` (its `entry` on the device of `stream`, the recording
    /// stream) in `shape` with `args`, all of them device-resident data or values, given to the
    /// recording handle's `enqueue` (so borrowed for the graph's lifetime or the scope's).
    pub(crate) fn add(
        &mut self,
        stream: &dyn ReplayQueue,
        kernel: &'static Kernel,
        entry: &Entry,
        shape: Shape,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        // Host slices are refused here, whether the device would copy them or (the host CPU)
        // use them in place: the rule is the same on every device.
        let host_slice = args.iter().position(|a| {
            matches!(a.data, ArgData::Slice { .. } | ArgData::SliceMut { .. })
                && a.data.slice_bytes() > 0
        });
        if let Some(index) = host_slice {
            return Err(Error::InvalidArgument {
                kernel: kernel.name,
                argument: kernel.params.get(index).copied().unwrap_or("?"),
                reason: "is host data, which a recorded launch cannot take (a replay would not \
                         copy it again): upload it first (Stream::upload, DeviceVec) and pass the \
                         device data"
                    .to_string(),
            });
        }
        // A reduction's scratch is allocated once, for every replay: the launch's last block
        // sets its counter back to zero (`offload_kernel::reduce::combine_launch`), so each
        // replay finds it as the first did.
        let (params, _) = pack(
            stream.device(),
            kernel.name,
            args,
            shape.grid.count(),
            |data| match data {
                HostData::Scratch { bytes } => stream.scope_scratch(kernel.name, bytes),
                _ => unreachable!("host slices with bytes were refused above"),
            },
        )?;
        if self.by_plugin {
            // SAFETY: `params` were packed from this kernel's launcher's arguments, all device
            // data borrowed for the graph's lifetime or the stream's scope, which every replay
            // of the recording is in.
            unsafe { stream.backend().launch(entry.handle, shape, &params) }
                .map_err(|e| kernel_failed(kernel.name, e))?;
        } else {
            self.launches.push(RecordedLaunch {
                kernel: kernel.name,
                entry: entry.handle,
                shape,
                params,
            });
        }
        self.kernels.push((kernel.name, entry.image.clone()));
        // Each piece of data once, so that a replay claims no more than the graph uses.
        for (uses, write) in uses_of(args) {
            let uses = NonNull::from(uses);
            match self.uses.iter_mut().find(|u| u.uses == uses) {
                Some(recorded) => recorded.write |= write,
                None => self.uses.push(RecordedUse { uses, write }),
            }
        }
        Ok(())
    }

    /// End the recording (also after a failure inside it, so that the plugin's queue stops
    /// recording): the graph of the stream whose queue is `queue`.
    pub(crate) fn end<'scope, 'g>(self, queue: Arc<dyn ReplayQueue>) -> Result<Graph<'scope, 'g>> {
        let work = if self.by_plugin {
            Work::Plugin(queue.backend().end_recording()?)
        } else {
            Work::Launches(self.launches)
        };
        Ok(Graph {
            queue,
            _scope: PhantomData,
            _borrows: PhantomData,
            work,
            kernels: self.kernels,
            uses: self.uses,
        })
    }
}

impl Graph<'_, '_> {
    /// Queue every recorded launch again on the stream that recorded them, in order, after the
    /// work queued on the stream so far (and on the device's own queue, as a launch on device
    /// data is) and after the other streams' conflicting uses of its device data. Returns at
    /// once; a kernel failure shows at the stream's next synchronization.
    pub fn launch(&self) -> Result<()> {
        self.queue.after_device_queue()?;
        let queue = self.queue.backend();
        // SAFETY: each use belongs to data that the recording handle's `enqueue` borrowed for
        // `'g` (a `DeviceVec`, a view of one) or for the scope (a `DeviceSlice`), both alive
        // while this graph is.
        let claim = Claim::of(
            self.uses
                .iter()
                .map(|u| (unsafe { u.uses.as_ref() }, u.write)),
        );
        claim.order_on(queue)?;
        match &self.work {
            // SAFETY: every launch recorded took device data borrowed for the graph's lifetime
            // or the stream's scope, which this graph does not outlive.
            Work::Plugin(recorded) => unsafe { recorded.replay() }?,
            Work::Launches(launches) => {
                for launch in launches {
                    // SAFETY: packed from the kernel's launcher's arguments when recorded, all
                    // device data still borrowed (as above).
                    unsafe { queue.launch(launch.entry, launch.shape, &launch.params) }
                        .map_err(|e| kernel_failed(launch.kernel, e))?;
                }
            }
        }
        claim.queued_on(queue);
        self.queue.launched(&self.kernels);
        Ok(())
    }

    /// How many launches it holds.
    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    /// Whether it holds no launch.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }
}
