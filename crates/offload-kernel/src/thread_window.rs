//! A thread's window into a shared array: its own slot and the `AHEAD` slots after it, checked
//! once against the array's length.
//!
//! [`SharedSlice`]'s `write_mine` and `read` check each index, and in a loop with a barrier the
//! compiler keeps those checks in the loop as branches (LLVM does not unswitch loops holding
//! convergent calls). A [`ThreadWindow`] is made once, before the loop, from a shared array that
//! must hold a slot per thread of the block plus `AHEAD` more; since every thread's linear index
//! in the block is below the block's thread count, each slot `mine + offset` with
//! `offset <= AHEAD` is then in bounds, and the offsets, constants in the usual code, are
//! compared with `AHEAD` at compile time.

use crate::SharedSlice;

/// The calling thread's slot of a shared array and the `AHEAD` slots after it, all in bounds:
/// made by [`SharedSlice::thread_window`].
#[derive(Clone, Copy)]
pub struct ThreadWindow<T, const AHEAD: usize> {
    mine: *mut T,
}

impl<T: Copy> SharedSlice<T> {
    /// The calling thread's window of this array: its slot (its linear index in the block) and
    /// the `AHEAD` slots after it. Checks here, once, that the array holds a slot per thread of
    /// the block plus `AHEAD` (panics otherwise), so that the window's accesses need no check.
    #[inline(always)]
    #[track_caller]
    pub fn thread_window<const AHEAD: usize>(&self) -> ThreadWindow<T, AHEAD> {
        let block = crate::block_dim();
        let threads = block.count() as usize;
        assert!(
            threads <= self.len() && self.len() - threads >= AHEAD,
            "shared array too short for a slot per thread and the slots ahead"
        );
        let mine = crate::thread_idx().linear_in(block);
        // SAFETY: mine < threads <= len: in bounds of the array.
        let mine = unsafe { self.as_ptr().add(mine) };
        ThreadWindow { mine }
    }
}

impl<T: Copy, const AHEAD: usize> ThreadWindow<T, AHEAD> {
    /// Store `value` at the calling thread's own slot. Safe: no two threads of a block have the
    /// same slot; the threads that read it afterwards carry the duty to synchronise first.
    #[inline(always)]
    pub fn write_mine(&self, value: T) {
        // SAFETY: in bounds (checked when the window was made); this slot is this thread's alone
        // among safe writers.
        unsafe { self.mine.write(value) }
    }

    /// Slot `mine + offset` (`offset <= AHEAD`, checked: a compile-time compare for a constant
    /// offset).
    ///
    /// # Safety
    /// The slot was written by this block, and no other thread writes it between the last barrier
    /// and the next one (see [`SharedSlice`]'s rule).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, offset: usize) -> T {
        assert!(offset <= AHEAD, "offset beyond the thread window");
        // SAFETY: in bounds (checked when the window was made, and offset <= AHEAD); no racing
        // write per the caller's contract.
        unsafe { self.mine.add(offset).read() }
    }

    /// Store `value` at slot `mine + offset` (`offset <= AHEAD`, checked as in
    /// [`read`](Self::read)).
    ///
    /// # Safety
    /// No other thread reads or writes the slot between the last barrier and the next one.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, offset: usize, value: T) {
        assert!(offset <= AHEAD, "offset beyond the thread window");
        // SAFETY: in bounds as in `read`; no racing access per the caller's contract.
        unsafe { self.mine.add(offset).write(value) }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::{Dim3, SharedSlice};
    use std::vec;

    fn thread(t: u32, block: Dim3) -> ThreadContext {
        ThreadContext {
            thread_idx: Dim3::new(t % block.x, t / block.x % block.y, t / (block.x * block.y)),
            block_idx: Dim3::new(0, 0, 0),
            block_dim: block,
            grid_dim: Dim3::new(1, 1, 1),
            warp_size: 32,
        }
    }

    #[test]
    fn each_thread_writes_its_linear_slot_and_reads_ahead() {
        let block = Dim3::new(3, 2, 2);
        let mut slots = vec![0u32; 12 + 2];
        // SAFETY: `slots` outlives every use of the view; the threads run one by one.
        let shared = unsafe { SharedSlice::from_raw(slots.as_mut_ptr(), slots.len()) };
        for t in 0..12 {
            with_thread(thread(t, block), || {
                let w = shared.thread_window::<2>();
                w.write_mine(100 + t);
                if t == 11 {
                    // SAFETY: the slots after the last thread's are no thread's own.
                    unsafe { (w.write(1, 200), w.write(2, 201)) };
                }
            });
        }
        assert_eq!(&slots[..12], &(100..112).collect::<std::vec::Vec<_>>()[..]);
        assert_eq!(&slots[12..], &[200, 201]);
        for t in 0..12 {
            with_thread(thread(t, block), || {
                let w = shared.thread_window::<2>();
                // SAFETY: every slot was written above; nothing writes now.
                let got = unsafe { [w.read(0), w.read(1), w.read(2)] };
                assert_eq!(
                    got,
                    [
                        slots[t as usize],
                        slots[t as usize + 1],
                        slots[t as usize + 2]
                    ]
                );
            });
        }
    }

    /// Runs `f` as thread `t` of a block of 4 threads, over a shared array of `len` slots.
    fn in_block_of_four(t: u32, len: usize, f: impl FnOnce(&SharedSlice<f32>)) {
        let mut slots = vec![0f32; len];
        // SAFETY: `slots` outlives the view.
        let shared = unsafe { SharedSlice::from_raw(slots.as_mut_ptr(), slots.len()) };
        with_thread(thread(t, Dim3::new(4, 1, 1)), || f(&shared));
    }

    #[test]
    #[should_panic(expected = "shared array too short")]
    fn an_array_without_the_slots_ahead_panics_when_the_window_is_made() {
        in_block_of_four(0, 4 + 1, |shared| {
            let _ = shared.thread_window::<2>();
        });
    }

    #[test]
    #[should_panic(expected = "shared array too short")]
    fn an_array_shorter_than_the_block_panics() {
        in_block_of_four(0, 3, |shared| {
            let _ = shared.thread_window::<0>();
        });
    }

    #[test]
    #[should_panic(expected = "offset beyond the thread window")]
    fn an_offset_beyond_the_window_panics() {
        in_block_of_four(3, 4 + 1, |shared| {
            let w = shared.thread_window::<1>();
            // SAFETY: single thread.
            let _ = unsafe { w.read(2) };
        });
    }
}
