//! Stencils over 2D and 3D grids that read each input point from memory about once.
//!
//! A kernel parameter written `#[grid(nx, ny)] out: &mut [T]` (or `#[grid(nx, ny, nz)]`) is an
//! output holding the points of a row-major grid (x fastest); the body sees it as a
//! [`GridOut2`] (or [`GridOut3`]) and writes it with [`GridOut2::stencil`]: one closure computes
//! each interior point from the 3 × 3 (× 3) neighbourhood of the same point of an input grid
//! ([`Neighbours2::at`]), another each border point from its coordinates.
//!
//! How ("2.5D" register blocking): a thread owns a column of 16-byte chunks (4 `f32`, 2 `f64`),
//! one per row over a strip of rows, and walks down it keeping the rows above, at and below (and
//! the next rows, in flight) in registers, each row as its chunk and the points left and right
//! of it. Every input row is read once per strip with one 16-byte load where the grid's rows are
//! 16-byte aligned, and the neighbours come from registers. Bounds are checked once per launch
//! (the grids hold their points), never per access: `at`'s offsets are constants, checked
//! against the 3 × 3 window at compile time. In 2D a strip away from the grid's border is walked
//! with no check at all (32-bit coordinates, pointers moved a row at a time: few registers, so
//! many threads per multiprocessor), and the strips at the border point by point. In 3D the
//! walk runs along z, with three rows (y - 1, y, y + 1) per plane, interior or border decided
//! per chunk; what a stencil does not read (the corners of a 7-point one) the compiler drops,
//! loads included.
//!
//! Ownership: work item `k` is the column of chunk `k % columns` in strip `k / columns` (in 3D,
//! of row y too); items are shared out grid-stride, so any launch covers the output once. The
//! strip height is `columns × rows / global_threads()` rounded up, at least [`MIN_STRIP_ROWS`]:
//! the same in every thread, and as tall as the launch lets it be with every thread busy. The
//! default launch of a kernel with a `#[grid]` output gives each thread one strip of
//! `MIN_STRIP_ROWS` rows ([`STRIP_BYTES`] of output).

use crate::grid::{div_rem, Grid2, Grid3};
use crate::index::{global_threads, GridStride};
use crate::thread_slice::ThreadSlice;
use crate::wide::{WideElement, WIDE_BYTES};
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};

/// A `#[grid(nx, ny)] &mut [T]` kernel parameter: the `nx × ny` points of a row-major output
/// grid, written by [`stencil`](Self::stencil) (see the module docs).
pub struct GridOut2<'a, T> {
    ptr: *mut T,
    nx: usize,
    ny: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

/// A `#[grid(nx, ny, nz)] &mut [T]` kernel parameter: the `nx × ny × nz` points of a row-major
/// output grid (x fastest, then y), written by [`stencil`](Self::stencil).
pub struct GridOut3<'a, T> {
    ptr: *mut T,
    nx: usize,
    ny: usize,
    nz: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

/// The 3 × 3 input points around one interior output point of [`GridOut2::stencil`], held in
/// registers.
#[derive(Clone, Copy)]
pub struct Neighbours2<T: WideElement> {
    /// Rows y - 1, y, y + 1.
    rows: [Row<T>; 3],
    lane: usize,
}

/// The 3 × 3 × 3 input points around one interior output point of [`GridOut3::stencil`].
#[derive(Clone, Copy)]
pub struct Neighbours3<T: WideElement> {
    /// Planes z - 1, z, z + 1, each with rows y - 1, y, y + 1.
    planes: [[Row<T>; 3]; 3],
    lane: usize,
}

/// One row of a thread's column in registers: its chunk and the points left and right of it.
#[derive(Clone, Copy)]
struct Row<T: WideElement> {
    left: T,
    mid: T::Chunk,
    right: T,
}

/// Rows a 2D walk has in flight beyond the three it computes with. Two: on an H200 the interior
/// walk takes 48 registers with one or two, and two was the faster (docs/PERFORMANCE.md).
const AHEAD: usize = 2;

/// Planes a 3D walk has in flight beyond the three it computes with (three loads each).
const PLANES_AHEAD: usize = 1;

/// Rows (planes in 3D) a thread walks at least: below it, the rows it reads around its strip
/// outnumber the rows it writes. Eight was the fastest strip on an H200 (2D, 16384² f32).
pub const MIN_STRIP_ROWS: usize = 8;

/// Bytes of output each thread covers in a default launch of a kernel with a `#[grid]` output
/// (the runtime sizes the grid by it): one strip of the shortest height, 16 bytes per row.
pub const STRIP_BYTES: usize = WIDE_BYTES * MIN_STRIP_ROWS;

