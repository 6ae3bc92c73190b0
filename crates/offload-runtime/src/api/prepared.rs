//! Launches prepared once: a launch's shape, chosen and checked against the device and the
//! kernel's entry, and the entry itself, kept per thread for the next launches of the same kernel
//! on the same device with the same settings and, for a default grid, the same element count. A
//! loop of launches then neither sizes and checks its grid nor looks its entry up under the
//! device's lock again: only the checks that depend on the arguments themselves run per launch
//! (refused arguments, shared device memory, the arguments' devices). A launch on a stream also
//! finds there its last parameters, to write the next ones over in their layout
//! (`crate::api::param_layout`), and when it last noted its kernel on a stream (`noted`), as a launch
//! prepared with `crate::api::prepared_enqueue` keeps them in its handle.
//!
//! A key names the device's loaded code by its generation (`Loaded::generation`), unique in the
//! process and renewed when the device is released, so an entry of code unloaded since, or of a
//! device gone, is never found again.

use crate::api::param_layout::KeptParams;
use crate::mapping::kernel::Kernel;
use crate::mapping::loaded::Entry;
use crate::plugins::Shape;
use crate::Result;
use offload_kernel::Dim3;
use std::cell::RefCell;

/// What decides a launch's shape and entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// The kernel's descriptor, by address.
    pub kernel: usize,
    /// The generation of the device's loaded code.
    pub code: u64,
    pub grid: Option<Dim3>,
    pub block: Option<Dim3>,
    pub dynamic_shared: u32,
    /// The elements a default grid covers and their size (zero when the grid is given).
    pub items: (u64, u64),
}

impl Key {
    pub fn kernel(kernel: &'static Kernel) -> usize {
        kernel as *const Kernel as usize
    }
}

/// A launch kept for the next ones with the same key (per thread here, or in a handle of
/// `crate::api::prepared_enqueue`).
pub(crate) struct KeptLaunch {
    pub shape: Shape,
    pub entry: Entry,
    /// The last parameters a launch on a stream packed.
    pub params: KeptParams,
    /// For `Queue::note_launched`: the stream's list of kernels under which this launch's kernel
    /// was noted last.
    pub noted: u64,
}

impl KeptLaunch {
    /// A launch of `shape` and `entry` that has packed no parameters and noted nothing yet.
    pub(crate) fn new((shape, entry): (Shape, Entry)) -> Self {
        KeptLaunch {
            shape,
            entry,
            params: KeptParams::default(),
            noted: u64::MAX,
        }
    }
}

/// Launches kept per thread: enough for the few kernels a loop alternates between.
const SLOTS: usize = 4;

#[derive(Default)]
struct Kept {
    slots: [Option<(Key, KeptLaunch)>; SLOTS],
    /// The slot the next new launch replaces.
    next: usize,
}

impl Kept {
    #[inline]
    fn find(&mut self, key: &Key) -> Option<&mut KeptLaunch> {
        self.slots.iter_mut().find_map(|slot| match slot {
            Some((kept_key, kept)) if kept_key == key => Some(kept),
            _ => None,
        })
    }

    /// Keep the launch that `prepare` gives for `key` in place of the oldest (out of line: a
    /// loop of launches finds its own).
    #[inline(never)]
    fn keep(
        &mut self,
        key: Key,
        prepare: impl FnOnce() -> Result<(Shape, Entry)>,
    ) -> Result<&mut KeptLaunch> {
        let prepared = prepare()?;
        let slot = self.next;
        self.next = (slot + 1) % SLOTS;
        let (_, kept) = self.slots[slot].insert((key, KeptLaunch::new(prepared)));
        Ok(kept)
    }
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

/// Run `launch` with the launch of `key`: kept from an earlier launch of this thread, else from
/// `prepare`, then kept (only when it succeeded). While the thread's kept launches are in use (a
/// launch made inside another's, as a rayon worker waiting for the host device's blocks may
/// run), and during the thread's teardown, with one prepared for this launch alone. Both
/// closures only borrow what they use (`Copy`): the path that finds no kept launches calls
/// them without taking them back out of the one that does.
#[inline]
pub(crate) fn with_kept<R>(
    key: &Key,
    prepare: impl FnOnce() -> Result<(Shape, Entry)> + Copy,
    launch: impl FnOnce(&mut KeptLaunch) -> Result<R> + Copy,
) -> Result<R> {
    KEPT.try_with(|kept| match kept.try_borrow_mut() {
        Ok(mut kept) => match kept.find(key) {
            Some(found) => launch(found),
            None => kept.keep(*key, prepare).and_then(launch),
        },
        Err(_) => once(prepare, launch),
    })
    .unwrap_or_else(|_| once(prepare, launch))
}

/// `launch` with a launch that `prepare` gives for it alone.
#[cold]
fn once<R>(
    prepare: impl FnOnce() -> Result<(Shape, Entry)>,
    launch: impl FnOnce(&mut KeptLaunch) -> Result<R>,
) -> Result<R> {
    launch(&mut KeptLaunch::new(prepare()?))
}
