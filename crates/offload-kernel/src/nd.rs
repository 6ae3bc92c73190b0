//! N-dimensional views of kernel parameters (1 to 3 dimensions, row-major), what a kernel sees of
//! an `ndarray` view the host passes (feature `ndarray` of `offload`): a kernel parameter
//! written `a: ArrayView2<f32>` takes an `ndarray::ArrayView2<f32>` at the launch, and
//! `mut out: ArrayViewMut2<f32>` an `ndarray::ArrayViewMut2<f32>`; the shape travels with the
//! data.
//!
//! An input view is indexed like ndarray's (`a[[row, col]]`, bounds-checked per axis). An
//! output view is written through [`ArrayViewMut2::iter_mine`] (and its 1- and 3-dimensional
//! forms), which yields `(row, col, &mut element)` for the elements this thread owns: the same
//! owners as [`ThreadSlice::iter_mine`] over the row-major elements (element `i` belongs to
//! thread `i % global_threads()`), so the threads of a launch cover the array once whatever the
//! launch shape, and no two share an element. The coordinates are stepped, not divided out per
//! element: each thread divides once to find its first element and the stride's extents.

use crate::thread_slice::ThreadSlice;
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
use core::marker::PhantomData;
use core::ops::Index;

/// A read-only `D`-dimensional row-major view (see the module docs).
#[derive(Clone, Copy)]
pub struct ArrayView<'a, T, const D: usize> {
    data: &'a [T],
    dim: [usize; D],
}

/// A one-dimensional read-only view.
pub type ArrayView1<'a, T> = ArrayView<'a, T, 1>;
/// A two-dimensional read-only view: `[rows, columns]`.
pub type ArrayView2<'a, T> = ArrayView<'a, T, 2>;
/// A three-dimensional read-only view.
pub type ArrayView3<'a, T> = ArrayView<'a, T, 3>;

/// A `D`-dimensional row-major output view, written element by element by the threads that own
/// them (see the module docs).
pub struct ArrayViewMut<'a, T, const D: usize> {
    out: ThreadSlice<'a, T>,
    dim: [usize; D],
}

/// A one-dimensional output view.
pub type ArrayViewMut1<'a, T> = ArrayViewMut<'a, T, 1>;
/// A two-dimensional output view: `[rows, columns]`.
pub type ArrayViewMut2<'a, T> = ArrayViewMut<'a, T, 2>;
/// A three-dimensional output view.
pub type ArrayViewMut3<'a, T> = ArrayViewMut<'a, T, 3>;

/// Number of elements of an array of extents `dim`.
fn count<const D: usize>(dim: &[usize; D]) -> usize {
    let mut elements = 1;
    let mut axis = 0;
    while axis < D {
        elements *= dim[axis];
        axis += 1;
    }
    elements
}

impl<'a, T, const D: usize> ArrayView<'a, T, D> {
    /// `data` seen with extents `dim` (row-major: the last axis varies fastest).
    ///
    /// # Panics
    /// If `dim` does not hold `data.len()` elements.
    #[inline(always)]
    #[track_caller]
    pub fn from_shape(data: &'a [T], dim: [usize; D]) -> Self {
        assert!(
            count(&dim) == data.len(),
            "shape does not match the data's length"
        );
        ArrayView { data, dim }
    }

    /// The extents, outermost axis first (`[rows, columns]` in two dimensions).
    #[inline(always)]
    pub fn dim(&self) -> [usize; D] {
        self.dim
    }

    /// The elements in row-major order.
    #[inline(always)]
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// The element at `index`, `None` when an index is past its axis.
    #[inline(always)]
    pub fn get(&self, index: [usize; D]) -> Option<&'a T> {
        self.linear(index).map(|i| &self.data[i])
    }

    /// The row-major position of `index`, `None` when an index is past its axis. Indexing goes
    /// through this rather than `get`: comparing an `Option<&T>` with null mixes pointer types
    /// that the SPIR-V image's validator refuses.
    #[inline(always)]
    fn linear(&self, index: [usize; D]) -> Option<usize> {
        let mut linear = 0;
        let mut axis = 0;
        while axis < D {
            if index[axis] >= self.dim[axis] {
                return None;
            }
            linear = linear * self.dim[axis] + index[axis];
            axis += 1;
        }
        Some(linear)
    }
}

