//! The GPU walk of a grid stencil (see the parent module's docs): each item a column of 16-byte
//! chunks down a strip, the rows around it in registers. A 2D strip away from the grid's border
//! is walked with no check at all (32-bit coordinates, pointers moved a row at a time: few
//! registers, so many threads per multiprocessor), the strips at the border point by point; in
//! 3D, an interior row's planes away from the z border likewise, with the planes ahead
//! prefetched, and the border points a few planes at a time. Compiled on the host for its tests
//! only.

use super::prefetch::prefetch_l2;
use super::{lanes, zeroed_chunk, Neighbours2, Neighbours3, Row, Walk, MIN_STRIP_ROWS};
use crate::grid::div_rem;
use crate::index::GridStride;
use crate::wide_element::{WideElement, WIDE_BYTES};

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
        // Each fits in 32 bits: `Grid2::new` takes the extents as `u32`, and height <= ny.
        let (nx, ny, height) = (nx as u32, ny as u32, height as u32);
        // SAFETY: per the trait's contract.
        unsafe {
            if rows_aligned(input, out, nx) {
                walk2::<T, true>((input, out), (nx, ny), height, interior, edge)
            } else {
                walk2::<T, false>((input, out), (nx, ny), height, interior, edge)
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
        // Each fits in 32 bits: `Grid3::new` takes the extents as `u32`, and height <= nz.
        let (extent, height) = ((nx as u32, ny as u32, nz as u32), height as u32);
        // SAFETY: per the trait's contract.
        unsafe {
            if rows_aligned(input, out, extent.0) {
                walk3::<T, true>((input, out), extent, height, interior, edge)
            } else {
                walk3::<T, false>((input, out), extent, height, interior, edge)
            }
        }
    }
}

/// Rows a 2D walk has in flight beyond the three it computes with. Two fit the same registers
/// as one and were faster (docs/PERFORMANCE.md, "Why the defaults are what they are").
const AHEAD: usize = 2;

/// Planes a 3D walk has in flight beyond the three it computes with (three loads each).
const PLANES_AHEAD: usize = 1;

/// Planes of its own row that a 3D walk has L2 fetch ahead of its loads: the reach of a strip of
/// `MIN_STRIP_ROWS` planes (with the two around it), asked for as the walk starts, then one
/// plane that far ahead per step.
const PREFETCH_PLANES: u32 = MIN_STRIP_ROWS as u32 + 2;

/// `window` moved down by one, `next` at the end. Element by element (not `copy_within`, a
/// memory move that would keep the window in local memory rather than registers).
#[inline(always)]
fn shifted<R: Copy, const N: usize>(window: [R; N], next: R) -> [R; N] {
    core::array::from_fn(|k| if k + 1 < N { window[k + 1] } else { next })
}