/// Elements per 16-byte chunk.
#[inline(always)]
const fn lanes<T: WideElement>() -> usize {
    WIDE_BYTES / size_of::<T>()
}

/// Whether offsets `dx`, `dy` (and `dz`) lie in the 3 × 3 (× 3) window.
#[inline(always)]
fn within(d: isize) -> bool {
    (-1..2).contains(&d)
}

impl<T: WideElement> Row<T> {
    /// The point at offset `dx` (-1, 0 or 1) from lane `lane` of the chunk.
    #[inline(always)]
    fn at(&self, lane: usize, dx: isize) -> T {
        match lane as isize + dx {
            -1 => self.left,
            j if j as usize == lanes::<T>() => self.right,
            j => self.mid.as_ref()[j as usize],
        }
    }
}

impl<T: WideElement> Neighbours2<T> {
    /// The input point at offset `(dx, dy)` from the output point's own.
    ///
    /// # Panics
    /// If an offset is not -1, 0 or 1 (a check the compiler removes for constant offsets).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, dx: isize, dy: isize) -> T {
        assert!(within(dx) && within(dy), "offset outside the 3 x 3 window");
        self.rows[(dy + 1) as usize].at(self.lane, dx)
    }
}

impl<T: WideElement> Neighbours3<T> {
    /// The input point at offset `(dx, dy, dz)` from the output point's own.
    ///
    /// # Panics
    /// If an offset is not -1, 0 or 1 (a check the compiler removes for constant offsets).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, dx: isize, dy: isize, dz: isize) -> T {
        assert!(
            within(dx) && within(dy) && within(dz),
            "offset outside the 3 x 3 x 3 window"
        );
        self.planes[(dz + 1) as usize][(dy + 1) as usize].at(self.lane, dx)
    }
}

/// `window` moved down by one, `next` at the end. Element by element (not `copy_within`, a
/// memory move that would keep the window in local memory rather than registers).
#[inline(always)]
fn shifted<R: Copy, const N: usize>(window: [R; N], next: R) -> [R; N] {
    core::array::from_fn(|k| if k + 1 < N { window[k + 1] } else { next })
}

/// A chunk to overwrite lane by lane.
#[inline(always)]
fn zeroed_chunk<T: WideElement>() -> T::Chunk {
    // SAFETY: every `WideElement` (a sealed trait) is a primitive number, `f16` or `bf16`, for
    // which all-zero bytes are a value, and a chunk holds nothing else.
    unsafe { MaybeUninit::<T::Chunk>::zeroed().assume_init() }
}

/// The chunk at `chunk` with its left and right points, as a walk reads a row; `WIDE`: the chunk
/// sits at a 16-byte boundary. A parameter, not an argument: the two ways to read a chunk must
/// be separate loops, else the compiler merges their loads into one that has lost the 16-byte
/// alignment.
///
/// # Safety
/// The points from `chunk - 1` to `chunk + lanes` are readable.
#[inline(always)]
unsafe fn inner_row<T: WideElement, const WIDE: bool>(chunk: *const T) -> Row<T> {
    // SAFETY: per the contract.
    unsafe {
        let mid = if WIDE {
            (chunk as *const T::Chunk).read()
        } else {
            let mut mid = zeroed_chunk::<T>();
            for (j, v) in mid.as_mut().iter_mut().enumerate() {
                *v = *chunk.add(j);
            }
            mid
        };
        Row {
            left: *chunk.sub(1),
            mid,
            right: *chunk.add(lanes::<T>()),
        }
    }
}

/// The points left of, at and right of `p` as a `Row` whose lane 0 is `p` (its other lanes
/// repeat the right one: a window reads lanes -1 ..= 1 around lane 0 only).
///
/// # Safety
/// The points from `p - 1` to `p + 1` are readable.
#[inline(always)]
unsafe fn point_row<T: WideElement>(p: *const T) -> Row<T> {
    // SAFETY: per the contract.
    let (left, at, right) = unsafe { (*p.sub(1), *p, *p.add(1)) };
    let mut mid = zeroed_chunk::<T>();
    for (j, v) in mid.as_mut().iter_mut().enumerate() {
        *v = if j == 0 { at } else { right };
    }
    Row { left, mid, right }
}

/// An input grid's points as the 3D walk reads them; `WIDE`: every row's chunks sit at
/// 16-byte boundaries (in the output too). A parameter of the type, not a field: the two ways
/// to read a chunk must be separate loops, else the compiler merges their loads into one that
/// has lost the 16-byte alignment.
struct Source<T, const WIDE: bool> {
    ptr: *const T,
    nx: u32,
}