impl<T, const D: usize> Index<[usize; D]> for ArrayView<'_, T, D> {
    type Output = T;

    /// # Panics
    /// If an index is past its axis, at the caller's location.
    #[inline(always)]
    #[track_caller]
    fn index(&self, index: [usize; D]) -> &T {
        match self.linear(index) {
            Some(i) => &self.data[i],
            None => panic!("array index out of bounds"),
        }
    }
}

impl<'a, T, const D: usize> ArrayViewMut<'a, T, D> {
    /// The output `out` seen with extents `dim` (row-major).
    ///
    /// # Panics
    /// If `dim` does not hold `out.len()` elements.
    #[inline(always)]
    #[track_caller]
    pub fn from_shape(out: ThreadSlice<'a, T>, dim: [usize; D]) -> Self {
        assert!(
            count(&dim) == out.len(),
            "shape does not match the data's length"
        );
        ArrayViewMut { out, dim }
    }

    /// The extents, outermost axis first.
    #[inline(always)]
    pub fn dim(&self) -> [usize; D] {
        self.dim
    }

    /// The elements in row-major order, as the thread-owned view of a `&mut [T]` parameter.
    #[inline(always)]
    pub fn as_thread_slice(&mut self) -> &mut ThreadSlice<'a, T> {
        &mut self.out
    }
}

impl<'a, T> ArrayViewMut<'a, T, 1> {
    /// `(i, &mut element)` for the elements this thread owns (see the module docs).
    #[inline(always)]
    pub fn iter_mine(&mut self) -> crate::thread_slice::MineIter<'_, T> {
        self.out.iter_mine()
    }
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
impl<'a, T> ArrayViewMut<'a, T, 2> {
    /// `(row, col, &mut element)` for the elements this thread owns (see the module docs).
    #[inline(always)]
    pub fn iter_mine(&mut self) -> MineIter2<'_, T> {
        let (first, stride) = self.out.first_mine();
        let cols = self.dim[1];
        let (len, ptr) = (self.out.len(), self.out.as_mut_ptr());
        // Empty arrays yield nothing; the divisions below need columns.
        let (start, step) = match cols {
            0 => ([0, 0], [0, 0]),
            _ => ([first / cols, first % cols], [stride / cols, stride % cols]),
        };
        MineIter2 {
            ptr,
            len,
            next: first,
            stride,
            at: start,
            step,
            cols,
            _borrow: PhantomData,
        }
    }
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
impl<'a, T> ArrayViewMut<'a, T, 3> {
    /// `(i, j, k, &mut element)` for the elements this thread owns (see the module docs).
    #[inline(always)]
    pub fn iter_mine(&mut self) -> MineIter3<'_, T> {
        let (first, stride) = self.out.first_mine();
        let [_, d1, d2] = self.dim;
        let (len, ptr) = (self.out.len(), self.out.as_mut_ptr());
        let split = |i: usize| [i / d2 / d1, i / d2 % d1, i % d2];
        let (start, step) = match d1 * d2 {
            0 => ([0; 3], [0; 3]),
            _ => (split(first), split(stride)),
        };
        MineIter3 {
            ptr,
            len,
            next: first,
            stride,
            at: start,
            step,
            extents: [d1, d2],
            _borrow: PhantomData,
        }
    }
}

