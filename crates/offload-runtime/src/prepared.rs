//! Launches prepared once: a launch's shape, chosen and checked against the device and the
//! kernel's entry, and the entry itself, kept per thread for the next launches of the same kernel
//! on the same device with the same settings and, for a default grid, the same element count. A
//! loop of launches then neither sizes and checks its grid nor looks its entry up under the
//! device's lock again: only the checks that depend on the arguments themselves run per launch
//! (refused arguments, shared device memory, the arguments' devices).
//!
//! A key names the device's loaded code by its generation (`Loaded::generation`), unique in the
//! process and renewed when the device is released, so an entry of code unloaded since, or of a
//! device gone, is never found again.

use crate::backend::Shape;
use crate::kernel::Kernel;
use crate::loaded::Entry;
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

/// Launches kept per thread: enough for the few kernels a loop alternates between.
const SLOTS: usize = 4;

#[derive(Default)]
struct Kept {
    slots: [Option<(Key, Shape, Entry)>; SLOTS],
    /// The slot the next new launch replaces.
    next: usize,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

/// The shape and entry of a launch with `key`: kept from an earlier launch of this thread, else
/// from `prepare`, then kept (only when it succeeded).
pub(crate) fn shape_and_entry(
    key: Key,
    prepare: impl FnOnce() -> Result<(Shape, Entry)>,
) -> Result<(Shape, Entry)> {
    // During the thread's teardown nothing is kept.
    let found = KEPT.try_with(|kept| {
        kept.borrow()
            .slots
            .iter()
            .flatten()
            .find(|(k, ..)| *k == key)
            .map(|(_, shape, entry)| (*shape, entry.clone()))
    });
    if let Ok(Some(found)) = found {
        return Ok(found);
    }
    let (shape, entry) = prepare()?;
    let _ = KEPT.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        let slot = kept.next;
        kept.next = (slot + 1) % SLOTS;
        kept.slots[slot] = Some((key, shape, entry.clone()));
    });
    Ok((shape, entry))
}
