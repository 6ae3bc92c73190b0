//! Read-only 2D and 3D grids over a slice, and checked windows into them.
//!
//! A stencil reads the neighbours of a point. Indexing the slice for each neighbour checks each
//! index against the length: a compare and a branch per load, in the hottest loop of the kernel.
//! A [`Window2`] / [`Window3`] is the neighbourhood of one point, checked once, when it is
//! made, against the grid's bounds (the same test that tells an interior point from a border
//! one); reading inside it then needs no check, since its offsets are constants that the
//! compiler compares with the window's extent at compile time.
//!
//! Coordinates come from the linear index (x fastest) in 32-bit arithmetic when the grid has
//! fewer than 2^32 points: 64-bit division is emulated, and slow, on GPUs.

use core::marker::PhantomData;

/// A `nx × ny` row-major grid (x fastest) over the first `nx * ny` elements of a slice.
#[derive(Clone, Copy)]
pub struct Grid2<'a, T> {
    data: &'a [T],
    nx: usize,
    ny: usize,
}

/// A `nx × ny × nz` grid (x fastest, then y) over the first `nx * ny * nz` elements of a slice.
#[derive(Clone, Copy)]
pub struct Grid3<'a, T> {
    data: &'a [T],
    nx: usize,
    ny: usize,
    nz: usize,
}

/// The points of a [`Grid2`] at offsets `lo..=hi` (in each direction) of one point, all inside
/// the grid.
#[derive(Clone, Copy)]
pub struct Window2<'a, T> {
    data: *const T,
    centre: usize,
    row: isize,
    lo: isize,
    hi: isize,
    _data: PhantomData<&'a [T]>,
}

/// The points of a [`Grid3`] at offsets `lo..=hi` (in each direction) of one point, all inside
/// the grid.
#[derive(Clone, Copy)]
pub struct Window3<'a, T> {
    data: *const T,
    centre: usize,
    row: isize,
    plane: isize,
    lo: isize,
    hi: isize,
    _data: PhantomData<&'a [T]>,
}

/// `i / n` and `i % n`, in 32-bit arithmetic when `narrow` (`i` and `n` below 2^32).
#[inline(always)]
pub(crate) fn div_rem(i: usize, n: usize, narrow: bool) -> (usize, usize) {
    if narrow {
        let (i, n) = (i as u32, n as u32);
        ((i / n) as usize, (i % n) as usize)
    } else {
        (i / n, i % n)
    }
}

/// Whether `c + lo ..= c + hi` lies in `0..n` (`lo <= 0 <= hi`; `n` is one of the grid's `u32`
/// extents). Written as compares of `c` with bounds that depend on the grid alone, which a loop
/// computes once, in 32 bits. The 64-bit `c + hi < n` per axis (an add and a compare pair each)
/// took so many registers that ptxas split a cell's loads into several trips to memory
/// (examples/parity's `corners`).
#[inline(always)]
fn spans(c: usize, n: usize, lo: isize, hi: isize) -> bool {
    let below = (n as u32).saturating_sub(u32::try_from(hi).unwrap_or(u32::MAX));
    c >= lo.unsigned_abs() && c < below as usize
}

impl<'a, T: Copy> Grid2<'a, T> {
    /// The grid of `data`'s first `nx * ny` elements.
    ///
    /// # Panics
    /// If `data` holds fewer than `nx * ny` elements.
    #[inline(always)]
    #[track_caller]
    pub fn new(data: &'a [T], nx: u32, ny: u32) -> Self {
        let (nx, ny) = (nx as usize, ny as usize);
        let data = &data[..nx * ny];
        Grid2 { data, nx, ny }
    }

    /// Points along x and y.
    #[inline(always)]
    pub fn extent(&self) -> (usize, usize) {
        (self.nx, self.ny)
    }

    /// The grid's points, row-major (x fastest).
    #[inline(always)]
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// `(x, y)` of the point at linear index `i` (`i` need not be in the grid).
    #[inline(always)]
    pub fn coords(&self, i: usize) -> (usize, usize) {
        let narrow = self.data.len() <= u32::MAX as usize && i <= u32::MAX as usize;
        let (y, x) = div_rem(i, self.nx, narrow);
        (x, y)
    }

    /// The value at linear index `i` (bounds-checked).
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> T {
        self.data[i]
    }