/// The chunk at `chunk`: one 16-byte load with `WIDE`, else lane `j` from `lane(j)`.
///
/// # Safety
/// With `WIDE`, a whole chunk at `chunk`, 16-byte aligned, is readable.
#[inline(always)]
unsafe fn read_chunk<T: WideElement, const WIDE: bool>(
    chunk: *const T,
    lane: impl Fn(usize) -> T,
) -> T::Chunk {
    if WIDE {
        // SAFETY: per the contract.
        unsafe { (chunk as *const T::Chunk).read() }
    } else {
        let mut mid = zeroed_chunk::<T>();
        for (j, v) in mid.as_mut().iter_mut().enumerate() {
            *v = lane(j);
        }
        mid
    }
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
        let mid = read_chunk::<T, WIDE>(chunk, |j| *chunk.add(j));
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

/// Whether `extent` points starting at `ptr` and `out` sit at 16-byte boundaries row by row.
#[inline(always)]
fn rows_aligned<T: WideElement>(input: *const T, out: *mut T, nx: u32) -> bool {
    (input as usize | out as usize) % WIDE_BYTES == 0 && nx as usize % lanes::<T>() == 0
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

/// The output chunks at `out` and the `rows - 1` rows below it (`row_len` points apart), away from
/// the grid's border, from the input rows around the chunk at `input`: rows above, at and below in
/// registers and the `AHEAD` rows below those in flight (read before they are needed), each row
/// read once (the last one re-read rather than one past it). No bounds to check and no border case
/// in the loop: its registers are few, so that many threads fit on a multiprocessor.
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

/// Rows of the tiles of chunks in which a 3D walk numbers a plane's items, and columns: the
/// 256 threads of a block of a default launch walk 8 neighbouring rows of 32 chunks, so that rows
/// y ± 1 are mostly the block's own, read from L1 rather than L2.
const TILE_ROWS: usize = 8;
const TILE_COLUMNS: usize = 32;

/// Row y and column of item `i` of a plane's `columns × ny` items numbered tile by tile: bands
/// of `TILE_ROWS` rows (the last may be shorter) cut into tiles of `TILE_COLUMNS` columns (the
/// last may be narrower), each tile row by row. `narrow`: `i`, `columns * ny` fit in 32 bits.
#[inline(always)]
fn tiled(i: usize, columns: usize, ny: usize, narrow: bool) -> (usize, usize) {
    let (band, within) = div_rem(i, columns * TILE_ROWS, narrow);
    let y0 = band * TILE_ROWS;
    let rows = TILE_ROWS.min(ny - y0);
    let (tile, t) = div_rem(within, TILE_COLUMNS * rows, narrow);
    let x0 = tile * TILE_COLUMNS;
    let (row, column) = div_rem(t, TILE_COLUMNS.min(columns - x0), narrow);
    (y0 + row, x0 + column)
}

/// The walks along z of the strips of `height` planes this thread owns, with 32-bit
/// coordinates and pointers moved a plane at a time, as in `walk2`. An item of an interior row
/// walks its planes away from the z border in `interior_planes3`, its chunk's points at the x
/// border afterwards; every other point is a border point (`edge_points3`). So the walk has no
/// `edge` call in its loop and no clamp but at the row's ends, and ptxas gives it few registers.
///
/// # Safety
/// `input` and `out` hold `nx * ny * nz` points; every thread of the launch walks with the
/// same extents and height.
#[inline(always)]
unsafe fn walk3<T: WideElement, const WIDE: bool>(
    (input, out): (*const T, *mut T),
    (nx, ny, nz): (u32, u32, u32),
    height: u32,
    interior: &impl Fn(Neighbours3<T>) -> T,
    edge: &impl Fn(usize, usize, usize) -> T,
) {
    let row_len = nx as usize;
    let plane = row_len * ny as usize;
    let lanes = lanes::<T>() as u32;
    let columns = nx.div_ceil(lanes) as usize;
    let items = columns * ny as usize * nz.div_ceil(height) as usize;
    let narrow = items <= u32::MAX as usize;
    for item in GridStride::mine(items, 0) {
        let (strip, rest) = div_rem(item, columns * ny as usize, narrow);
        let (y, column) = tiled(rest, columns, ny as usize, narrow);
        // Each below 2^32: strip < nz, y < ny, column < nx.
        let (y, x0) = (y as u32, column as u32 * lanes);
        let z0 = strip as u32 * height;
        let z1 = z0.saturating_add(height).min(nz);
        let x1 = x0 + (nx - x0).min(lanes);
        let row = y as usize * row_len + x0 as usize;
        // SAFETY: every plane prefetched or walked lies in 0..nz, and item `item` (column
        // `column` of row y in planes z0..z1) is this thread's alone (grid-stride).
        unsafe {
            // The last plane the strip reads (z1, or the grid's last).
            let last = z1.min(nz - 1);
            let first = z0.saturating_sub(1);
            for k in 0..PREFETCH_PLANES.min(last - first + 1) {
                prefetch_l2(input.add((first + k) as usize * plane + row));
            }
            if y == 0 || y + 1 == ny {
                edge_points3(out, (nx, ny), (x0, x1), y, (z0, z1), edge);
                continue;
            }
            // Planes a..b are away from the z border; the others hold border points only.
            let a = z0.max(1).min(z1);
            let b = z1.min(nz - 1).max(a);
            if a < b {
                let at = a as usize * plane + row;
                let planes = b - a;
                interior_planes3::<T, WIDE>(
                    (input.add(at), out.add(at)),
                    planes,
                    (row_len, plane),
                    (x0, nx),
                    interior,
                );
                // Lanes at the x border, which the walk wrote as the input's points.
                if x0 == 0 {
                    edge_points3(out, (nx, ny), (0, 1), y, (a, b), edge);
                }
                if x1 + 1 >= nx {
                    let from = x0.max(nx - 1).max(1);
                    edge_points3(out, (nx, ny), (from, x1), y, (a, b), edge);
                }
            }
            edge_points3(out, (nx, ny), (x0, x1), y, (z0, a), edge);
            edge_points3(out, (nx, ny), (x0, x1), y, (b, z1), edge);
        }
    }
}

/// The output chunks at `out` and the `planes - 1` planes below it (`plane` points apart), at
/// column `x0` of a row away from the y border, from the input around the chunk at `input`:
/// planes above, at and below in registers (rows y - 1, y, y + 1 of each) and the
/// `PLANES_AHEAD` planes below those in flight, the last one re-read rather than one past
/// plane `planes`; row y of the plane `PREFETCH_PLANES - 1` below prefetched. Lanes at the x
/// border (x = 0, x >= nx - 1) get the input's point, not `interior`, for `edge` to overwrite.
///
/// # Safety
/// Input planes -1 ..= `planes` from `input` lie in the grid, rows y - 1 and y + 1 of each
/// too; the output chunks are the calling thread's alone, 16-byte aligned and whole with `WIDE`.
#[inline(always)]
unsafe fn interior_planes3<T: WideElement, const WIDE: bool>(
    (input, out): (*const T, *mut T),
    planes: u32,
    (row_len, plane): (usize, usize),
    (x0, nx): (u32, u32),
    interior: &impl Fn(Neighbours3<T>) -> T,
) {
    let ahead = PLANES_AHEAD as u32;
    let lanes = lanes::<T>() as u32;
    // Lanes lo..hi are interior; the halo and the chunk are read within the row.
    let lo = u32::from(x0 == 0);
    let last_x = nx - 1 - x0;
    let hi = lanes.min(last_x);
    let left = if x0 == 0 { 0 } else { 1 };
    // SAFETY: every point read is one of the row's, in a plane -1 ..= planes and a row y - 1
    // ..= y + 1 of it; every chunk written one of 0..planes from `out`.
    unsafe {
        let row = |at: *const T| {
            let mid = read_chunk::<T, WIDE>(at, |j| *at.add((j as u32).min(last_x) as usize));
            Row {
                left: *at.sub(left),
                mid,
                right: *at.add(lanes.min(last_x) as usize),
            }
        };
        let rows = |at: *const T| [row(at.sub(row_len)), row(at), row(at.add(row_len))];
        let above = input.sub(plane);
        // Planes -1 ..= PLANES_AHEAD, the later ones clamped to `planes`.
        let mut window: [[Row<T>; 3]; PLANES_AHEAD + 2] =
            core::array::from_fn(|k| rows(above.add((k as u32).min(planes + 1) as usize * plane)));
        // The last plane read, and row y of the next one to prefetch (wrapping: in a short
        // strip near the grid's last planes it lies past the grid, and is not prefetched).
        let mut next = input.add(ahead.min(planes) as usize * plane);
        let mut later = input.wrapping_add((PREFETCH_PLANES - 1) as usize * plane);
        let mut dst = out;
        for i in 0..planes {
            if planes - i > ahead {
                next = next.add(plane);
            }
            let coming = rows(next);
            if planes - i >= PREFETCH_PLANES - 1 {
                prefetch_l2(later);
            }
            // Past the grid near its last planes: only prefetched within plane `planes`.
            later = later.wrapping_add(plane);
            let planes = [window[0], window[1], window[2]];
            let mut values = planes[1][1].mid;
            for (lane, v) in values.as_mut().iter_mut().enumerate() {
                if (lo..hi).contains(&(lane as u32)) {
                    *v = interior(Neighbours3 { planes, lane });
                }
            }
            store::<T, WIDE>(dst, x0, nx, values);
            // Past the output's end after its last plane: never written through.
            dst = dst.wrapping_add(plane);
            window = shifted(window, coming);
        }
    }
}

/// Border points whose `edge` values a thread computes before it writes any, so that their loads
/// are in flight together rather than one after another.
const EDGE_BATCH: u32 = 8;

/// `edge(x, y, z)` into the output points at columns `x0..x1` of row y in planes `z0..z1`:
/// border points, so the walk's registers go to its interior loop; `EDGE_BATCH` planes of one
/// column at a time computed before they are written.
///
/// # Safety
/// `out` holds the grid's points (`nx * ny` a plane), and those named are the calling thread's.
#[inline(always)]
unsafe fn edge_points3<T: WideElement>(
    out: *mut T,
    (nx, ny): (u32, u32),
    (x0, x1): (u32, u32),
    y: u32,
    (z0, z1): (u32, u32),
    edge: &impl Fn(usize, usize, usize) -> T,
) {
    let (row_len, plane) = (nx as usize, nx as usize * ny as usize);
    for x in x0..x1 {
        let at = |z: u32| z as usize * plane + y as usize * row_len + x as usize;
        let mut z = z0;
        while z1 - z >= EDGE_BATCH {
            let values: [T; EDGE_BATCH as usize] =
                core::array::from_fn(|k| edge(x as usize, y as usize, (z + k as u32) as usize));
            for (k, &v) in values.iter().enumerate() {
                // SAFETY: per the contract.
                unsafe { *out.add(at(z + k as u32)) = v };
            }
            z += EDGE_BATCH;
        }
        for z in z..z1 {
            // SAFETY: per the contract.
            unsafe { *out.add(at(z)) = edge(x as usize, y as usize, z as usize) };
        }
    }
}
