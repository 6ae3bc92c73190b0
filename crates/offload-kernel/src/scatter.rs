//! Indirect writes `out[index[i]] = …` through an index the caller vouches for.
//!
//! A scatter gives each thread the positions `i` of `index` it owns in a grid-stride loop and a
//! mutable reference to `out[index[i]]`. Two threads reach the same output element only if two
//! positions of `index` hold the same value, which the kernel cannot check cheaply (the index is
//! data, and a device-wide duplicate check costs a pass over a bitmap), so it rests on one
//! contract: the index is injective (a permutation, or part of one). Two ways to state it:
//! - a kernel parameter `#[scatter(index)] out: &mut [T]` is a [`Scattered`] in the body, reached
//!   only through `index` (a `&[u32]`, `&[u64]` or `&[usize]` parameter), and the kernel's
//!   launchers are `unsafe` with the contract: the caller, who owns the data, vouches for it;
//! - inside a kernel, `unsafe { out.scatter_mine(&index) }` on a `ThreadSlice`, when the kernel
//!   itself knows the index is injective (one it computed).

use crate::index::{slice_len, GridStride};
use crate::thread_slice::ThreadSlice;
use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// Integer types an index can hold (`u32`, `u64`, `usize`).
pub trait ScatterIndex: Copy + sealed::Sealed {
    /// The value as an index (`usize` is 64 bits wide on every target `offload` supports).
    fn position(self) -> usize;
}

macro_rules! scatter_index {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl ScatterIndex for $t {
            #[inline(always)]
            fn position(self) -> usize {
                self as usize
            }
        }
    )*};
}
scatter_index!(u32, u64, usize);

impl<'a, T> ThreadSlice<'a, T> {
    /// For each position `i` of `index` this thread owns (grid-stride, as
    /// [`grid_stride`](crate::grid_stride)`(index.len())`), `(i, &mut self[index[i]])`.
    /// An index value past the end of `self` panics, at the `for` loop that reached it.
    ///
    /// # Safety
    /// For the whole launch, no value occurs twice in `index` (it is injective: a permutation
    /// of `0..self.len()`, or part of one), and while any thread scatters into this output no
    /// thread reaches it any other way (`iter_mine`, `at`, a view, a scatter through another
    /// index): those give its elements other owners.
    #[inline(always)]
    pub unsafe fn scatter_mine<'s, I: ScatterIndex>(
        &'s mut self,
        index: &'s [I],
    ) -> Scatter<'s, T, I> {
        Scatter {
            ptr: self.as_mut_ptr(),
            len: self.len(),
            index,
            // SAFETY: the length of a slice.
            indices: GridStride::mine(unsafe { slice_len::<I>(index.len()) }, 0),
            _borrow: PhantomData,
        }
    }
}

/// A `#[scatter(index)] &mut [T]` kernel parameter: element `index[i]` belongs to the thread
/// that owns position `i` of `index` (grid-stride), for the whole launch.
pub struct Scattered<'a, T, I> {
    ptr: *mut T,
    len: usize,
    index: &'a [I],
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T, I: ScatterIndex> Scattered<'a, T, I> {
    /// The view of a kernel parameter scattered through `index` (the kernel attribute).
    ///
    /// # Safety
    /// `slice` is a kernel parameter's whole view; every thread of the launch converts its own
    /// view of it with the same `index`, which holds no value twice.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn from_thread_slice(mut slice: ThreadSlice<'a, T>, index: &'a [I]) -> Self {
        Scattered {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            index,
            _borrow: PhantomData,
        }
    }

    /// Elements of the output.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the output has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// For each position `i` of the index this thread owns (grid-stride), `(i, &mut
    /// out[index[i]])`. An index value past the end of the output panics, at the `for` loop
    /// that reached it.
    #[inline(always)]
    pub fn iter_mine(&mut self) -> Scatter<'_, T, I> {
        Scatter {
            ptr: self.ptr,
            len: self.len,
            index: self.index,
            // SAFETY: the length of a slice.
            indices: GridStride::mine(unsafe { slice_len::<I>(self.index.len()) }, 0),
            _borrow: PhantomData,
        }
    }
}

/// Iterator of [`ThreadSlice::scatter_mine`] and [`Scattered::iter_mine`].
pub struct Scatter<'s, T, I> {
    ptr: *mut T,
    len: usize,
    index: &'s [I],
    /// The positions of `index` this thread owns.
    indices: GridStride,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<'s, T, I: ScatterIndex> Iterator for Scatter<'s, T, I> {
    type Item = (usize, &'s mut T);

    #[inline(always)]
    #[track_caller]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.indices.next()?;
        // SAFETY: the walk yields positions below `index.len()` only.
        let target = unsafe { self.index.get_unchecked(i) }.position();
        assert!(target < self.len, "scatter index out of bounds");
        // SAFETY: target < len; position i is this thread's alone (i ≡ global_id mod
        // global_threads) and, by `scatter_mine`'s contract, no other position holds `target`.
        Some((i, unsafe { &mut *self.ptr.add(target) }))
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::vec::Vec;

    fn scatter(threads: u32, index: &[u32], out: &mut [i64]) {
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
                let mut view = unsafe { ThreadSlice::from_raw_parts(out.as_mut_ptr(), out.len()) };
                // SAFETY: the tests' indices are permutations, and `view` is reached only here.
                for (i, slot) in unsafe { view.scatter_mine(index) } {
                    *slot = i as i64 * 10 + t as i64;
                }
            });
        }
    }

    #[test]
    fn each_position_lands_once_where_its_index_says() {
        let index: Vec<u32> = (0..23u32).map(|i| (i * 7) % 23).collect();
        for threads in [1, 4, 30] {
            let mut out = [-1i64; 23];
            scatter(threads, &index, &mut out);
            for (i, &target) in index.iter().enumerate() {
                let owner = i as i64 % threads as i64;
                assert_eq!(out[target as usize], i as i64 * 10 + owner);
            }
        }
    }

    #[test]
    #[should_panic(expected = "scatter index out of bounds")]
    fn an_index_past_the_end_panics() {
        scatter(2, &[0, 5], &mut [0; 3]);
    }
}