    /// `f` of the window of offsets `lo..=hi` around point `i`, or `None` when part of the
    /// window (or `i`) lies outside the grid. `lo <= 0 <= hi`; `window(i, -1, 1, f)` is the
    /// 3 × 3 neighbourhood.
    ///
    /// The window is handed to a closure rather than returned: an `Option` of a window kept
    /// across loop iterations merges its pointer with an undefined value, which hides from the
    /// compiler that the loads read a read-only kernel parameter (and so costs the
    /// non-coherent cache, `ld.global.nc`).
    #[inline(always)]
    pub fn window<R>(
        &self,
        i: usize,
        lo: isize,
        hi: isize,
        f: impl FnOnce(Window2<'a, T>) -> R,
    ) -> Option<R> {
        assert!(lo <= 0 && 0 <= hi, "a window holds its centre");
        let (x, y) = self.coords(i);
        (spans(x, self.nx, lo, hi) && spans(y, self.ny, lo, hi)).then(|| {
            f(Window2 {
                // SAFETY (for `at`): (x, y) and every point at offsets lo..=hi lie in the grid.
                data: self.data.as_ptr(),
                centre: i,
                row: self.nx as isize,
                lo,
                hi,
                _data: PhantomData,
            })
        })
    }

    /// `f` of the 3 × 3 neighbourhood of point `i`: `window(i, -1, 1, f)`.
    #[inline(always)]
    pub fn around<R>(&self, i: usize, f: impl FnOnce(Window2<'a, T>) -> R) -> Option<R> {
        self.window(i, -1, 1, f)
    }
}

impl<'a, T: Copy> Window2<'a, T> {
    /// The point at offset `(dx, dy)` from the window's centre.
    ///
    /// # Panics
    /// If an offset lies outside the window (a check the compiler removes for constant offsets).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, dx: isize, dy: isize) -> T {
        let inside = |d: isize| self.lo <= d && d <= self.hi;
        assert!(inside(dx) && inside(dy), "offset outside the window");
        // SAFETY: the window was made only when every point at offsets lo..=hi lay in the grid,
        // which is borrowed for 'a.
        unsafe {
            *self
                .data
                .add(self.centre.wrapping_add_signed(dy * self.row + dx))
        }
    }
}

impl<'a, T: Copy> Grid3<'a, T> {
    /// The grid of `data`'s first `nx * ny * nz` elements.
    ///
    /// # Panics
    /// If `data` holds fewer than `nx * ny * nz` elements.
    #[inline(always)]
    #[track_caller]
    pub fn new(data: &'a [T], nx: u32, ny: u32, nz: u32) -> Self {
        let (nx, ny, nz) = (nx as usize, ny as usize, nz as usize);
        let data = &data[..nx * ny * nz];
        Grid3 { data, nx, ny, nz }
    }

    /// Points along x, y and z.
    #[inline(always)]
    pub fn extent(&self) -> (usize, usize, usize) {
        (self.nx, self.ny, self.nz)
    }

    /// The grid's points, row-major (x fastest, then y).
    #[inline(always)]
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// `(x, y, z)` of the point at linear index `i` (`i` need not be in the grid).
    #[inline(always)]
    pub fn coords(&self, i: usize) -> (usize, usize, usize) {
        let narrow = self.data.len() <= u32::MAX as usize && i <= u32::MAX as usize;
        let (rows, x) = div_rem(i, self.nx, narrow);
        let (z, y) = div_rem(rows, self.ny, narrow);
        (x, y, z)
    }

    /// The value at linear index `i` (bounds-checked).
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> T {
        self.data[i]
    }

