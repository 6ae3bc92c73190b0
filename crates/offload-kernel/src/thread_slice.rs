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

use crate::index::{global_id, global_threads};
use core::marker::PhantomData;

pub struct ThreadSlice<'a, T> {
    ptr: *mut T,
    len: usize,
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
            _borrow: PhantomData,
        }
    }

    /// Length of the whole slice (all threads' elements).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every element this thread owns in a grid-stride loop: indices `global_id()`,
    /// `global_id() + global_threads()`, … below `len()`. Together the threads of a launch
    /// cover the whole slice exactly once, whatever the grid and block sizes.
    #[inline(always)]
    pub fn iter_mine(&mut self) -> MineIter<'_, T> {
        MineIter {
            ptr: self.ptr,
            len: self.len,
            next: global_id(),
            stride: global_threads(),
            _borrow: PhantomData,
        }
    }

    /// Raw pointer to element 0, for kernels that manage ownership themselves.
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// Any element, by index (bounds-checked: out of range panics).
    ///
    /// # Safety
    /// Within one launch no other thread may read or write element `i` while this reference is
    /// used: two threads that both reach one element are a data race.
    #[inline(always)]
    pub unsafe fn at(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index out of bounds");
        &mut *self.ptr.add(i)
    }
}

/// Grid-stride iterator over the elements of a [`ThreadSlice`] that this thread owns.
pub struct MineIter<'s, T> {
    ptr: *mut T,
    len: usize,
    next: usize,
    stride: usize,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<'s, T> Iterator for MineIter<'s, T> {
    type Item = (usize, &'s mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i < self.len {
            self.next = i + self.stride;
            // SAFETY: i < len; each index is yielded once per iterator and belongs to this
            // thread alone (i ≡ global_id mod global_threads).
            Some((i, unsafe { &mut *self.ptr.add(i) }))
        } else {
            None
        }
    }
}
