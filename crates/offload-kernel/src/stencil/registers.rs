//! The GPU walk of a grid stencil (see the parent module's docs): each item a column of 16-byte
//! chunks down a strip, the rows around it in registers. Compiled on the host for its tests only.

use super::{lanes, zeroed_chunk, Neighbours2, Neighbours3, Row, Walk};
use crate::grid::div_rem;
use crate::index::GridStride;
use crate::wide::{WideElement, WIDE_BYTES};

/// Register blocking down columns of chunks.
pub(super) struct Registers;

impl Walk for Registers {
    #[inline(always)]
    unsafe fn walk2<T: WideElement>(
        input: *const T,
        out: *mut T,
        (nx, ny): (usize, usize),
        height: usize,
        interior: &impl Fn(Neighbours2<T>) -> T,
        edge: &impl Fn(usize, usize) -> T,
    ) {
        // SAFETY: per the trait's contract.
        unsafe {
            if rows_aligned(input, out, nx) {
                walk2::<T, true>(Source { ptr: input, nx }, out, ny, height, interior, edge)
            } else {
                walk2::<T, false>(Source { ptr: input, nx }, out, ny, height, interior, edge)
            }
        }
    }

    #[inline(always)]
    unsafe fn walk3<T: WideElement>(
        input: *const T,
        out: *mut T,
        (nx, ny, nz): (usize, usize, usize),
        height: usize,
        interior: &impl Fn(Neighbours3<T>) -> T,
        edge: &impl Fn(usize, usize, usize) -> T,
    ) {
        let extent = (ny, nz);
        // SAFETY: per the trait's contract.
        unsafe {
            if rows_aligned(input, out, nx) {
                walk3::<T, true>(
                    Source { ptr: input, nx },
                    out,
                    extent,
                    height,
                    interior,
                    edge,
                )
            } else {
                walk3::<T, false>(
                    Source { ptr: input, nx },
                    out,
                    extent,
                    height,
                    interior,
                    edge,
                )
            }
        }
    }
}

/// Rows a 2D walk has in flight beyond the three it computes with. One: on an H200 three and five
/// were slower (more registers, fewer threads per multiprocessor; docs/PERFORMANCE.md).
const AHEAD: usize = 1;

/// Planes a 3D walk has in flight beyond the three it computes with (three loads each).
const PLANES_AHEAD: usize = 1;

/// `window` moved down by one, `next` at the end. Element by element (not `copy_within`, a
/// memory move that would keep the window in local memory rather than registers).
#[inline(always)]
fn shifted<R: Copy, const N: usize>(window: [R; N], next: R) -> [R; N] {
    core::array::from_fn(|k| if k + 1 < N { window[k + 1] } else { next })
}

/// An input grid's points as a thread's walk reads them; `WIDE`: every row's chunks sit at
/// 16-byte boundaries (in the output too). A parameter of the type, not a field: the two ways
/// to read a chunk must be separate loops, else the compiler merges their loads into one that
/// has lost the 16-byte alignment.
struct Source<T, const WIDE: bool> {
    ptr: *const T,
    nx: usize,
}

impl<T: WideElement, const WIDE: bool> Source<T, WIDE> {
    /// The chunk at column `x0` of the row starting at `start`, with its left and right points.
    /// Points past the row's ends are read at the nearest end instead (their values go unused).
    ///
    /// # Safety
    /// `start` is the index of a row of the grid (`start + nx` points are readable).
    #[inline(always)]
    unsafe fn row(&self, start: usize, x0: usize) -> Row<T> {
        let last = self.nx - 1;
        // SAFETY: every index is start + (a column below nx).
        unsafe {
            let at = |x: usize| *self.ptr.add(start + x.min(last));
            let mid = if WIDE {
                // x0 + lanes <= nx (rows are whole chunks), and the chunk is 16-byte aligned.
                (self.ptr.add(start + x0) as *const T::Chunk).read()
            } else {
                let mut mid = zeroed_chunk::<T>();
                for (j, v) in mid.as_mut().iter_mut().enumerate() {
                    *v = at(x0 + j);
                }
                mid
            };
            Row {
                left: at(x0.saturating_sub(1)),
                mid,
                right: at(x0 + lanes::<T>()),
            }
        }
    }
}