impl<T: WideElement, const WIDE: bool> Source<T, WIDE> {
    /// The chunk at `chunk` (column `x0` of a row), with its left and right points. Points past
    /// the row's ends are read at the nearest end instead (their values go unused).
    ///
    /// # Safety
    /// `chunk` is column `x0` of a row of the grid (`nx - x0` points from it are readable).
    #[inline(always)]
    unsafe fn row(&self, chunk: *const T, x0: u32) -> Row<T> {
        // Columns after x0 in the row: every offset is clamped to it.
        let rest = self.nx - 1 - x0;
        let lanes = lanes::<T>() as u32;
        // SAFETY: every offset is at most `rest`, or -1 where x0 >= 1.
        unsafe {
            let at = |j: u32| *chunk.add(j.min(rest) as usize);
            let mid = if WIDE {
                // x0 + lanes <= nx (rows are whole chunks), and the chunk is 16-byte aligned.
                (chunk as *const T::Chunk).read()
            } else {
                let mut mid = zeroed_chunk::<T>();
                for (j, v) in mid.as_mut().iter_mut().enumerate() {
                    *v = at(j as u32);
                }
                mid
            };
            Row {
                left: if x0 >= 1 { *chunk.sub(1) } else { *chunk },
                mid,
                right: at(lanes),
            }
        }
    }
}

/// Writes `values` into the chunk at `chunk`, column `x0` of a row (its lanes below `nx` only).
///
/// # Safety
/// `chunk` is column `x0` of a row of the output (`nx - x0` points writable from it), the
/// calling thread's alone; with `WIDE`, the chunk is whole and 16-byte aligned.
#[inline(always)]
unsafe fn store<T: WideElement, const WIDE: bool>(
    chunk: *mut T,
    x0: u32,
    nx: u32,
    values: T::Chunk,
) {
    // SAFETY: per the contract.
    unsafe {
        if WIDE {
            (chunk as *mut T::Chunk).write(values);
        } else {
            for (j, &v) in values.as_ref().iter().enumerate() {
                if (j as u32) < nx - x0 {
                    *chunk.add(j) = v;
                }
            }
        }
    }
}

/// The output chunk at column `x0` of a row: `interior(lane)` where the point and its
/// neighbours lie inside the grid (`row_inside`: the row is not a border one), else
/// `edge(x)`.
#[inline(always)]
fn chunk_of<T: WideElement>(
    x0: u32,
    nx: u32,
    row_inside: bool,
    initial: T::Chunk,
    interior: impl Fn(usize) -> T,
    edge: impl Fn(usize) -> T,
) -> T::Chunk {
    let mut out = initial;
    let lanes = lanes::<T>() as u32;
    if row_inside && x0 >= 1 && nx - x0 > lanes {
        for (lane, v) in out.as_mut().iter_mut().enumerate() {
            *v = interior(lane);
        }
    } else {
        for (lane, v) in out.as_mut().iter_mut().enumerate() {
            if lane as u32 >= nx - x0 {
                break;
            }
            let x = x0 + lane as u32;
            *v = if row_inside && x >= 1 && x + 1 < nx {
                interior(lane)
            } else {
                edge(x as usize)
            };
        }
    }
    out
}

/// Rows per strip when `chunk_rows` chunk rows are shared among the launch's threads: at least
/// `MIN_STRIP_ROWS`, at most `rows` (the strip's axis), and 1 for an empty axis.
#[inline(always)]
fn strip_height(chunk_rows: usize, rows: u32) -> u32 {
    chunk_rows
        .div_ceil(global_threads())
        .max(MIN_STRIP_ROWS)
        .min(rows as usize)
        .max(1) as u32
}

/// Whether `extent` points starting at `ptr` and `out` sit at 16-byte boundaries row by row.
#[inline(always)]
fn rows_aligned<T: WideElement>(input: *const T, out: *mut T, nx: u32) -> bool {
    (input as usize | out as usize) % WIDE_BYTES == 0 && nx as usize % lanes::<T>() == 0
}

impl<'a, T> GridOut2<'a, T> {
    /// The kernel parameter `slice` as an `nx × ny` grid, consumed before the body runs
    /// (`#[grid(nx, ny)]`).
    ///
    /// # Safety
    /// `slice` is a whole kernel parameter that no thread has used, and every thread of the
    /// launch converts its own view of it with the same `nx` and `ny`.
    ///
    /// # Panics
    /// If the slice does not hold `nx * ny` points.
    #[doc(hidden)]
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_thread_slice(mut slice: ThreadSlice<'a, T>, nx: usize, ny: usize) -> Self {
        assert!(
            nx.checked_mul(ny) == Some(slice.len()),
            "#[grid(nx, ny)]: the output does not hold nx * ny points"
        );
        GridOut2 {
            ptr: slice.as_mut_ptr(),
            nx,
            ny,
            _borrow: PhantomData,
        }
    }

