//! Launches prepared once: a launch's shape, chosen and checked against the device and the
//! kernel's entry, and the entry itself, kept per thread for the next launches of the same kernel
//! on the same device with the same settings and, for a default grid, the same element count. A
//! loop of launches then neither sizes and checks its grid nor looks its entry up under the
//! device's lock again: only the checks that depend on the arguments themselves run per launch
//! (refused arguments, shared device memory, the arguments' devices). A launch on a stream also
//! finds there its last parameters, to write the next ones over in their layout
//! (`crate::param_layout`), and when it last noted its kernel on a stream (`noted`), as a launch
//! prepared with `crate::prepared_enqueue` keeps them in its handle.
//!
//! A key names the device's loaded code by its generation (`Loaded::generation`), unique in the
//! process and renewed when the device is released, so an entry of code unloaded since, or of a
//! device gone, is never found again.

use crate::backend::Shape;
use crate::kernel::Kernel;
use crate::loaded::Entry;
use crate::param_layout::KeptParams;
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
/// `crate::prepared_enqueue`).
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

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

/// Run `launch` with the launch of `key`: kept from an earlier launch of this thread, else from
/// `prepare`, then kept (only when it succeeded). While the thread's kept launches are in use (a
/// launch made inside another's, as a rayon worker waiting for the host device's blocks may
/// run), and during the thread's teardown, with one prepared for this launch alone.
pub(crate) fn with_kept<R>(
    key: Key,
    prepare: impl FnOnce() -> Result<(Shape, Entry)>,
    launch: impl FnOnce(&mut KeptLaunch) -> Result<R>,
) -> Result<R> {
    let (mut prepare, mut launch) = (Some(prepare), Some(launch));
    let kept = KEPT.try_with(|kept| {
        let mut kept = kept.try_borrow_mut().ok()?;
        let kept = &mut *kept;
        let found = kept
            .slots
            .iter()
            .position(|slot| slot.as_ref().is_some_and(|(k, _)| *k == key));
        let slot = match found {
            Some(slot) => slot,
            None => {
                let prepared = match prepare.take().expect("not called yet")() {
                    Ok(prepared) => prepared,
                    Err(e) => return Some(Err(e)),
                };
                let slot = kept.next;
                kept.next = (slot + 1) % SLOTS;
                kept.slots[slot] = Some((key, KeptLaunch::new(prepared)));
                slot
            }
        };
        let (_, found) = kept.slots[slot].as_mut().expect("filled above");
        Some(launch.take().expect("not called yet")(found))
    });
    if let Ok(Some(done)) = kept {
        return done;
    }
    let prepared = prepare.take().expect("not called when nothing was kept")()?;
    let mut once = KeptLaunch::new(prepared);
    launch.take().expect("not called when nothing was kept")(&mut once)
}