/// This thread's elements of a two-dimensional output, with their coordinates.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub struct MineIter2<'s, T> {
    ptr: *mut T,
    len: usize,
    /// Row-major index of the next element.
    next: usize,
    stride: usize,
    /// `[row, col]` of `next`.
    at: [usize; 2],
    /// `stride` as `[rows, cols]`.
    step: [usize; 2],
    cols: usize,
    _borrow: PhantomData<&'s mut [T]>,
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
impl<'s, T> Iterator for MineIter2<'s, T> {
    type Item = (usize, usize, &'s mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i >= self.len {
            return None;
        }
        let [row, col] = self.at;
        self.next = i + self.stride;
        // Step the coordinates by the stride: both parts are below their extents, so one carry.
        let mut next_col = col + self.step[1];
        let mut next_row = row + self.step[0];
        if next_col >= self.cols {
            next_col -= self.cols;
            next_row += 1;
        }
        self.at = [next_row, next_col];
        // SAFETY: i < len; the index is this thread's (i ≡ global_id mod global_threads, as in
        // `ThreadSlice::iter_mine`) and yielded once.
        Some((row, col, unsafe { &mut *self.ptr.add(i) }))
    }
}

/// This thread's elements of a three-dimensional output, with their coordinates.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub struct MineIter3<'s, T> {
    ptr: *mut T,
    len: usize,
    next: usize,
    stride: usize,
    /// `[i, j, k]` of `next`.
    at: [usize; 3],
    /// `stride` in the same mixed radix.
    step: [usize; 3],
    /// The extents of the two inner axes.
    extents: [usize; 2],
    _borrow: PhantomData<&'s mut [T]>,
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
impl<'s, T> Iterator for MineIter3<'s, T> {
    type Item = (usize, usize, usize, &'s mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i >= self.len {
            return None;
        }
        let [a, b, c] = self.at;
        let [d1, d2] = self.extents;
        self.next = i + self.stride;
        let mut k = c + self.step[2];
        let mut j = b + self.step[1];
        let mut outer = a + self.step[0];
        if k >= d2 {
            k -= d2;
            j += 1;
        }
        if j >= d1 {
            j -= d1;
            outer += 1;
        }
        self.at = [outer, j, k];
        // SAFETY: as in `MineIter2`.
        Some((a, b, c, unsafe { &mut *self.ptr.add(i) }))
    }
}