    /// Points along x and y.
    #[inline(always)]
    pub fn extent(&self) -> (usize, usize) {
        (self.nx, self.ny)
    }
}

impl<'a, T: WideElement> GridOut2<'a, T> {
    /// Writes every point `(x, y)` of the output this thread owns: `interior(p)` where the 3 × 3
    /// neighbourhood `p` of `(x, y)` in `input` lies inside the grid, else `edge(x, y)`. Together
    /// the launch's threads write every point once, whatever the launch shape (see the module
    /// docs for the launch that reads the input once).
    ///
    /// # Panics
    /// If `input`'s extent is not the output's.
    #[inline(always)]
    #[track_caller]
    pub fn stencil(
        &mut self,
        input: &Grid2<'_, T>,
        interior: impl Fn(Neighbours2<T>) -> T,
        edge: impl Fn(usize, usize) -> T,
    ) {
        let (nx, ny) = (self.nx, self.ny);
        assert!(
            input.extent() == (nx, ny),
            "stencil: the input grid's extent is not the output's"
        );
        if nx == 0 || ny == 0 {
            return;
        }
        // Both fit in 32 bits: `Grid2::new` takes them as `u32`.
        let (nx, ny) = (nx as u32, ny as u32);
        let columns = nx.div_ceil(lanes::<T>() as u32) as usize;
        let height = strip_height(columns * ny as usize, ny);
        let (from, to) = (input.as_slice().as_ptr(), self.ptr);
        // SAFETY: the input holds nx * ny points (checked by `Grid2::new`), as does the output
        // (checked when it was made), whose points every thread of the launch shares out alike.
        unsafe {
            if rows_aligned(from, to, nx) {
                walk2::<T, true>((from, to), (nx, ny), height, &interior, &edge)
            } else {
                walk2::<T, false>((from, to), (nx, ny), height, &interior, &edge)
            }
        }
    }
}

/// The walks of the strips of `height` rows this thread owns (see the module docs): a strip
/// away from the grid's border in `interior_rows2`, the others point by point in
/// `border_points2`. Coordinates are 32-bit, rows reached by moving pointers.
///
/// # Safety
/// `input` and `out` hold `nx * ny` points; every thread of the launch walks with the same
/// extents and height.
#[inline(always)]
unsafe fn walk2<T: WideElement, const WIDE: bool>(
    (input, out): (*const T, *mut T),
    (nx, ny): (u32, u32),
    height: u32,
    interior: &impl Fn(Neighbours2<T>) -> T,
    edge: &impl Fn(usize, usize) -> T,
) {
    let row_len = nx as usize;
    let lanes = lanes::<T>() as u32;
    let columns = nx.div_ceil(lanes) as usize;
    let items = columns * ny.div_ceil(height) as usize;
    let narrow = items <= u32::MAX as usize;
    for item in GridStride::mine(items, 0) {
        let (strip, column) = div_rem(item, columns, narrow);
        // Both below 2^32: strip < ny, column < nx.
        let x0 = column as u32 * lanes;
        let y0 = strip as u32 * height;
        let y1 = y0.saturating_add(height).min(ny);
        // A strip away from every border walks its rows in `interior_rows2`; the others (two
        // per column, and the columns at either side) point by point. Either, not both: what
        // one needs after the other would stay live through the interior's loop.
        if x0 >= 1 && nx - x0 > lanes && y0 >= 1 && y1 < ny {
            let at = y0 as usize * row_len + x0 as usize;
            // SAFETY: rows y0 - 1 ..= y1 lie in the grid, as do the points from x0 - 1 to
            // x0 + lanes; the output chunks (whole, as x0 + lanes < nx) are item `item`'s alone
            // (grid-stride), so this thread's.
            unsafe {
                interior_rows2::<T, WIDE>((input.add(at), out.add(at)), y1 - y0, row_len, interior);
            }
        } else {
            // SAFETY: as above.
            unsafe { border_points2((input, out), (nx, ny), (x0, y0, y1), interior, edge) };
        }
    }
}

