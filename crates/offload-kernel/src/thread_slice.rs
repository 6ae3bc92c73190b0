//! The race-free view of a `&mut [T]` kernel parameter.
//!
//! Every GPU thread of a launch receives the same output slice. Handing each of them a
//! `&mut [T]` would alias mutable references across threads, which Rust forbids and which lets
//! safe code race. A kernel therefore sees a `ThreadSlice`: safe code reaches only the elements
//! this thread owns (its global id, and with a grid-stride loop every `global_threads()`-th
//! element after it), so no two threads of one launch can touch the same element, whatever the
//! launch shape. Free-form indexed access exists, but is `unsafe`.
//!
//! The safe view is a grid-stride loop, so every element is covered exactly once whatever the
//! grid: a kernel's results never depend on its launch shape, and the runtime is free to choose
//! the fastest shape.
//!
//! A sub-range view ([`ThreadSlice::slice`], [`ThreadSlice::split_at`]) keeps the owners that
//! [`ThreadSlice::iter_mine`] gives in the launch's whole slice: element `i` of the parameter
//! belongs to the same thread whichever view reaches it, so the `iter_mine` loops of views taken
//! by different threads, of different ranges, never race with each other or with the
//! parameter's own. (16-byte updates share out chunks by a rule of their own, so they take a
//! parameter of their own: `#[wide]`, a [`WideSlice`](crate::WideSlice) in the body.)

use crate::index::{slice_len, GridStride};
use crate::output_saving::{before_writing, unnamed_access};
use core::marker::PhantomData;
use core::ops::{Bound, RangeBounds};

/// What a kernel sees of a `&mut [T]` parameter: the launch's output, of which safe code
/// reaches only the elements this thread owns (see the module docs).
pub struct ThreadSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    /// Index, in the kernel parameter this view was cut from, of this view's element 0: ownership
    /// follows the parameter's indices (`(offset + i) % global_threads()`), not the view's.
    offset: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> ThreadSlice<'a, T> {
    /// Wrap the output memory of one launch.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes for `'a`, and every thread of the
    /// launch must receive its view of the same memory through this constructor only (the
    /// kernel attribute does this), so that ownership by global id keeps the threads disjoint.
    #[inline(always)]
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        ThreadSlice {
            ptr,
            len,
            offset: 0,
            _borrow: PhantomData,
        }
    }

    /// Length of the whole slice (all threads' elements).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every element this thread owns in a grid-stride loop: indices `global_id()`,
    /// `global_id() + global_threads()`, … below `len()`. Together the threads of a launch
    /// cover the whole slice exactly once, whatever the grid and block sizes.
    ///
    /// In a view from [`slice`](Self::slice) the indices are the view's own (0 is its first
    /// element), and the elements are those this thread owns in the whole parameter.
    #[inline(always)]
    pub fn iter_mine(&mut self) -> MineIter<'_, T> {
        let indices = self.mine_indices();
        before_writing(self.ptr, &indices);
        MineIter {
            ptr: self.ptr,
            indices,
            _borrow: PhantomData,
        }
    }

    /// The indices of [`iter_mine`](Self::iter_mine).
    #[inline(always)]
    pub(crate) fn mine_indices(&self) -> GridStride {
        // SAFETY: the view's memory holds len elements (`from_raw_parts`).
        GridStride::mine(unsafe { slice_len::<T>(self.len) }, self.offset)
    }

    /// The first index of this view that the calling thread owns, and the stride to its next
    /// ones (`global_threads()`): ownership follows the parameter's indices.
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    #[inline(always)]
    pub(crate) fn first_mine(&self) -> (usize, usize) {
        use crate::index::{global_id, global_threads};
        let (id, stride) = (global_id(), global_threads());
        // The first view index whose parameter index is congruent to this thread's id (no
        // division for whole parameters: 64-bit division is slow on GPUs).
        let next = if self.offset == 0 {
            id
        } else {
            match self.offset % stride {
                phase if id >= phase => id - phase,
                phase => id + stride - phase,
            }
        };
        (next, stride)
    }

    /// Index in the kernel parameter of this view's element 0.
    #[inline(always)]
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// The elements `range` of this slice as a slice of their own (indices from 0), for writing
    /// part of an output. Safe: every element keeps its owner, so the view's
    /// [`iter_mine`](Self::iter_mine) yields exactly the elements of `range` that this thread
    /// owns in `self`, and threads that cut different ranges still never share an element.
    ///
    /// # Panics
    /// If `range` is out of bounds or decreasing, at the caller's location.
    #[inline(always)]
    #[track_caller]
    pub fn slice(&mut self, range: impl RangeBounds<usize>) -> ThreadSlice<'_, T> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1).expect("range start overflows"),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1).expect("range end overflows"),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        assert!(start <= end, "slice range starts after its end");
        assert!(end <= self.len, "slice range out of bounds");
        ThreadSlice {
            // SAFETY: start <= len, so the pointer stays within (or one past) the slice.
            ptr: unsafe { self.ptr.add(start) },
            len: end - start,
            offset: self.offset + start,
            _borrow: PhantomData,
        }
    }

    /// The two views `..mid` and `mid..` (see [`slice`](Self::slice)), both usable at once.
    ///
    /// # Panics
    /// If `mid > len()`, at the caller's location.
    #[inline(always)]
    #[track_caller]
    pub fn split_at(&mut self, mid: usize) -> (ThreadSlice<'_, T>, ThreadSlice<'_, T>) {
        assert!(mid <= self.len, "split_at index out of bounds");
        let view = |start: usize, len: usize| ThreadSlice {
            // SAFETY: start <= len: within (or one past) the slice.
            ptr: unsafe { self.ptr.add(start) },
            len,
            offset: self.offset + start,
            _borrow: PhantomData,
        };
        (view(0, mid), view(mid, self.len - mid))
    }

    /// Raw pointer to element 0, for kernels that manage ownership themselves. (On the host
    /// backend, a kernel that takes it has its outputs copied whole before its launches, as
    /// one that calls [`at`](Self::at): their writes cannot be saved as they come.)
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        unnamed_access();
        self.ptr
    }

    /// Element 0, for this crate's ownership loops, which name the elements they write
    /// (`output_saving`) before writing them.
    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }

    /// Any element, by index (bounds-checked: out of range panics at the caller's location).
    ///
    /// # Safety
    /// Within one launch no other thread may read or write element `i` while this reference is
    /// used: two threads that both reach one element are a data race.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn at(&mut self, i: usize) -> &mut T {
        unnamed_access();
        assert!(i < self.len, "index out of bounds");
        &mut *self.ptr.add(i)
    }
}

