//! The host's walk of a grid stencil (see the parent module's docs): the items of a run of
//! threads, side by side in a strip, walked row by row. Each row's stretch of points runs as one
//! loop with the input rows read in place and no check per point, which the compiler vectorises
//! where `interior` allows it; each stretch of rows is named for output saving before it is
//! written.

use super::{lanes, zeroed_chunk, Neighbours2, Neighbours3, Row, Walk};
use crate::index::GridStride;
use crate::output_saving::{before_writing, Runs};
use crate::wide_element::WideElement;

/// Row stretches: the host's walk.
pub(super) struct RowStretches;

/// Output points a walk is about to write: `count` stretches of `len` points, the first at
/// index `first`, each `step` after the one before (rows of a strip, or one stretch per plane).
struct Stretches {
    first: usize,
    len: usize,
    step: usize,
    count: usize,
}

impl Runs for Stretches {
    #[inline(always)]
    fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        if self.len == self.step {
            // Whole rows (planes): one run.
            f(self.first, self.first + self.len * self.count);
            return;
        }
        for k in 0..self.count {
            let start = self.first + k * self.step;
            f(start, start + self.len);
        }
    }
}

impl<T: WideElement> Row<T> {
    /// The points `x - 1`, `x` and `x + 1` of the input row at `row` as a row whose lane 0 is
    /// point `x` (`Row::at(0, dx)` reads them): what the compiler does not read, it drops.
    ///
    /// # Safety
    /// `row[x - 1..=x + 1]` is readable.
    #[inline(always)]
    unsafe fn around(row: *const T, x: usize) -> Row<T> {
        // SAFETY: per the contract.
        let (left, centre, right) = unsafe { (*row.add(x - 1), *row.add(x), *row.add(x + 1)) };
        let mut mid = zeroed_chunk::<T>();
        for (lane, v) in mid.as_mut().iter_mut().enumerate() {
            *v = if lane == 0 { centre } else { right };
        }
        Row { left, mid, right }
    }
}

/// [`Row::around`] of the three rows starting at `rows`, written out: `array::map` is not
/// always inlined, and a call per point keeps the loop scalar.
///
/// # Safety
/// As for `Row::around`, for each row.
#[inline(always)]
unsafe fn three_around<T: WideElement>(rows: [*const T; 3], x: usize) -> [Row<T>; 3] {
    // SAFETY: per the contract.
    unsafe {
        [
            Row::around(rows[0], x),
            Row::around(rows[1], x),
            Row::around(rows[2], x),
        ]
    }
}

/// Writes points `x0..x1` of the output row at `out`, of a grid `nx` points wide: `interior(x)`
/// where `inside` (the rows and planes around it lie in the grid) and `1 <= x < nx - 1`, else
/// `edge(x)`.
///
/// # Safety
/// `out[x0..x1]` is writable and no other thread's; `x1 <= nx`.
#[inline(always)]
unsafe fn stretch<T>(
    out: *mut T,
    (x0, x1): (usize, usize),
    nx: usize,
    inside: bool,
    interior: impl Fn(usize) -> T,
    edge: impl Fn(usize) -> T,
) {
    let (lo, hi) = if inside {
        let lo = x0.max(1).min(x1);
        (lo, x1.min(nx - 1).max(lo))
    } else {
        (x1, x1)
    };
    // SAFETY: every x is in x0..x1.
    unsafe {
        for x in x0..lo {
            out.add(x).write(edge(x));
        }
        for x in lo..hi {
            out.add(x).write(interior(x));
        }
        for x in hi..x1 {
            out.add(x).write(edge(x));
        }
    }
}