/// The output chunks at `out` and the `rows - 1` rows below it (`row_len` points apart), away
/// from the grid's border, from the input rows around the chunk at `input`: rows above, at and
/// below in registers and the `AHEAD` rows below those in flight (read before they are needed),
/// each row read once (the last one re-read rather than one past it). No bounds to check and no border case in the loop: its registers are few, so that
/// many threads fit on a multiprocessor.
///
/// # Safety
/// The input points from `input - row_len - 1` to `input + rows * row_len + lanes` are
/// readable; the output chunks are the calling thread's alone, 16-byte aligned with `WIDE`.
#[inline(always)]
unsafe fn interior_rows2<T: WideElement, const WIDE: bool>(
    (input, out): (*const T, *mut T),
    rows: u32,
    row_len: usize,
    interior: &impl Fn(Neighbours2<T>) -> T,
) {
    let ahead = AHEAD as u32;
    let compute = |rows: [Row<T>; 3]| {
        let mut values = rows[1].mid;
        for (lane, v) in values.as_mut().iter_mut().enumerate() {
            *v = interior(Neighbours2 { rows, lane });
        }
        values
    };
    // SAFETY: every row read is one of -1 ..= rows from `input`, every row written one of
    // 0..rows from `out`.
    unsafe {
        let above = input.sub(row_len);
        // Rows -1 ..= AHEAD, the later ones clamped to `rows`.
        let mut window: [Row<T>; AHEAD + 2] = core::array::from_fn(|k| {
            inner_row::<T, WIDE>(above.add((k as u32).min(rows + 1) as usize * row_len))
        });
        // The last row read.
        let mut next = input.add(ahead.min(rows) as usize * row_len);
        let mut dst = out;
        for i in 0..rows {
            if rows - i > ahead {
                next = next.add(row_len);
            }
            let later = inner_row::<T, WIDE>(next);
            let values = compute([window[0], window[1], window[2]]);
            if WIDE {
                (dst as *mut T::Chunk).write(values);
            } else {
                for (j, &v) in values.as_ref().iter().enumerate() {
                    *dst.add(j) = v;
                }
            }
            // Past the output's end after its last row: never written through.
            dst = dst.wrapping_add(row_len);
            window = shifted(window, later);
        }
    }
}

/// The points at columns `x0..x0 + lanes` (those below `nx`) of rows `y0..y1`, one by one:
/// `interior` from the point's own neighbours (read afresh) or `edge(x, y)`. Few registers, so
/// that this rarely taken path does not lower how many threads fit on a multiprocessor.
///
/// # Safety
/// `input` and `out` hold `nx * ny` points, and the output points are the calling thread's.
#[inline(always)]
unsafe fn border_points2<T: WideElement>(
    (input, out): (*const T, *mut T),
    (nx, ny): (u32, u32),
    (x0, y0, y1): (u32, u32, u32),
    interior: &impl Fn(Neighbours2<T>) -> T,
    edge: &impl Fn(usize, usize) -> T,
) {
    let row_len = nx as usize;
    let x1 = x0 + (nx - x0).min(lanes::<T>() as u32);
    for y in y0..y1 {
        for x in x0..x1 {
            let at = y as usize * row_len + x as usize;
            // SAFETY: an interior point's neighbours lie in the grid; `at` is in it.
            unsafe {
                *out.add(at) = if y >= 1 && y + 1 < ny && x >= 1 && x + 1 < nx {
                    let p = input.add(at);
                    let rows = [p.sub(row_len), p, p.add(row_len)].map(|p| point_row(p));
                    interior(Neighbours2 { rows, lane: 0 })
                } else {
                    edge(x as usize, y as usize)
                };
            }
        }
    }
}

impl<'a, T> GridOut3<'a, T> {
    /// The kernel parameter `slice` as an `nx × ny × nz` grid, consumed before the body runs
    /// (`#[grid(nx, ny, nz)]`).
    ///
    /// # Safety
    /// As for [`GridOut2::from_thread_slice`], with the same `nx`, `ny` and `nz` in every thread.
    ///
    /// # Panics
    /// If the slice does not hold `nx * ny * nz` points.
    #[doc(hidden)]
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_thread_slice(
        mut slice: ThreadSlice<'a, T>,
        nx: usize,
        ny: usize,
        nz: usize,
    ) -> Self {
        assert!(
            nx.checked_mul(ny).and_then(|p| p.checked_mul(nz)) == Some(slice.len()),
            "#[grid(nx, ny, nz)]: the output does not hold nx * ny * nz points"
        );
        GridOut3 {
            ptr: slice.as_mut_ptr(),
            nx,
            ny,
            nz,
            _borrow: PhantomData,
        }
    }

    /// Points along x, y and z.
    #[inline(always)]
    pub fn extent(&self) -> (usize, usize, usize) {
        (self.nx, self.ny, self.nz)
    }
}

