//! Row-major matrices in global memory, as fragments load and store them: `rows × cols`
//! elements, row `r` starting at `r * stride`. Reads outside the matrix give zeros and writes
//! outside it are skipped, so tiles may overhang the edges (any m, n, k).

use crate::ThreadSlice;

/// `rows × cols` elements, row `r` starting at `r * stride`, checked once to fit the memory.
#[derive(Clone, Copy)]
struct Layout {
    rows: usize,
    cols: usize,
    stride: usize,
}

impl Layout {
    /// # Panics
    /// If `stride < cols` or `len` elements are too few for the last row.
    #[inline(always)]
    #[track_caller]
    fn fitting(len: usize, rows: usize, cols: usize, stride: usize) -> Self {
        // A message without arguments: kernels carry no formatting machinery.
        assert!(
            stride >= cols && (rows == 0 || (rows - 1) * stride + cols <= len),
            "matrix: the slice does not hold the matrix"
        );
        Layout { rows, cols, stride }
    }

    /// Whether `(r, c)` lies inside the matrix.
    #[inline(always)]
    fn contains(&self, r: usize, c: usize) -> bool {
        r < self.rows && c < self.cols
    }

    /// The element offset of `(r, c)`.
    #[inline(always)]
    fn offset(&self, r: usize, c: usize) -> usize {
        r * self.stride + c
    }
}

/// A read-only row-major matrix over a slice (a `&[T]` kernel parameter).
#[derive(Clone, Copy)]
pub struct MatrixRef<'a, T> {
    data: &'a [T],
    layout: Layout,
}

impl<'a, T: Copy> MatrixRef<'a, T> {
    /// `rows × cols`, densely packed (`stride = cols`).
    ///
    /// # Panics
    /// If `data` holds fewer than `rows * cols` elements.
    #[inline(always)]
    #[track_caller]
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        Self::with_stride(data, rows, cols, cols)
    }

    /// `rows × cols` with row `r` at `r * stride` (`stride >= cols`).
    ///
    /// # Panics
    /// If `stride < cols` or `data` is too short for the last row.
    #[inline(always)]
    #[track_caller]
    pub fn with_stride(data: &'a [T], rows: usize, cols: usize, stride: usize) -> Self {
        let layout = Layout::fitting(data.len(), rows, cols, stride);
        MatrixRef { data, layout }
    }

    /// Number of rows.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// Number of columns.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.layout.cols
    }

    /// Elements from the start of one row to the start of the next.
    #[inline(always)]
    pub fn stride(&self) -> usize {
        self.layout.stride
    }

    /// The elements, row `r` from `r * stride()`.
    #[inline(always)]
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// Element `(r, c)`, or `zero` outside the matrix.
    #[inline(always)]
    pub fn get_or(&self, r: usize, c: usize, zero: T) -> T {
        if self.layout.contains(r, c) {
            // SAFETY: (r, c) is inside, and the constructor checked that the last row fits.
            unsafe { *self.data.get_unchecked(self.layout.offset(r, c)) }
        } else {
            zero
        }
    }
}

/// A row-major matrix over a kernel's output ([`ThreadSlice`]), written element by element.
pub struct MatrixMut<'s, 'a, T> {
    out: &'s mut ThreadSlice<'a, T>,
    layout: Layout,
}

impl<'s, 'a, T> MatrixMut<'s, 'a, T> {
    /// `rows × cols` with row `r` at `r * stride`.
    ///
    /// # Panics
    /// If `stride < cols` or `out` is too short for the last row.
    #[inline(always)]
    #[track_caller]
    pub fn new(out: &'s mut ThreadSlice<'a, T>, rows: usize, cols: usize, stride: usize) -> Self {
        let layout = Layout::fitting(out.len(), rows, cols, stride);
        MatrixMut { out, layout }
    }

    /// Number of rows.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// Number of columns.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.layout.cols
    }

    /// Stores `v` at `(r, c)`; nothing outside the matrix.
    ///
    /// # Safety
    /// No other thread of the launch reads or writes element `(r, c)` during the launch.
    #[inline(always)]
    pub unsafe fn set(&mut self, r: usize, c: usize, v: T) {
        if self.layout.contains(r, c) {
            // SAFETY: in bounds (checked above and by the constructor); exclusive per the
            // caller's contract.
            unsafe { self.out.as_mut_ptr().add(self.layout.offset(r, c)).write(v) }
        }
    }

    /// Stores `v` at `(r, c)` and `w` at `(r, c + 1)`, as one access when both are inside and
    /// the pair is aligned to twice the element size (the accumulators hold such pairs).
    ///
    /// # Safety
    /// As for [`set`](Self::set), for both elements.
    #[inline(always)]
    pub unsafe fn set_pair(&mut self, r: usize, c: usize, v: T, w: T) {
        if self.layout.contains(r, c + 1) {
            // SAFETY: both elements are in bounds; exclusive per the caller's contract.
            let at = unsafe { self.out.as_mut_ptr().add(self.layout.offset(r, c)) };
            let size = core::mem::size_of::<T>();
            if at as usize % (2 * size) == 0 && matches!(size, 2 | 4 | 8) {
                // SAFETY: `at` is aligned to 2 * size, the alignment of the pair type of that
                // size, whose layout is the two elements one after the other.
                unsafe {
                    match size {
                        2 => (at as *mut Pair4<T>).write(Pair4([v, w])),
                        4 => (at as *mut Pair8<T>).write(Pair8([v, w])),
                        _ => (at as *mut Pair16<T>).write(Pair16([v, w])),
                    }
                }
            } else {
                // SAFETY: as above, element by element.
                unsafe {
                    at.write(v);
                    at.add(1).write(w);
                }
            }
        } else {
            // SAFETY: as above; `set` skips what is outside.
            unsafe {
                self.set(r, c, v);
                self.set(r, c + 1, w);
            }
        }
    }
}

/// Two adjacent elements of 2, 4 or 8 bytes, stored as one access of 4, 8 or 16 bytes.
#[repr(C, align(4))]
struct Pair4<T>([T; 2]);
#[repr(C, align(8))]
struct Pair8<T>([T; 2]);
#[repr(C, align(16))]
struct Pair16<T>([T; 2]);
