//! Element-wise kernels with two outputs: [`ThreadSlice::iter_mine_with`] walks the elements
//! this thread owns in two output slices at once.
//!
//! Zipping two [`ThreadSlice::iter_mine`] iterators gives the same pairs, but the compiler keeps
//! the second iterator's pending item in memory (a local-memory store and load per element on
//! the GPU): a physics update with two outputs ran 1.2–1.5× slower than CUDA C that way.

use crate::index::{global_id, global_threads};
use crate::thread_slice::ThreadSlice;
use core::marker::PhantomData;

impl<'a, T> ThreadSlice<'a, T> {
    /// `(i, &mut self[i], &mut other[i])` for every index `i` this thread owns (as in
    /// [`iter_mine`](Self::iter_mine)) below the shorter of the two lengths.
    #[inline(always)]
    pub fn iter_mine_with<'s, U>(
        &'s mut self,
        other: &'s mut ThreadSlice<'_, U>,
    ) -> MineWith<'s, T, U> {
        MineWith {
            first: self.as_mut_ptr(),
            second: other.as_mut_ptr(),
            len: self.len().min(other.len()),
            next: global_id(),
            stride: global_threads(),
            _borrow: PhantomData,
        }
    }
}

/// Iterator of [`ThreadSlice::iter_mine_with`].
pub struct MineWith<'s, T, U> {
    first: *mut T,
    second: *mut U,
    len: usize,
    next: usize,
    stride: usize,
    _borrow: PhantomData<(&'s mut [T], &'s mut [U])>,
}

impl<'s, T, U> Iterator for MineWith<'s, T, U> {
    type Item = (usize, &'s mut T, &'s mut U);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i < self.len {
            self.next = i + self.stride;
            // SAFETY: i is below both lengths; each index is yielded once per iterator and
            // belongs to this thread alone (i ≡ global_id mod global_threads), and both slices
            // are borrowed mutably for 's.
            Some((i, unsafe { &mut *self.first.add(i) }, unsafe {
                &mut *self.second.add(i)
            }))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;

    #[test]
    fn pairs_cover_the_shorter_length_once_across_threads() {
        let (mut a, mut b) = ([0u32; 10], [0u8; 7]);
        for t in 0..3 {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(3, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
            };
            with_thread(ctx, || {
                // SAFETY: both arrays are borrowed mutably here; the threads run one by one.
                let mut x = unsafe { ThreadSlice::from_raw_parts(a.as_mut_ptr(), a.len()) };
                // SAFETY: as above.
                let mut y = unsafe { ThreadSlice::from_raw_parts(b.as_mut_ptr(), b.len()) };
                for (i, p, q) in x.iter_mine_with(&mut y) {
                    assert_eq!(i % 3, t as usize);
                    *p += 1 + i as u32;
                    *q += 1;
                }
            });
        }
        assert_eq!(a, [1, 2, 3, 4, 5, 6, 7, 0, 0, 0]);
        assert_eq!(b, [1; 7]);
    }
}