impl<'a, T: WideElement> GridOut3<'a, T> {
    /// Writes every point `(x, y, z)` of the output this thread owns: `interior(p)` where the
    /// 3 × 3 × 3 neighbourhood `p` of `(x, y, z)` in `input` lies inside the grid, else
    /// `edge(x, y, z)`. Together the launch's threads write every point once, whatever the
    /// launch shape.
    ///
    /// # Panics
    /// If `input`'s extent is not the output's.
    #[inline(always)]
    #[track_caller]
    pub fn stencil(
        &mut self,
        input: &Grid3<'_, T>,
        interior: impl Fn(Neighbours3<T>) -> T,
        edge: impl Fn(usize, usize, usize) -> T,
    ) {
        let (nx, ny, nz) = (self.nx, self.ny, self.nz);
        assert!(
            input.extent() == (nx, ny, nz),
            "stencil: the input grid's extent is not the output's"
        );
        if nx == 0 || ny == 0 || nz == 0 {
            return;
        }
        // Each fits in 32 bits: `Grid3::new` takes them as `u32`.
        let (nx, ny, nz) = (nx as u32, ny as u32, nz as u32);
        let columns = nx.div_ceil(lanes::<T>() as u32) as usize;
        let height = strip_height(columns * ny as usize * nz as usize, nz);
        let (from, to) = (input.as_slice().as_ptr(), self.ptr);
        let extent = (ny, nz);
        // SAFETY: as in `GridOut2::stencil`.
        unsafe {
            if rows_aligned(from, to, nx) {
                walk3::<T, true>(
                    Source { ptr: from, nx },
                    to,
                    extent,
                    height,
                    &interior,
                    &edge,
                )
            } else {
                walk3::<T, false>(
                    Source { ptr: from, nx },
                    to,
                    extent,
                    height,
                    &interior,
                    &edge,
                )
            }
        }
    }
}