/// Writes `values` into the chunk at column `x0` of the row starting at `start` (its lanes below
/// `nx` only).
///
/// # Safety
/// `start` is the index of a row of the output (`start + nx` points writable), whose chunk at
/// `x0` is the calling thread's alone; with `WIDE`, the chunk is whole and 16-byte aligned.
#[inline(always)]
unsafe fn store<T: WideElement, const WIDE: bool>(
    out: *mut T,
    start: usize,
    x0: usize,
    nx: usize,
    values: T::Chunk,
) {
    // SAFETY: per the contract.
    unsafe {
        if WIDE {
            (out.add(start + x0) as *mut T::Chunk).write(values);
        } else {
            for (j, &v) in values.as_ref().iter().enumerate() {
                if x0 + j < nx {
                    *out.add(start + x0 + j) = v;
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
    x0: usize,
    nx: usize,
    row_inside: bool,
    initial: T::Chunk,
    interior: impl Fn(usize) -> T,
    edge: impl Fn(usize) -> T,
) -> T::Chunk {
    let mut out = initial;
    if row_inside && x0 >= 1 && x0 + lanes::<T>() < nx {
        for (lane, v) in out.as_mut().iter_mut().enumerate() {
            *v = interior(lane);
        }
    } else {
        for (lane, v) in out.as_mut().iter_mut().enumerate() {
            let x = x0 + lane;
            if x < nx {
                *v = if row_inside && x >= 1 && x + 1 < nx {
                    interior(lane)
                } else {
                    edge(x)
                };
            }
        }
    }
    out
}

/// Whether `extent` points starting at `ptr` and `out` sit at 16-byte boundaries row by row.
#[inline(always)]
fn rows_aligned<T: WideElement>(input: *const T, out: *mut T, nx: usize) -> bool {
    (input as usize | out as usize) % WIDE_BYTES == 0 && nx % lanes::<T>() == 0
}

/// The walks of the strips of `height` rows this thread owns (see the module docs).
///
/// # Safety
/// `input` and `out` hold `input.nx * ny` points; every thread of the launch walks with the same
/// extents and height.
#[inline(always)]
unsafe fn walk2<T: WideElement, const WIDE: bool>(
    input: Source<T, WIDE>,
    out: *mut T,
    ny: usize,
    height: usize,
    interior: &impl Fn(Neighbours2<T>) -> T,
    edge: &impl Fn(usize, usize) -> T,
) {
    let nx = input.nx;
    let columns = nx.div_ceil(lanes::<T>());
    let items = columns * ny.div_ceil(height);
    let narrow = items <= u32::MAX as usize;
    for item in GridStride::mine(items, 0) {
        let (strip, column) = div_rem(item, columns, narrow);
        let x0 = column * lanes::<T>();
        let (y0, y1) = (strip * height, ((strip + 1) * height).min(ny));
        // SAFETY: every row index below is clamped into 0..ny, so each row start is the index
        // of a row of both grids. Item `item` is this thread's alone (grid-stride), and its
        // chunks (column `column` of rows y0..y1) are no other item's.
        unsafe {
            let row = |y: usize| input.row(y.min(ny - 1) * nx, x0);
            // Rows y - 1 ..= y + AHEAD: three in use, the others in flight.
            let mut rows: [Row<T>; AHEAD + 2] =
                core::array::from_fn(|k| row((y0 + k).saturating_sub(1)));
            for y in y0..y1 {
                let ahead = row(y + AHEAD + 1);
                let values = chunk_of::<T>(
                    x0,
                    nx,
                    y >= 1 && y + 1 < ny,
                    rows[1].mid,
                    |lane| {
                        let rows = [rows[0], rows[1], rows[2]];
                        interior(Neighbours2 { rows, lane })
                    },
                    |x| edge(x, y),
                );
                store::<T, WIDE>(out, y * nx, x0, nx, values);
                rows = shifted(rows, ahead);
            }
        }
    }
}

/// The walks along z of the strips of `height` planes this thread owns.
///
/// # Safety
/// `input` and `out` hold `input.nx * ny * nz` points; every thread of the launch walks with the
/// same extents and height.
#[inline(always)]
unsafe fn walk3<T: WideElement, const WIDE: bool>(
    input: Source<T, WIDE>,
    out: *mut T,
    (ny, nz): (usize, usize),
    height: usize,
    interior: &impl Fn(Neighbours3<T>) -> T,
    edge: &impl Fn(usize, usize, usize) -> T,
) {
    let nx = input.nx;
    let columns = nx.div_ceil(lanes::<T>());
    let items = columns * ny * nz.div_ceil(height);
    let plane = nx * ny;
    let narrow = items <= u32::MAX as usize;
    for item in GridStride::mine(items, 0) {
        let (rest, column) = div_rem(item, columns, narrow);
        let (strip, y) = div_rem(rest, ny, narrow);
        let x0 = column * lanes::<T>();
        let (z0, z1) = (strip * height, ((strip + 1) * height).min(nz));
        let ys = [y.saturating_sub(1), y, (y + 1).min(ny - 1)];
        let y_inside = y >= 1 && y + 1 < ny;
        // SAFETY: as in `walk2`: every row index is clamped into the grid, and item `item`
        // (column `column` of row y in planes z0..z1) is this thread's alone.
        unsafe {
            let rows = |z: usize| ys.map(|y| input.row(z.min(nz - 1) * plane + y * nx, x0));
            // Planes z - 1 ..= z + PLANES_AHEAD: three in use, the others in flight.
            let mut planes: [[Row<T>; 3]; PLANES_AHEAD + 2] =
                core::array::from_fn(|k| rows((z0 + k).saturating_sub(1)));
            for z in z0..z1 {
                let ahead = rows(z + PLANES_AHEAD + 1);
                let values = chunk_of::<T>(
                    x0,
                    nx,
                    y_inside && z >= 1 && z + 1 < nz,
                    planes[1][1].mid,
                    |lane| {
                        let planes = [planes[0], planes[1], planes[2]];
                        interior(Neighbours3 { planes, lane })
                    },
                    |x| edge(x, y, z),
                );
                store::<T, WIDE>(out, z * plane + y * nx, x0, nx, values);
                planes = shifted(planes, ahead);
            }
        }
    }
}
