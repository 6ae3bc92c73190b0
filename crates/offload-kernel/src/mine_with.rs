//! Element-wise kernels with several outputs: a tuple of `&mut` [`ThreadSlice`]s walks the
//! elements this thread owns in all of them at once ([`MineOutputs::iter_mine`]), and
//! [`ThreadSlice::iter_mine_with`] gives the two-output case with a flat item.
//!
//! One ownership rule for every output: the thread owns index `i` of each by the rule of
//! [`ThreadSlice::iter_mine`] (grid-stride, `i ≡ global_id mod global_threads` in the parameter
//! the view was cut from), so index `i` of every output goes to one thread, below the shortest
//! output's length.
//!
//! Zipping several [`ThreadSlice::iter_mine`] iterators gives the same items, but the compiler
//! keeps the other iterators' pending items in memory (a local-memory store and load per element
//! on the GPU).

use crate::index::{slice_len, GridStride};
use crate::output_saving::before_writing;
use crate::thread_slice::ThreadSlice;
use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// A tuple of two to eight `&mut ThreadSlice`s (of any element types), walked together by
/// [`iter_mine`](Self::iter_mine): `for (i, (a, b, c)) in (&mut a, &mut b, &mut c).iter_mine()`.
/// (Sealed: the walk relies on every member being a whole output or a view of one.)
pub trait MineOutputs<'s>: sealed::Sealed {
    /// `(i, (&mut a[i], &mut b[i], …))`.
    type Item;
    /// The iterator.
    type Iter: Iterator<Item = Self::Item>;

    /// `(i, (&mut self.0[i], &mut self.1[i], …))` for every index `i` this thread owns (as in
    /// [`ThreadSlice::iter_mine`]: `i ≡ global_id mod global_threads`, in the parameter each view
    /// was cut from) below the shortest member's length. Together the threads of a launch cover
    /// every such index exactly once, whatever the launch shape; elements of longer members past
    /// the shortest's length are not reached.
    ///
    /// # Panics
    /// If the members are views ([`ThreadSlice::slice`]) that start at different indices of
    /// their parameters (their elements `i` have different owners), at the caller's location.
    fn iter_mine(self) -> Self::Iter;
}

/// Iterator of [`MineOutputs::iter_mine`] over the outputs whose element 0 are `P` (a tuple of
/// raw pointers).
pub struct MineZip<'s, P> {
    ptrs: P,
    indices: GridStride,
    _borrow: PhantomData<&'s mut ()>,
}

macro_rules! mine_outputs {
    ($first:ident $fl:lifetime $(, $member:ident $k:tt $r:tt $life:lifetime)+) => {
        impl<'s, $fl, $($life,)+ $first, $($member),+> sealed::Sealed
            for (&'s mut ThreadSlice<$fl, $first>, $(&'s mut ThreadSlice<$life, $member>,)+) {}

        impl<'s, $fl, $($life,)+ $first, $($member),+> MineOutputs<'s>
            for (&'s mut ThreadSlice<$fl, $first>, $(&'s mut ThreadSlice<$life, $member>,)+)
        {
            type Item = (usize, (&'s mut $first, $(&'s mut $member,)+));
            type Iter = MineZip<'s, (*mut $first, $(*mut $member,)+)>;

            #[inline(always)]
            #[track_caller]
            fn iter_mine(self) -> Self::Iter {
                // Views (`slice`) keep their parameter's owners: element i of every view has one
                // owner only if all start at the same index of their parameters.
                let offset = self.0.offset();
                assert!(
                    0 $(| (self.$k.offset() ^ offset))+ == 0,
                    "iter_mine: the views of a tuple start at different indices of their parameters"
                );
                // SAFETY: every view's memory holds its length's elements (`from_raw_parts`).
                let len = unsafe {
                    slice_len::<$first>(self.0.len()) $(.min(slice_len::<$member>(self.$k.len())))+
                };
                let indices = GridStride::mine(len, offset);
                let ptrs = (self.0.raw_ptr(), $(self.$k.raw_ptr(),)+);
                before_writing(ptrs.0, &indices);
                $(before_writing(ptrs.$k, &indices);)+
                MineZip {
                    ptrs,
                    indices,
                    _borrow: PhantomData,
                }
            }
        }

        impl<'s, $first: 's, $($member: 's),+> Iterator
            for MineZip<'s, (*mut $first, $(*mut $member,)+)>
        {
            type Item = (usize, (&'s mut $first, $(&'s mut $member,)+));

            #[inline(always)]
            fn next(&mut self) -> Option<Self::Item> {
                let next = self.indices.next();
                // Every address computed before the branch: the first output's as a select with
                // null (see `element`), the others' unconditionally. (With a select for every
                // output, three or more got a second compare and branch per element in the PTX.)
                let at = next.unwrap_or(0);
                let first = element(self.ptrs.0, next);
                // SAFETY: `at` is below every length, or 0.
                let rest = unsafe { ($(self.ptrs.$k.add(at),)+) };
                // SAFETY: i is below every length; each index is yielded once per iterator and
                // belongs to the threads of this call alone (i ≡ global_id mod global_threads),
                // and every output is borrowed mutably for 's.
                next.map(|i| unsafe { (i, (&mut *first, $(&mut *rest.$r,)+)) })
            }
        }
    };
}
mine_outputs!(A 'a, B 1 0 'b);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c, D 3 2 'd);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c, D 3 2 'd, E 4 3 'e);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c, D 3 2 'd, E 4 3 'e, F 5 4 'f);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c, D 3 2 'd, E 4 3 'e, F 5 4 'f, G 6 5 'g);
mine_outputs!(A 'a, B 1 0 'b, C 2 1 'c, D 3 2 'd, E 4 3 'e, F 5 4 'f, G 6 5 'g, H 7 6 'h);