impl Walk for RowStretches {
    #[inline(always)]
    unsafe fn walk2<T: WideElement>(
        input: *const T,
        out: *mut T,
        (nx, ny): (usize, usize),
        height: usize,
        interior: &impl Fn(Neighbours2<T>) -> T,
        edge: &impl Fn(usize, usize) -> T,
    ) {
        let columns = nx.div_ceil(lanes::<T>());
        let items = columns * ny.div_ceil(height);
        // Item k: chunk column k % columns of strip k / columns, as on GPUs.
        for (first, end) in GridStride::mine(items, 0).runs() {
            let mut item = first;
            while item < end {
                let strip = item / columns;
                let strip_start = strip * columns;
                let next = (strip_start + columns).min(end);
                let x0 = (item - strip_start) * lanes::<T>();
                let x1 = ((next - strip_start) * lanes::<T>()).min(nx);
                let (y0, y1) = (strip * height, ((strip + 1) * height).min(ny));
                let rows = Stretches {
                    first: y0 * nx + x0,
                    len: x1 - x0,
                    step: nx,
                    count: y1 - y0,
                };
                before_writing(out, &rows);
                for y in y0..y1 {
                    let inside = y >= 1 && y + 1 < ny;
                    // SAFETY: rows y - 1, y and y + 1 are in the grid where `inside`; the
                    // chunks of items item..next (points x0..x1 of rows y0..y1) are this
                    // call's alone (grid-stride ownership).
                    unsafe {
                        let above = input.wrapping_add(y * nx).wrapping_sub(nx);
                        let rows = [above, above.wrapping_add(nx), above.wrapping_add(2 * nx)];
                        let at = |x| {
                            let rows = three_around(rows, x);
                            interior(Neighbours2 { rows, lane: 0 })
                        };
                        stretch(out.add(y * nx), (x0, x1), nx, inside, at, |x| edge(x, y));
                    }
                }
                item = next;
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
        let columns = nx.div_ceil(lanes::<T>());
        let per_strip = columns * ny;
        let items = per_strip * nz.div_ceil(height);
        let plane = nx * ny;
        // Item k: chunk column k % columns of row y of strip s, k / columns = s * ny + y (GPUs
        // number a plane's items tile by tile instead: the same items, other owners). The items
        // of one strip cover each of its planes in order: item k's first point in a plane is
        // `start_in_plane(k - s * per_strip)`. The strip loop is `walk2`'s, written again: the
        // two through one helper taking a closure ran at about half the speed here (host_bench,
        // both grid stencils).
        let start_in_plane = |k: usize| k / columns * nx + k % columns * lanes::<T>();
        for (first, end) in GridStride::mine(items, 0).runs() {
            let mut item = first;
            while item < end {
                let strip = item / per_strip;
                let strip_start = strip * per_strip;
                let next = (strip_start + per_strip).min(end);
                let p0 = start_in_plane(item - strip_start);
                let p1 = start_in_plane(next - strip_start);
                let (z0, z1) = (strip * height, ((strip + 1) * height).min(nz));
                let planes = Stretches {
                    first: z0 * plane + p0,
                    len: p1 - p0,
                    step: plane,
                    count: z1 - z0,
                };
                before_writing(out, &planes);
                for z in z0..z1 {
                    let mut p = p0;
                    while p < p1 {
                        let y = p / nx;
                        let (x0, x1) = (p - y * nx, (p1 - y * nx).min(nx));
                        let inside = y >= 1 && y + 1 < ny && z >= 1 && z + 1 < nz;
                        // SAFETY: as in `walk2`, with rows y ± 1 of planes z ± 1 in the grid
                        // where `inside`, and points p0..p1 of planes z0..z1 this call's alone.
                        unsafe {
                            // Rows y - 1, y, y + 1 of planes z - 1, z, z + 1.
                            let corner = (z * plane + y * nx).wrapping_sub(plane + nx);
                            let rows = |dz: usize| {
                                let above = input.wrapping_add(corner).wrapping_add(dz * plane);
                                [above, above.wrapping_add(nx), above.wrapping_add(2 * nx)]
                            };
                            let rows = [rows(0), rows(1), rows(2)];
                            let at = |x| {
                                let planes = [
                                    three_around(rows[0], x),
                                    three_around(rows[1], x),
                                    three_around(rows[2], x),
                                ];
                                interior(Neighbours3 { planes, lane: 0 })
                            };
                            let out_row = out.add(z * plane + y * nx);
                            stretch(out_row, (x0, x1), nx, inside, at, |x| edge(x, y, z));
                        }
                        p += x1 - x0;
                    }
                }
                item = next;
            }
        }
    }
}