/// Grid-stride iterator over the elements of a [`ThreadSlice`] that this thread owns.
pub struct MineIter<'s, T> {
    ptr: *mut T,
    indices: GridStride,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<'s, T> Iterator for MineIter<'s, T> {
    type Item = (usize, &'s mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.indices.next()?;
        // SAFETY: i < len; each index is yielded once per iterator and belongs to the threads
        // of this call alone (i ≡ global_id mod global_threads).
        Some((i, unsafe { &mut *self.ptr.add(i) }))
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::vec;
    use std::vec::Vec;

    /// Runs `body` as each thread of a one-block launch of `threads` threads in turn, on a view of
    /// `out`; returns which thread wrote each element (`u32::MAX`: none).
    fn owners(threads: u32, len: usize, body: impl Fn(&mut ThreadSlice<'_, u32>, u32)) -> Vec<u32> {
        let mut out = vec![u32::MAX; len];
        for t in 0..threads {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(threads, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
                warp_size: 32,
            };
            with_thread(ctx, || {
                // SAFETY: `out` is borrowed mutably for the call; the threads run one by one.
                let mut view = unsafe { ThreadSlice::from_raw_parts(out.as_mut_ptr(), len) };
                body(&mut view, t);
            });
        }
        out
    }

    #[test]
    fn sub_range_views_keep_the_owners_of_the_whole_slice() {
        for threads in [1, 3, 8] {
            for (start, end) in [(0, 0), (0, 20), (5, 17), (7, 8), (19, 20)] {
                let got = owners(threads, 20, |out, t| {
                    let mut view = out.slice(start..end);
                    for (i, e) in view.iter_mine() {
                        assert_eq!(*e, u32::MAX, "element {} reached twice", start + i);
                        *e = t;
                    }
                });
                for (i, &owner) in got.iter().enumerate() {
                    let want = if (start..end).contains(&i) {
                        i as u32 % threads
                    } else {
                        u32::MAX
                    };
                    assert_eq!(
                        owner, want,
                        "{threads} threads, {start}..{end}: element {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn nested_views_and_split_halves_keep_the_owners_too() {
        let got = owners(4, 30, |out, t| {
            let (mut low, mut high) = out.split_at(11);
            let mut inner = high.slice(3..=9);
            for (_, e) in inner.slice(2..).iter_mine() {
                *e = t;
            }
            for (_, e) in low.slice(..4).iter_mine() {
                *e = t;
            }
        });
        for (i, &owner) in got.iter().enumerate() {
            let written = i < 4 || (16..=20).contains(&i);
            assert_eq!(
                owner,
                if written { i as u32 % 4 } else { u32::MAX },
                "element {i}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "slice range out of bounds")]
    fn a_range_past_the_end_panics() {
        owners(1, 4, |out, _| {
            out.slice(2..5);
        });
    }

    /// Ranges of threads run as one call each reach, through views at any offset, exactly the
    /// elements that their threads own one per call.
    #[test]
    fn ranges_run_as_one_call_reach_their_threads_elements() {
        use crate::index::host_context::{run_threads, ThreadRange};
        let (threads, len) = (7u32, 40);
        for (start, end) in [(0, 40), (3, 25), (11, 40), (6, 7), (20, 20)] {
            for cuts in [&[0, 3, 7][..], &[0, 1, 2, 6, 7], &[0, 7]] {
                let mut out = vec![u32::MAX; len];
                for (r, pair) in cuts.windows(2).enumerate() {
                    let range = ThreadRange {
                        grid: Dim3::new(1, 1, 1),
                        block: Dim3::new(threads, 1, 1),
                        first: pair[0],
                        end: pair[1],
                        warp_size: 32,
                        as_one: true,
                    };
                    run_threads(range, true, || {
                        // SAFETY: `out` is borrowed mutably for the call; the ranges run one
                        // by one.
                        let mut whole =
                            unsafe { ThreadSlice::from_raw_parts(out.as_mut_ptr(), len) };
                        for (i, e) in whole.slice(start..end).iter_mine() {
                            assert_eq!(*e, u32::MAX, "element {} reached twice", start + i);
                            *e = r as u32;
                        }
                    });
                }
                for (i, &got) in out.iter().enumerate() {
                    let owner = i as u64 % threads as u64;
                    let want = match (start..end).contains(&i) {
                        true => cuts.windows(2).position(|p| (p[0]..p[1]).contains(&owner)),
                        false => None,
                    };
                    assert_eq!(
                        got,
                        want.map_or(u32::MAX, |r| r as u32),
                        "{start}..{end} {cuts:?}: {i}"
                    );
                }
            }
        }
    }
}
