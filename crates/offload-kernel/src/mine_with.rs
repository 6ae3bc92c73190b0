//! Element-wise kernels with two outputs: [`ThreadSlice::iter_mine_with`] walks the elements
//! this thread owns in two output slices at once.
//!
//! Zipping two [`ThreadSlice::iter_mine`] iterators gives the same pairs, but the compiler keeps
//! the second iterator's pending item in memory (a local-memory store and load per element on
//! the GPU).

use crate::index::{slice_len, GridStride};
use crate::output_saving::before_writing;
use crate::thread_slice::ThreadSlice;
use core::marker::PhantomData;

impl<'a, T> ThreadSlice<'a, T> {
    /// `(i, &mut self[i], &mut other[i])` for every index `i` this thread owns (as in
    /// [`iter_mine`](Self::iter_mine)) below the shorter of the two lengths.
    ///
    /// # Panics
    /// If the two are views ([`slice`](Self::slice)) that start at different indices of their
    /// parameters (their elements `i` have different owners), at the caller's location.
    #[inline(always)]
    #[track_caller]
    pub fn iter_mine_with<'s, U>(
        &'s mut self,
        other: &'s mut ThreadSlice<'_, U>,
    ) -> MineWith<'s, T, U> {
        // Views (`slice`) keep their parameter's owners: element i of both views has one owner
        // only if both start at the same index of their parameters.
        assert!(
            self.offset() == other.offset(),
            "iter_mine_with: the two views start at different indices of their parameters"
        );
        // SAFETY: both views' memory holds their lengths' elements (`from_raw_parts`).
        let len = unsafe { slice_len::<T>(self.len()).min(slice_len::<U>(other.len())) };
        let indices = GridStride::mine(len, self.offset());
        let (first, second) = (self.raw_ptr(), other.raw_ptr());
        before_writing(first, &indices);
        before_writing(second, &indices);
        MineWith {
            first,
            second,
            indices,
            _borrow: PhantomData,
        }
    }
}

/// Iterator of [`ThreadSlice::iter_mine_with`].
pub struct MineWith<'s, T, U> {
    first: *mut T,
    second: *mut U,
    indices: GridStride,
    _borrow: PhantomData<(&'s mut [T], &'s mut [U])>,
}

impl<'s, T, U> Iterator for MineWith<'s, T, U> {
    type Item = (usize, &'s mut T, &'s mut U);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let next = self.indices.next();
        let (first, second) = (element(self.first, next), element(self.second, next));
        // SAFETY: i is below both lengths; each index is yielded once per iterator and belongs
        // to the threads of this call alone (i ≡ global_id mod global_threads), and both slices
        // are borrowed mutably for 's.
        next.map(|i| unsafe { (i, &mut *first, &mut *second) })
    }
}

/// The address of element `i` of the output at `ptr` if the walk yielded `i`, null if it
/// yielded nothing.
///
/// The items, `Option<(usize, &mut T, &mut U)>`, use a null first reference as `None`. Computed
/// only in the branch that yields `Some`, the address met the `None` null in a phi that the
/// compiler tested against null after every index check (GPU pipelines run no jump threading):
/// a second compare and branch per element in the PTX. As a select, the test folds into one of
/// `ptr` itself, out of the loop.
#[inline(always)]
fn element<T>(ptr: *mut T, i: Option<usize>) -> *mut T {
    // `add`, not `wrapping_add`: in bounds (or 0), so the compiler may test `ptr` for null
    // instead of the sum.
    // SAFETY: i is below the output's length, or 0.
    let at = unsafe { ptr.add(i.unwrap_or(0)) };
    // Both arms computed already: the compiler makes this a select.
    if i.is_some() {
        at
    } else {
        core::ptr::null_mut()
    }
}

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    /// Runs `body` as each thread of one block of `threads` threads on views of `a` and `b`;
    /// returns who wrote each element of `a`.
    fn run(
        threads: u32,
        a: &mut [u32],
        b: &mut [u32],
        body: impl Fn(&mut ThreadSlice<'_, u32>, &mut ThreadSlice<'_, u32>, u32),
    ) {
        for t in 0..threads {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(threads, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
                warp_size: 32,
            };
            with_thread(ctx, || {
                // SAFETY: `a` and `b` are borrowed mutably for the call; threads run one by one.
                let (mut va, mut vb) = unsafe {
                    (
                        ThreadSlice::from_raw_parts(a.as_mut_ptr(), a.len()),
                        ThreadSlice::from_raw_parts(b.as_mut_ptr(), b.len()),
                    )
                };
                body(&mut va, &mut vb, t);
            });
        }
    }

    #[test]
    fn views_pair_the_elements_their_parameters_give_this_thread() {
        let (mut a, mut b) = (vec![u32::MAX; 20], vec![u32::MAX; 20]);
        run(3, &mut a, &mut b, |a, b, t| {
            for (_, x, y) in a.slice(5..17).iter_mine_with(&mut b.slice(5..)) {
                (*x, *y) = (t, t);
            }
        });
        let want: Vec<u32> = (0..20)
            .map(|i| {
                if (5..17).contains(&i) {
                    i % 3
                } else {
                    u32::MAX
                }
            })
            .collect();
        assert_eq!(a, want);
        assert_eq!(b, want);
    }

    #[test]
    #[should_panic(expected = "start at different indices")]
    fn views_from_different_starts_panic() {
        let (mut a, mut b) = (vec![0u32; 8], vec![0u32; 8]);
        run(1, &mut a, &mut b, |a, b, _| {
            a.slice(1..)
                .iter_mine_with(&mut b.slice(2..))
                .for_each(drop);
        });
    }

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
                warp_size: 32,
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