/// On the host one call may run several consecutive threads (`run_threads`): their elements
/// come in runs of consecutive indices, whose coordinates are stepped by one; a run's first
/// element is divided out (every element when a call runs one thread).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod host_iter {
    use super::ArrayViewMut;
    use crate::index::GridStride;
    use crate::output_saving::before_writing;
    use core::marker::PhantomData;

    impl<'a, T> ArrayViewMut<'a, T, 2> {
        /// `(row, col, &mut element)` for the elements this thread owns (see the module docs).
        #[inline(always)]
        pub fn iter_mine(&mut self) -> MineIter2<'_, T> {
            let (ptr, indices) = (self.out.raw_ptr(), self.out.mine_indices());
            before_writing(ptr, &indices);
            MineIter2 {
                ptr,
                indices,
                expect: usize::MAX,
                at: [0, 0],
                cols: self.dim[1],
                _borrow: PhantomData,
            }
        }
    }

    impl<'a, T> ArrayViewMut<'a, T, 3> {
        /// `(i, j, k, &mut element)` for the elements this thread owns (see the module docs).
        #[inline(always)]
        pub fn iter_mine(&mut self) -> MineIter3<'_, T> {
            let [_, d1, d2] = self.dim;
            let (ptr, indices) = (self.out.raw_ptr(), self.out.mine_indices());
            before_writing(ptr, &indices);
            MineIter3 {
                ptr,
                indices,
                expect: usize::MAX,
                at: [0; 3],
                extents: [d1, d2],
                _borrow: PhantomData,
            }
        }
    }

    /// This thread's elements of a two-dimensional output, with their coordinates.
    pub struct MineIter2<'s, T> {
        ptr: *mut T,
        indices: GridStride,
        /// The index whose coordinates `at` holds: the one after the last yielded.
        expect: usize,
        at: [usize; 2],
        cols: usize,
        _borrow: PhantomData<&'s mut [T]>,
    }

    impl<'s, T> Iterator for MineIter2<'s, T> {
        type Item = (usize, usize, &'s mut T);

        #[inline(always)]
        fn next(&mut self) -> Option<Self::Item> {
            // Only indices below the length, which is rows × cols: `cols` is not 0 here.
            let i = self.indices.next()?;
            if i != self.expect {
                self.at = [i / self.cols, i % self.cols];
            }
            let [row, col] = self.at;
            self.at = if col + 1 == self.cols {
                [row + 1, 0]
            } else {
                [row, col + 1]
            };
            self.expect = i + 1;
            // SAFETY: i < len; the index is this call's threads' (as in
            // `ThreadSlice::iter_mine`) and yielded once.
            Some((row, col, unsafe { &mut *self.ptr.add(i) }))
        }
    }

    /// This thread's elements of a three-dimensional output, with their coordinates.
    pub struct MineIter3<'s, T> {
        ptr: *mut T,
        indices: GridStride,
        /// The index whose coordinates `at` holds: the one after the last yielded.
        expect: usize,
        at: [usize; 3],
        /// The extents of the two inner axes.
        extents: [usize; 2],
        _borrow: PhantomData<&'s mut [T]>,
    }

    impl<'s, T> Iterator for MineIter3<'s, T> {
        type Item = (usize, usize, usize, &'s mut T);

        #[inline(always)]
        fn next(&mut self) -> Option<Self::Item> {
            let i = self.indices.next()?;
            let [d1, d2] = self.extents;
            if i != self.expect {
                self.at = [i / d2 / d1, i / d2 % d1, i % d2];
            }
            let [a, b, c] = self.at;
            self.at = match (c + 1 == d2, b + 1 == d1) {
                (false, _) => [a, b, c + 1],
                (true, false) => [a, b + 1, 0],
                (true, true) => [a + 1, 0, 0],
            };
            self.expect = i + 1;
            // SAFETY: as in `MineIter2`.
            Some((a, b, c, unsafe { &mut *self.ptr.add(i) }))
        }
    }
}
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use host_iter::{MineIter2, MineIter3};

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::vec;
    use std::vec::Vec;

    fn context(thread: u32, block: u32, threads: u32, blocks: u32) -> ThreadContext {
        ThreadContext {
            thread_idx: Dim3::new(thread, 0, 0),
            block_idx: Dim3::new(block, 0, 0),
            block_dim: Dim3::new(threads, 1, 1),
            grid_dim: Dim3::new(blocks, 1, 1),
            warp_size: 32,
        }
    }

    /// Each thread of `blocks × threads` in turn writes its coordinates; every element must get
    /// its own coordinates exactly once.
    fn coverage_2d(rows: usize, cols: usize, blocks: u32, threads: u32) {
        let mut seen = vec![(usize::MAX, usize::MAX, 0u32); rows * cols];
        for b in 0..blocks {
            for t in 0..threads {
                let ctx = context(t, b, threads, blocks);
                with_thread(ctx, || {
                    // SAFETY: one thread at a time in this test.
                    let out = unsafe { ThreadSlice::from_raw_parts(seen.as_mut_ptr(), seen.len()) };
                    let mut view = ArrayViewMut::from_shape(out, [rows, cols]);
                    for (r, c, e) in view.iter_mine() {
                        *e = (r, c, e.2 + 1);
                    }
                });
            }
        }
        let expected: Vec<_> = (0..rows * cols).map(|i| (i / cols, i % cols, 1)).collect();
        assert_eq!(seen, expected, "{rows}x{cols} over {blocks}x{threads}");
    }

    #[test]
    fn two_dimensional_ownership_covers_each_element_once_with_its_coordinates() {
        // Under Miri, which checks the unsafe views and not the arithmetic, the smaller shapes.
        let (shapes, launches): (&[_], &[_]) = if cfg!(miri) {
            (&[(3, 7), (17, 5), (4, 0)], &[(1, 3), (2, 5), (5, 7)])
        } else {
            (
                &[(1, 1), (3, 7), (17, 5), (8, 64), (0, 4), (4, 0)],
                &[(1, 1), (1, 3), (2, 5), (3, 64), (5, 7)],
            )
        };
        for &(rows, cols) in shapes {
            for &(blocks, threads) in launches {
                coverage_2d(rows, cols, blocks, threads);
            }
        }
    }

    #[test]
    fn three_dimensional_ownership_covers_each_element_once_with_its_coordinates() {
        for dim in [[2, 3, 4], [5, 1, 7], [3, 9, 2], [1, 1, 1]] {
            for (blocks, threads) in [(1, 1), (2, 5), (3, 11), (4, 32)] {
                let len = dim.iter().product();
                let mut seen = vec![([usize::MAX; 3], 0u32); len];
                for b in 0..blocks {
                    for t in 0..threads {
                        let ctx = context(t, b, threads, blocks);
                        with_thread(ctx, || {
                            // SAFETY: one thread at a time in this test.
                            let out =
                                unsafe { ThreadSlice::from_raw_parts(seen.as_mut_ptr(), len) };
                            for (i, j, k, e) in ArrayViewMut::from_shape(out, dim).iter_mine() {
                                *e = ([i, j, k], e.1 + 1);
                            }
                        });
                    }
                }
                let expected: Vec<_> = (0..len)
                    .map(|x| ([x / (dim[1] * dim[2]), x / dim[2] % dim[1], x % dim[2]], 1))
                    .collect();
                assert_eq!(seen, expected, "{dim:?} over {blocks}x{threads}");
            }
        }
    }

    #[test]
    fn input_views_index_per_axis() {
        let data: Vec<u32> = (0..24).collect();
        let v = ArrayView::from_shape(&data, [2, 3, 4]);
        assert_eq!(v[[1, 2, 3]], 23);
        assert_eq!(v[[1, 0, 2]], 14);
        assert_eq!(
            v.get([0, 3, 0]),
            None,
            "past its axis, though inside the data"
        );
        assert_eq!(v.dim(), [2, 3, 4]);
    }

    /// Ranges of threads run as one call each yield every element they own once, with the
    /// coordinates of its index, in two and three dimensions.
    #[test]
    fn ranges_run_as_one_call_yield_each_element_with_its_coordinates() {
        use crate::index::host_context::{run_threads, ThreadRange};
        let (threads, blocks) = (4u32, 3u64);
        let total = threads as u64 * blocks;
        for cuts in [
            &[0, 12][..],
            &[0, 5, 6, 12],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        ] {
            let mut seen2 = vec![0u32; 35];
            let mut seen3 = vec![0u32; 30];
            for pair in cuts.windows(2) {
                let range = ThreadRange {
                    grid: Dim3::new(blocks as u32, 1, 1),
                    block: Dim3::new(threads, 1, 1),
                    first: pair[0],
                    end: pair[1],
                    warp_size: 32,
                    as_one: true,
                };
                run_threads(range, true, || {
                    // SAFETY: the vectors are borrowed mutably for the call; ranges run in turn.
                    let out = unsafe { ThreadSlice::from_raw_parts(seen2.as_mut_ptr(), 35) };
                    for (r, c, e) in ArrayViewMut::from_shape(out, [5, 7]).iter_mine() {
                        let i = r * 7 + c;
                        assert!((pair[0]..pair[1]).contains(&(i as u64 % total)), "{i}");
                        *e += 1;
                    }
                    // SAFETY: as above.
                    let out = unsafe { ThreadSlice::from_raw_parts(seen3.as_mut_ptr(), 30) };
                    for (a, b, c, e) in ArrayViewMut::from_shape(out, [2, 3, 5]).iter_mine() {
                        let i = (a * 3 + b) * 5 + c;
                        assert!((pair[0]..pair[1]).contains(&(i as u64 % total)), "{i}");
                        *e += 1;
                    }
                });
            }
            assert!(seen2.iter().chain(&seen3).all(|&n| n == 1), "{cuts:?}");
        }
    }
}