/// The walks along z of the strips of `height` planes this thread owns, with 32-bit
/// coordinates and pointers moved a plane at a time, as in `walk2`.
///
/// # Safety
/// `input` and `out` hold `input.nx * ny * nz` points; every thread of the launch walks with the
/// same extents and height.
#[inline(always)]
unsafe fn walk3<T: WideElement, const WIDE: bool>(
    input: Source<T, WIDE>,
    out: *mut T,
    (ny, nz): (u32, u32),
    height: u32,
    interior: &impl Fn(Neighbours3<T>) -> T,
    edge: &impl Fn(usize, usize, usize) -> T,
) {
    let nx = input.nx;
    let row_len = nx as usize;
    let plane = row_len * ny as usize;
    let columns = nx.div_ceil(lanes::<T>() as u32) as usize;
    let items = columns * ny as usize * nz.div_ceil(height) as usize;
    let narrow = items <= u32::MAX as usize;
    for item in GridStride::mine(items, 0) {
        let (rest, column) = div_rem(item, columns, narrow);
        let (strip, y) = div_rem(rest, ny as usize, narrow);
        // Each below 2^32: strip < nz, y < ny, column < nx.
        let (y, x0) = (y as u32, column as u32 * lanes::<T>() as u32);
        let z0 = strip as u32 * height;
        let z1 = z0.saturating_add(height).min(nz);
        // Rows y - 1 and y + 1 from row y's chunk, clamped into the plane.
        let up = if y >= 1 { row_len } else { 0 };
        let down = if y + 1 < ny { row_len } else { 0 };
        let y_inside = y >= 1 && y + 1 < ny;
        // SAFETY: every plane read is clamped into 0..nz and every row into 0..ny, and item
        // `item` (column `column` of row y in planes z0..z1) is this thread's alone
        // (grid-stride).
        unsafe {
            let chunk = |z: u32| {
                let row = z.min(nz - 1) as usize * plane + y as usize * row_len;
                input.ptr.add(row + x0 as usize)
            };
            let rows = |at: *const T| {
                [
                    input.row(at.sub(up), x0),
                    input.row(at, x0),
                    input.row(at.add(down), x0),
                ]
            };
            // Planes z - 1 ..= z + PLANES_AHEAD: three in use, the others in flight.
            let mut planes: [[Row<T>; 3]; PLANES_AHEAD + 2] =
                core::array::from_fn(|k| rows(chunk((z0 + k as u32).saturating_sub(1))));
            // Row y's chunk in the last plane read (z + PLANES_AHEAD, clamped), and in the
            // output's plane z.
            let mut next = chunk(z0.saturating_add(PLANES_AHEAD as u32));
            let mut dst = out.add(z0 as usize * plane + y as usize * row_len + x0 as usize);
            for z in z0..z1 {
                if nz - z > PLANES_AHEAD as u32 + 1 {
                    next = next.add(plane);
                }
                let ahead = rows(next);
                let values = chunk_of::<T>(
                    x0,
                    nx,
                    y_inside && z >= 1 && z + 1 < nz,
                    planes[1][1].mid,
                    |lane| {
                        let planes = [planes[0], planes[1], planes[2]];
                        interior(Neighbours3 { planes, lane })
                    },
                    |x| edge(x, y as usize, z as usize),
                );
                store::<T, WIDE>(dst, x0, nx, values);
                // Past the output's end after its last plane: never written through.
                dst = dst.wrapping_add(plane);
                planes = shifted(planes, ahead);
            }
        }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::cell::RefCell;
    use std::vec;
    use std::vec::Vec;

    /// Runs `body` as every thread of a `blocks × threads` launch in turn.
    fn launch(blocks: u32, threads: u32, mut body: impl FnMut()) {
        for b in 0..blocks {
            for t in 0..threads {
                let ctx = ThreadContext {
                    thread_idx: Dim3::new(t, 0, 0),
                    block_idx: Dim3::new(b, 0, 0),
                    block_dim: Dim3::new(threads, 1, 1),
                    grid_dim: Dim3::new(blocks, 1, 1),
                    warp_size: 32,
                };
                with_thread(ctx, &mut body);
            }
        }
    }

    /// The 5-point stencil (border points copied) as a plain loop.
    fn five_point(input: &[f32], nx: usize, ny: usize) -> Vec<f32> {
        let mut out = input.to_vec();
        for y in 1..ny.saturating_sub(1) {
            for x in 1..nx.saturating_sub(1) {
                let i = y * nx + x;
                out[i] = 0.5 * input[i]
                    + 0.125 * (input[i - 1] + input[i + 1] + input[i - nx] + input[i + nx]);
            }
        }
        out
    }

    /// `GridOut2::stencil` with the 5-point stencil, on `input[skip..]` into `out[skip..]`
    /// (a `skip` that is not a multiple of 4 takes the unaligned path).
    fn five_point_tiles(nx: usize, ny: usize, skip: usize, blocks: u32, threads: u32) -> Vec<f32> {
        let input: Vec<f32> = (0..skip + nx * ny)
            .map(|i| (i * 7919 % 1009) as f32)
            .collect();
        let mut out = vec![f32::NAN; skip + nx * ny];
        launch(blocks, threads, || {
            let grid = Grid2::new(&input[skip..], nx as u32, ny as u32);
            // SAFETY: `out` outlives the launch; every thread converts the same whole view.
            let mut tiles = unsafe {
                let view = ThreadSlice::from_raw_parts(out.as_mut_ptr().add(skip), nx * ny);
                GridOut2::from_thread_slice(view, nx, ny)
            };
            tiles.stencil(
                &grid,
                |p| {
                    0.5 * p.at(0, 0) + 0.125 * (p.at(-1, 0) + p.at(1, 0) + p.at(0, -1) + p.at(0, 1))
                },
                |x, y| grid.get(y * nx + x),
            );
        });
        assert_eq!(
            out[skip..],
            five_point(&input[skip..], nx, ny)[..],
            "{nx}x{ny}, skip {skip}, {blocks}x{threads}"
        );
        out
    }

    #[test]
    fn a_2d_stencil_equals_the_plain_loop_for_any_extent_alignment_and_launch() {
        for (nx, ny) in [
            (1, 1),
            (2, 3),
            (3, 2),
            (5, 7),
            (13, 9),
            (16, 8),
            (4, 1),
            (1, 6),
            (33, 5),
            (21, 30),
            (40, 27),
        ] {
            for skip in [0, 1, 2, 4] {
                for (blocks, threads) in [(1, 1), (1, 3), (2, 5), (3, 64), (7, 32)] {
                    five_point_tiles(nx, ny, skip, blocks, threads);
                }
            }
        }
    }

    /// Every point is computed once: the interior closure sees each interior point once and the
    /// edge closure each border point once, whatever the launch.
    #[test]
    fn each_point_is_computed_once() {
        for (nx, ny) in [(9, 7), (16, 16), (5, 2), (9, 30)] {
            for (blocks, threads) in [(1, 1), (2, 3), (4, 32)] {
                let input: Vec<u32> = (0..(nx * ny) as u32).collect();
                let mut out = vec![0u32; nx * ny];
                let calls = RefCell::new(vec![0u32; nx * ny]);
                launch(blocks, threads, || {
                    let grid = Grid2::new(&input, nx as u32, ny as u32);
                    // SAFETY: as above.
                    let mut tiles = unsafe {
                        let view = ThreadSlice::from_raw_parts(out.as_mut_ptr(), nx * ny);
                        GridOut2::from_thread_slice(view, nx, ny)
                    };
                    tiles.stencil(
                        &grid,
                        |p| {
                            calls.borrow_mut()[p.at(0, 0) as usize] += 1;
                            p.at(1, 1) - p.at(-1, -1)
                        },
                        |x, y| {
                            calls.borrow_mut()[y * nx + x] += 1;
                            0
                        },
                    );
                });
                assert!(
                    calls.borrow().iter().all(|&c| c == 1),
                    "{nx}x{ny} {blocks}x{threads}"
                );
                for (i, &v) in out.iter().enumerate() {
                    let (x, y) = (i % nx, i / nx);
                    let interior = x >= 1 && x + 1 < nx && y >= 1 && y + 1 < ny;
                    assert_eq!(v, if interior { 2 * nx as u32 + 2 } else { 0 }, "{i}");
                }
            }
        }
    }

    /// The 7-point stencil (border points copied) as a plain loop.
    fn seven_point(input: &[f64], (nx, ny, nz): (usize, usize, usize)) -> Vec<f64> {
        let mut out = input.to_vec();
        let plane = nx * ny;
        for z in 1..nz.saturating_sub(1) {
            for y in 1..ny.saturating_sub(1) {
                for x in 1..nx.saturating_sub(1) {
                    let i = z * plane + y * nx + x;
                    out[i] = 0.25 * input[i]
                        + 0.125
                            * (input[i - 1]
                                + input[i + 1]
                                + input[i - nx]
                                + input[i + nx]
                                + input[i - plane]
                                + input[i + plane]);
                }
            }
        }
        out
    }

    #[test]
    fn a_3d_stencil_equals_the_plain_loop_for_any_extent_alignment_and_launch() {
        for extent in [
            (1, 1, 1),
            (3, 3, 3),
            (5, 4, 6),
            (8, 3, 4),
            (2, 9, 5),
            (7, 7, 2),
            (9, 5, 20),
        ] {
            let (nx, ny, nz) = extent;
            let n = nx * ny * nz;
            for skip in [0, 1, 2] {
                for (blocks, threads) in [(1, 1), (2, 5), (3, 64)] {
                    let input: Vec<f64> = (0..skip + n).map(|i| (i * 7919 % 1009) as f64).collect();
                    let mut out = vec![f64::NAN; skip + n];
                    launch(blocks, threads, || {
                        let grid = Grid3::new(&input[skip..], nx as u32, ny as u32, nz as u32);
                        // SAFETY: as above.
                        let mut tiles = unsafe {
                            let view = ThreadSlice::from_raw_parts(out.as_mut_ptr().add(skip), n);
                            GridOut3::from_thread_slice(view, nx, ny, nz)
                        };
                        tiles.stencil(
                            &grid,
                            |p| {
                                0.25 * p.at(0, 0, 0)
                                    + 0.125
                                        * (p.at(-1, 0, 0)
                                            + p.at(1, 0, 0)
                                            + p.at(0, -1, 0)
                                            + p.at(0, 1, 0)
                                            + p.at(0, 0, -1)
                                            + p.at(0, 0, 1))
                            },
                            |x, y, z| grid.get((z * ny + y) * nx + x),
                        );
                    });
                    assert_eq!(
                        out[skip..],
                        seven_point(&input[skip..], extent)[..],
                        "{extent:?}, skip {skip}, {blocks}x{threads}"
                    );
                }
            }
        }
    }

    /// `out` as an `nx` x `ny` grid output of a launch of one thread (the panic tests').
    fn one_thread_grid_out(out: &mut [f32], nx: usize, ny: usize) -> GridOut2<'_, f32> {
        let len = out.len();
        // SAFETY: one thread owns the whole view, which borrows `out` for its lifetime.
        unsafe {
            GridOut2::from_thread_slice(ThreadSlice::from_raw_parts(out.as_mut_ptr(), len), nx, ny)
        }
    }

    #[test]
    #[should_panic(expected = "offset outside the 3 x 3 window")]
    fn an_offset_outside_the_window_panics() {
        let input = [0.0f32; 9];
        let mut out = [0.0f32; 9];
        let grid = Grid2::new(&input, 3, 3);
        one_thread_grid_out(&mut out, 3, 3).stencil(&grid, |p| p.at(2, 0), |_, _| 0.0);
    }

    #[test]
    #[should_panic(expected = "the output does not hold nx * ny points")]
    fn an_output_of_the_wrong_length_panics() {
        let mut out = [0.0f32; 10];
        one_thread_grid_out(&mut out, 3, 3);
    }

    #[test]
    #[should_panic(expected = "the input grid's extent is not the output's")]
    fn grids_of_different_extents_panic() {
        let input = [0.0f32; 12];
        let mut out = [0.0f32; 12];
        let grid = Grid2::new(&input, 4, 3);
        one_thread_grid_out(&mut out, 3, 4).stencil(&grid, |p| p.at(0, 0), |_, _| 0.0);
    }
}
