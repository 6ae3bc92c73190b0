//! The host backend's side of the block model: what a GPU thread running on the CPU reaches
//! through thread-locals while its block runs.
//!
//! The host backend runs each GPU thread of a block as a coroutine on one OS thread. A thread
//! that must wait for others (a block barrier, a warp-wide operation) suspends itself with
//! [`suspend`]; the block's scheduler resumes it once every thread of its group still running
//! waits too. Per-block shared memory and the slots of [`exchange`] live in [`BlockResources`],
//! which the scheduler creates for each block.

use crate::SHARED_ALIGN;
use core::cell::{Cell, RefCell};
use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::vec::Vec;

/// Which threads a suspended GPU thread waits for: the other threads of its block that are still
/// running, or those of its warp (the `warp_size` threads of consecutive linear index in the
/// block, from the thread's context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Every thread of the block that has not returned (`sync_threads`).
    Block,
    /// The live threads of the caller's warp (warp operations).
    Warp,
}

/// Shared memory and exchange slots of the block that the current OS thread runs.
pub struct BlockResources {
    /// Static shared arrays: (address of the declaring site's marker, allocation).
    statics: RefCell<Vec<(usize, Allocation)>>,
    dynamic: Allocation,
    dynamic_len: usize,
    /// One slot per thread of the block, for [`exchange`].
    slots: std::boxed::Box<[Cell<Option<u64>>]>,
}

/// Zeroed, 16-byte aligned bytes owned by one block.
struct Allocation {
    ptr: *mut u8,
    layout: Layout,
}

impl Allocation {
    fn zeroed(bytes: usize) -> Allocation {
        let layout = Layout::from_size_align(bytes.max(1), SHARED_ALIGN).expect("valid layout");
        // SAFETY: the layout's size is at least 1.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            handle_alloc_error(layout);
        }
        Allocation { ptr, layout }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

impl BlockResources {
    /// Resources of a block of `threads` threads with `dynamic_bytes` of dynamic shared memory.
    pub fn new(threads: usize, dynamic_bytes: usize) -> BlockResources {
        BlockResources {
            statics: RefCell::new(Vec::new()),
            dynamic: Allocation::zeroed(dynamic_bytes),
            dynamic_len: dynamic_bytes,
            slots: (0..threads).map(|_| Cell::new(None)).collect(),
        }
    }
}

std::thread_local! {
    static BLOCK: Cell<*const BlockResources> = const { Cell::new(core::ptr::null()) };
    static SUSPEND: Cell<Option<*const dyn Fn(Group)>> = const { Cell::new(None) };
}

/// The unwind payload of a GPU thread that reached a barrier, a warp operation or shared memory
/// while running as a plain call (`host_context::run_threads`), outside the block scheduler: the
/// host backend puts the outputs back and runs the launch again on the scheduler.
#[derive(Debug)]
pub struct NeedsBlockModel;

#[cold]
#[inline(never)]
pub(crate) fn needs_block_model() -> ! {
    // `resume_unwind`: no panic hook, so no message on stderr for what is not an error.
    std::panic::resume_unwind(std::boxed::Box::new(NeedsBlockModel))
}

/// Whether the running GPU thread is a plain call, outside the block scheduler.
pub(crate) fn runs_plain() -> bool {
    crate::index::host_context::in_plain_calls() && BLOCK.with(Cell::get).is_null()
}

/// Make `block` the resources of the block this OS thread runs while `f` runs (the scheduler).
pub fn with_block<R>(block: &BlockResources, f: impl FnOnce() -> R) -> R {
    struct Restore(*const BlockResources);
    impl Drop for Restore {
        fn drop(&mut self) {
            BLOCK.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BLOCK.with(|b| b.replace(block)));
    f()
}

/// Run `f` as a GPU thread that suspends itself through `suspend` (the scheduler, inside the
/// thread's coroutine). `suspend(group)` must return once the thread may go on.
pub fn with_suspend<R>(suspend: &dyn Fn(Group), f: impl FnOnce() -> R) -> R {
    // SAFETY: only the lifetime is erased; the pointer is removed from the thread-local before
    // `suspend` goes out of scope (the guard below), and `suspend` re-installs it after each
    // switch, so it is only called while `with_suspend` runs.
    let erased: *const (dyn Fn(Group) + 'static) = unsafe { core::mem::transmute(suspend) };
    struct Restore(Option<*const dyn Fn(Group)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SUSPEND.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SUSPEND.with(|s| s.replace(Some(erased))));
    f()
}

fn current_block() -> &'static BlockResources {
    let block = BLOCK.with(|b| b.get());
    if block.is_null() && crate::index::host_context::in_plain_calls() {
        needs_block_model();
    }
    assert!(
        !block.is_null(),
        "shared memory and block synchronisation exist only inside a kernel launch"
    );
    // SAFETY: the scheduler keeps the resources alive while the block's threads run
    // (`with_block`), and GPU threads cannot outlive their block.
    unsafe { &*block }
}

/// Wait until every thread of `group` that has not returned waits too.
pub fn suspend(group: Group) {
    // Taken out while suspended, so that outside every GPU thread the hook is unset.
    let me = SUSPEND.with(|s| s.take());
    if me.is_none() && runs_plain() {
        needs_block_model();
    }
    let me = me.expect(
        "block synchronisation (barrier, warp operation) exists only inside a kernel launch",
    );
    // SAFETY: installed by `with_suspend`, whose frame is below this one on this coroutine.
    unsafe { (*me)(group) };
    SUSPEND.with(|s| s.set(Some(me)));
}

/// All threads of the calling thread's `group` contribute `value`, wait for each other, then see
/// every member's value: `read` gets one entry per member (lane order; `None` for members that
/// have returned). Two barriers: one before reading, one after, so that the slots can be reused.
pub fn exchange<R>(group: Group, value: u64, read: impl FnOnce(&[Option<u64>]) -> R) -> R {
    let block = current_block();
    let me = crate::thread_idx().linear_in(crate::block_dim());
    let range = match group {
        Group::Block => 0..block.slots.len(),
        Group::Warp => {
            let size = crate::index::host_context::warp_size() as usize;
            let first = me / size * size;
            first..(first + size).min(block.slots.len())
        }
    };
    block.slots[me].set(Some(value));
    suspend(group);
    let values: Vec<Option<u64>> = block.slots[range].iter().map(Cell::get).collect();
    let result = read(&values);
    suspend(group);
    block.slots[me].set(None);
    result
}

/// The block's copy of the static shared array declared at `site` (`bytes` bytes, zeroed when the
/// block starts).
pub fn static_shared(site: &'static u8, bytes: usize) -> *mut u8 {
    let block = current_block();
    let key = site as *const u8 as usize;
    let mut statics = block.statics.borrow_mut();
    if let Some((_, a)) = statics.iter().find(|(k, _)| *k == key) {
        return a.ptr;
    }
    let allocation = Allocation::zeroed(bytes);
    let ptr = allocation.ptr;
    statics.push((key, allocation));
    ptr
}

/// The block's dynamic shared memory: its address and its size in bytes.
pub fn dynamic_shared() -> (*mut u8, usize) {
    let block = current_block();
    (block.dynamic.ptr, block.dynamic_len)
}