impl<'a, T> ThreadSlice<'a, T> {
    /// `(i, &mut self[i], &mut other[i])` for every index `i` this thread owns (as in
    /// [`iter_mine`](Self::iter_mine)) below the shorter of the two lengths: the items of the
    /// two-output tuple `(&mut self, &mut other).iter_mine()` ([`MineOutputs::iter_mine`]),
    /// flat. (Its own iterator; for two outputs the tuple's gives the same PTX.)
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
    use crate::test_cases::{lengths, THREADS};
    use std::format;
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

    /// Runs `body` as each thread `t` of a one-block launch of `threads` threads in turn.
    fn as_threads(threads: u32, mut body: impl FnMut(u32)) {
        for t in 0..threads {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(threads, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
                warp_size: 32,
            };
            with_thread(ctx, || body(t));
        }
    }

    /// A view of all of `v`, for one thread.
    fn view<T>(v: &mut [T]) -> ThreadSlice<'_, T> {
        // SAFETY: `v` is borrowed mutably for the view; the tests' threads run one by one.
        unsafe { ThreadSlice::from_raw_parts(v.as_mut_ptr(), v.len()) }
    }

    #[test]
    fn three_outputs_cover_the_shortest_length_once_by_iter_mines_owners() {
        for &threads in THREADS {
            for n in lengths() {
                for [la, lb, lc] in [
                    [n, n, n],
                    [n, n + 2, n + 5],
                    [n + 3, n, n + 1],
                    [n + 1, n + 4, n],
                ] {
                    let (mut a, mut b, mut c) = (vec![u32::MAX; la], vec![0u64; lb], vec![0u8; lc]);
                    as_threads(threads, |t| {
                        let (mut va, mut vb, mut vc) = (view(&mut a), view(&mut b), view(&mut c));
                        for (i, (a, b, c)) in (&mut va, &mut vb, &mut vc).iter_mine() {
                            assert_eq!(i % threads as usize, t as usize);
                            assert_eq!(*a, u32::MAX, "element {i} reached twice");
                            *a = t;
                            *b += 1 + i as u64;
                            *c += 1;
                        }
                    });
                    let m = la.min(lb).min(lc);
                    let at = format!("{threads} threads, {la}/{lb}/{lc}");
                    let owner = |i: usize| if i < m { i as u32 % threads } else { u32::MAX };
                    assert_eq!(a, (0..la).map(owner).collect::<Vec<_>>(), "{at}");
                    let sum = |i: usize| if i < m { 1 + i as u64 } else { 0 };
                    assert_eq!(b, (0..lb).map(sum).collect::<Vec<_>>(), "{at}");
                    assert_eq!(
                        c,
                        (0..lc).map(|i| (i < m) as u8).collect::<Vec<_>>(),
                        "{at}"
                    );
                }
            }
        }
    }

    #[test]
    fn four_views_keep_their_parameters_owners() {
        for &threads in THREADS {
            for start in [0, 1, 5] {
                for n in lengths() {
                    let lens = [start + n, start + n + 3, start + n + 1, start + n + 7];
                    let [mut a, mut b, mut c, mut d] = lens.map(|l| vec![u32::MAX; l]);
                    as_threads(threads, |t| {
                        let (mut va, mut vb, mut vc, mut vd) =
                            (view(&mut a), view(&mut b), view(&mut c), view(&mut d));
                        let views = (
                            &mut va.slice(start..),
                            &mut vb.slice(start..),
                            &mut vc.slice(start..),
                            &mut vd.slice(start..),
                        );
                        for (i, (a, b, c, d)) in views.iter_mine() {
                            assert_eq!((start + i) % threads as usize, t as usize);
                            (*a, *b, *c, *d) = (t, t + 100, t + 200, i as u32);
                        }
                    });
                    let want = |k: u32, len: usize| -> Vec<u32> {
                        (0..len)
                            .map(|j| match j {
                                j if j < start || j >= start + n => u32::MAX,
                                j if k == 3 => (j - start) as u32,
                                j => j as u32 % threads + 100 * k,
                            })
                            .collect()
                    };
                    let at = format!("{threads} threads, from {start}, len {n}");
                    assert_eq!(a, want(0, lens[0]), "{at}");
                    assert_eq!(b, want(1, lens[1]), "{at}");
                    assert_eq!(c, want(2, lens[2]), "{at}");
                    assert_eq!(d, want(3, lens[3]), "{at}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "start at different indices")]
    fn a_tuple_of_views_from_different_starts_panics() {
        let (mut a, mut b, mut c) = (vec![0u32; 8], vec![0u32; 8], vec![0u32; 8]);
        as_threads(1, |_| {
            let (mut va, mut vb, mut vc) = (view(&mut a), view(&mut b), view(&mut c));
            (&mut va.slice(1..), &mut vb.slice(1..), &mut vc.slice(2..))
                .iter_mine()
                .for_each(drop);
        });
    }

    #[test]
    fn eight_outputs_of_eight_types_share_one_owner_per_index() {
        for &threads in THREADS {
            let (mut a, mut b, mut c, mut d) =
                (vec![0u8; 9], vec![0u16; 10], vec![0u32; 11], vec![0u64; 12]);
            let (mut e, mut f, mut g, mut h) =
                (vec![0i8; 13], vec![0i16; 14], vec![0f32; 15], vec![0f64; 9]);
            as_threads(threads, |t| {
                let views = (
                    &mut view(&mut a),
                    &mut view(&mut b),
                    &mut view(&mut c),
                    &mut view(&mut d),
                    &mut view(&mut e),
                    &mut view(&mut f),
                    &mut view(&mut g),
                    &mut view(&mut h),
                );
                for (i, (a, b, c, d, e, f, g, h)) in views.iter_mine() {
                    assert_eq!(i % threads as usize, t as usize);
                    let v = 1 + i as u8;
                    (*a, *b, *c, *d) = (v, v as u16, v as u32, v as u64);
                    (*e, *f, *g, *h) = (v as i8, v as i16, v as f32, v as f64);
                }
            });
            // The shortest (a and h) has 9 elements: 1..=9 there, 0 past it.
            let want = |len: usize| (0..len).map(|i| if i < 9 { 1 + i as u64 } else { 0 });
            assert!(a.iter().map(|&x| x as u64).eq(want(9)));
            assert!(b.iter().map(|&x| x as u64).eq(want(10)));
            assert!(c.iter().map(|&x| x as u64).eq(want(11)));
            assert!(d.iter().copied().eq(want(12)));
            assert!(e.iter().map(|&x| x as u64).eq(want(13)));
            assert!(f.iter().map(|&x| x as u64).eq(want(14)));
            assert!(g.iter().map(|&x| x as u64).eq(want(15)));
            assert!(h.iter().map(|&x| x as u64).eq(want(9)));
        }
    }
}