    /// `f` of the window of offsets `lo..=hi` around point `i`, or `None` when part of the
    /// window (or `i`) lies outside the grid. `lo <= 0 <= hi`: `window(i, -1, 1, f)` is the
    /// 3 × 3 × 3 neighbourhood, `window(i, 0, 1, f)` the 2 × 2 × 2 corners of the cell above
    /// `i`. (A closure for the reason given at [`Grid2::window`].)
    #[inline(always)]
    pub fn window<R>(
        &self,
        i: usize,
        lo: isize,
        hi: isize,
        f: impl FnOnce(Window3<'a, T>) -> R,
    ) -> Option<R> {
        // Inside the grid, i is the linear index of its coordinates: no need to recompute it.
        self.window_of(i, self.coords(i), lo, hi, f)
    }

    /// [`window`](Self::window) around the point at coordinates `(x, y, z)`, for a kernel that
    /// has them already (no division to recover them from the linear index).
    #[inline(always)]
    pub fn window_at<R>(
        &self,
        (x, y, z): (usize, usize, usize),
        lo: isize,
        hi: isize,
        f: impl FnOnce(Window3<'a, T>) -> R,
    ) -> Option<R> {
        let i = (z * self.ny + y) * self.nx + x;
        self.window_of(i, (x, y, z), lo, hi, f)
    }

    /// The window around the point of linear index `i` and coordinates `(x, y, z)` (the same
    /// point, when inside the grid).
    #[inline(always)]
    fn window_of<R>(
        &self,
        i: usize,
        (x, y, z): (usize, usize, usize),
        lo: isize,
        hi: isize,
        f: impl FnOnce(Window3<'a, T>) -> R,
    ) -> Option<R> {
        assert!(lo <= 0 && 0 <= hi, "a window holds its centre");
        let inside =
            spans(x, self.nx, lo, hi) && spans(y, self.ny, lo, hi) && spans(z, self.nz, lo, hi);
        inside.then(|| {
            f(Window3 {
                // SAFETY (for `at`): (x, y, z) and every point at offsets lo..=hi lie in the
                // grid.
                data: self.data.as_ptr(),
                centre: i,
                row: self.nx as isize,
                plane: (self.nx * self.ny) as isize,
                lo,
                hi,
                _data: PhantomData,
            })
        })
    }

    /// `f` of the 3 × 3 × 3 neighbourhood of point `i`: `window(i, -1, 1, f)`.
    #[inline(always)]
    pub fn around<R>(&self, i: usize, f: impl FnOnce(Window3<'a, T>) -> R) -> Option<R> {
        self.window(i, -1, 1, f)
    }
}

impl<'a, T: Copy> Window3<'a, T> {
    /// The point at offset `(dx, dy, dz)` from the window's centre.
    ///
    /// # Panics
    /// If an offset lies outside the window (a check the compiler removes for constant offsets).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, dx: isize, dy: isize, dz: isize) -> T {
        let inside = |d: isize| self.lo <= d && d <= self.hi;
        assert!(
            inside(dx) && inside(dy) && inside(dz),
            "offset outside the window"
        );
        // SAFETY: the window was made only when every point at offsets lo..=hi lay in the grid,
        // which is borrowed for 'a.
        unsafe {
            *self.data.add(
                self.centre
                    .wrapping_add_signed(dz * self.plane + dy * self.row + dx),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn windows_exist_exactly_where_they_fit() {
        let data: Vec<u32> = (0..5 * 4).collect();
        let g = Grid2::new(&data, 5, 4);
        for i in 0..20 {
            let (x, y) = g.coords(i);
            assert_eq!((x, y), (i % 5, i / 5));
            let interior = (1..4).contains(&x) && (1..3).contains(&y);
            let read = g.around(i, |w| (w.at(0, 0), w.at(-1, 1), w.at(1, -1)));
            match read {
                Some(values) => {
                    assert!(interior, "{i}");
                    assert_eq!(values, (i as u32, (i + 5 - 1) as u32, (i - 5 + 1) as u32));
                }
                None => assert!(!interior, "{i}"),
            }
            assert_eq!(g.window(i, 0, 1, |_| ()).is_some(), x < 4 && y < 3, "{i}");
        }
        assert!(g.around(20, |_| ()).is_none() && g.around(usize::MAX, |_| ()).is_none());
    }

    #[test]
    fn three_d_windows_reach_their_neighbours() {
        let data: Vec<u32> = (0..4 * 3 * 5).collect();
        let g = Grid3::new(&data, 4, 3, 5);
        let mut interior = 0;
        for i in 0..data.len() {
            let (x, y, z) = g.coords(i);
            assert_eq!(i, (z * 3 + y) * 4 + x);
            if let Some(values) = g.around(i, |w| (w.at(1, 1, 1), w.at(-1, 0, -1))) {
                interior += 1;
                assert_eq!(values, ((i + 12 + 4 + 1) as u32, (i - 12 - 1) as u32));
            }
            if let Some(corner) = g.window(i, 0, 1, |c| c.at(1, 1, 1)) {
                assert!(x < 3 && y < 2 && z < 4);
                assert_eq!(corner, (i + 17) as u32);
                assert_eq!(
                    g.window_at((x, y, z), 0, 1, |c| c.at(1, 1, 1)),
                    Some(corner)
                );
            }
        }
        assert_eq!(interior, 2 * 3);
    }

    #[test]
    #[should_panic(expected = "offset outside the window")]
    fn reading_outside_the_window_panics() {
        let data = [0u8; 9];
        Grid2::new(&data, 3, 3).around(4, |w| w.at(2, 0));
    }

    #[test]
    #[should_panic]
    fn a_grid_larger_than_its_slice_panics() {
        Grid3::new(&[0u8; 7], 2, 2, 2);
    }

    /// The bounds compared with are computed in 32 bits from the extents: a window wider than
    /// the grid, or coordinates beyond 32 bits, still give no window.
    #[test]
    fn windows_wider_than_the_grid_or_far_outside_it_do_not_exist() {
        let data: Vec<u8> = (0..3 * 2 * 2).collect();
        let g = Grid3::new(&data, 3, 2, 2);
        assert!(g.window(0, 0, 2, |_| ()).is_none());
        assert!(g.window(0, 0, isize::MAX, |_| ()).is_none());
        assert!(g.window_at((0, 0, 0), 0, 1, |w| w.at(1, 1, 1)) == Some(10));
        assert!(g.window_at((1, 0, 0), -1, 1, |_| ()).is_none());
        let far = u32::MAX as usize + 1;
        assert!(g.window_at((far, 0, 0), 0, 1, |_| ()).is_none());
        assert!(g.window_at((0, 0, far), 0, 0, |_| ()).is_none());
        let square: Vec<u8> = (0..13 * 13).collect();
        let g = Grid2::new(&square, 13, 13);
        let centre = 6 * 13 + 6;
        assert!(g.window(centre, -6, 6, |w| w.at(6, -6)) == Some(12));
        assert!(g.window(centre, -7, 6, |_| ()).is_none());
        assert!(g.window(centre, -6, 7, |_| ()).is_none());
    }
}
