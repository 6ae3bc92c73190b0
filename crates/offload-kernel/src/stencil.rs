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
//! walk runs along z, with three rows (y - 1, y, y + 1) per plane, each plane's row y
//! prefetched into L2 ahead of the loads; the rows at the y border and the planes at the z
//! border are border points, and the points at the x border are written after the walk, each
//! column's border points a batch of planes at a time (their loads in flight together).
//! What a stencil does not read (the corners of a 7-point one) the compiler drops, loads
//! included.
//!
//! Ownership: work item `k` is the column of chunk `k % columns` in strip `k / columns` (in 3D, of
//! row y too, and on GPUs a plane's items go tile by tile, 32 chunks by 8 rows, so that a block's
//! threads read each other's rows y ± 1 from L1); items are shared out grid-stride, so any launch
//! covers the output once. The strip height is `columns × rows / global_threads()` rounded up, at
//! least [`MIN_STRIP_ROWS`]: the same in every thread, and as tall as the launch lets it be with
//! every thread busy. The default launch of a kernel with a `#[grid]` output gives each thread one
//! strip of `MIN_STRIP_ROWS` rows ([`STRIP_BYTES`] of output), or with 3D outputs alone of 16
//! planes ([`STRIP_BYTES_3D`]).
//!
//! On the host the same items are walked otherwise (`rows`): a CPU core has few registers and
//! wide vector units, and one call runs a whole range of threads, whose items are side by side
//! in a strip. So each run of items is walked row by row, each row as one stretch of points
//! whose interior loop reads the input rows in place, without a check per point, a loop the
//! compiler vectorises; and the walk names the output runs it writes (`output_saving`).

use crate::grid::{Grid2, Grid3};
use crate::index::global_threads;
use crate::thread_slice::ThreadSlice;
use crate::wide_element::{WideElement, WIDE_BYTES};
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu", test))]
mod prefetch;
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu", test))]
mod registers;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod rows;

/// The walk that GPUs use, register blocking down columns of chunks.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
type Native = registers::Registers;
/// The walk that the host uses, in row stretches.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
type Native = rows::RowStretches;

/// How a thread walks the items it owns (see the module docs): writes each of their output
/// points once, `interior` where its whole neighbourhood lies inside the grid, else `edge`.
trait Walk {
    /// # Safety
    /// `input` and `out` hold the `nx * ny` points of `extent` (neither 0), and the output's
    /// points are shared out alike by every thread of the launch, which all walk with the same
    /// extent and strip `height`.
    unsafe fn walk2<T: WideElement>(
        input: *const T,
        out: *mut T,
        extent: (usize, usize),
        height: usize,
        interior: &impl Fn(Neighbours2<T>) -> T,
        edge: &impl Fn(usize, usize) -> T,
    );

    /// # Safety
    /// As for [`walk2`](Self::walk2), with `nx * ny * nz` points.
    unsafe fn walk3<T: WideElement>(
        input: *const T,
        out: *mut T,
        extent: (usize, usize, usize),
        height: usize,
        interior: &impl Fn(Neighbours3<T>) -> T,
        edge: &impl Fn(usize, usize, usize) -> T,
    );
}

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

/// One row of a thread's column in registers: its chunk and the points left and right of it (on
/// the host, one point's row as lane 0: `Row::around` in `rows`).
#[derive(Clone, Copy)]
struct Row<T: WideElement> {
    left: T,
    mid: T::Chunk,
    right: T,
}

/// Rows (planes in 3D) a thread walks at least: below it, the rows it reads around its strip
/// outnumber the rows it writes. Eight was the fastest strip on an H200 (2D, 16384² f32).
pub const MIN_STRIP_ROWS: usize = 8;

/// Bytes of output each thread covers in a default launch of a kernel with a `#[grid]` output
/// (the runtime sizes the grid by it): one strip of the shortest height, 16 bytes per row.
pub const STRIP_BYTES: usize = WIDE_BYTES * MIN_STRIP_ROWS;

/// Planes each thread of a default launch walks in 3D: the fastest of 8, 16, 32 and 64 on an
/// H200 (512³ f32); taller than 2D's, so that the GPU walk's prefetches run ahead of its loads.
const STRIP_PLANES: usize = 16;

/// [`STRIP_BYTES`] for a kernel whose `#[grid]` outputs are 3D: one strip of `STRIP_PLANES`
/// planes, 16 bytes per plane (where a grid has fewer chunk columns than a full device has
/// threads, the runtime launches more threads, which walk shorter strips).
pub const STRIP_BYTES_3D: usize = WIDE_BYTES * STRIP_PLANES;

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

/// A chunk to overwrite lane by lane.
#[inline(always)]
fn zeroed_chunk<T: WideElement>() -> T::Chunk {
    // SAFETY: every `WideElement` (a sealed trait) is a primitive number, `f16` or `bf16`, for
    // which all-zero bytes are a value, and a chunk holds nothing else.
    unsafe { MaybeUninit::<T::Chunk>::zeroed().assume_init() }
}

/// Rows per strip when `chunk_rows` chunk rows are shared among the launch's threads: at least
/// `MIN_STRIP_ROWS`, at most `rows` (the strip's axis), and 1 for an empty axis.
#[inline(always)]
fn strip_height(chunk_rows: usize, rows: usize) -> usize {
    chunk_rows
        .div_ceil(global_threads())
        .max(MIN_STRIP_ROWS)
        .min(rows)
        .max(1)
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
    pub unsafe fn from_thread_slice(slice: ThreadSlice<'a, T>, nx: usize, ny: usize) -> Self {
        assert!(
            nx.checked_mul(ny) == Some(slice.len()),
            "#[grid(nx, ny)]: the output does not hold nx * ny points"
        );
        GridOut2 {
            // Not `as_mut_ptr`, which names no elements: the host walk names what it writes.
            ptr: slice.raw_ptr(),
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
        self.stencil_by::<Native>(input, interior, edge)
    }

    /// [`stencil`](Self::stencil) by the walk `W`.
    #[inline(always)]
    #[track_caller]
    fn stencil_by<W: Walk>(
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
        let columns = nx.div_ceil(lanes::<T>());
        let height = strip_height(columns * ny, ny);
        let (from, to) = (input.as_slice().as_ptr(), self.ptr);
        // SAFETY: the input holds nx * ny points (checked by `Grid2::new`), as does the output
        // (checked when it was made), whose points every thread of the launch shares out alike.
        unsafe { W::walk2(from, to, (nx, ny), height, &interior, &edge) }
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
        slice: ThreadSlice<'a, T>,
        nx: usize,
        ny: usize,
        nz: usize,
    ) -> Self {
        assert!(
            nx.checked_mul(ny).and_then(|p| p.checked_mul(nz)) == Some(slice.len()),
            "#[grid(nx, ny, nz)]: the output does not hold nx * ny * nz points"
        );
        GridOut3 {
            // Not `as_mut_ptr`, which names no elements: the host walk names what it writes.
            ptr: slice.raw_ptr(),
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
        self.stencil_by::<Native>(input, interior, edge)
    }

    /// [`stencil`](Self::stencil) by the walk `W`.
    #[inline(always)]
    #[track_caller]
    fn stencil_by<W: Walk>(
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
        let columns = nx.div_ceil(lanes::<T>());
        let height = strip_height(columns * ny * nz, nz);
        let (from, to) = (input.as_slice().as_ptr(), self.ptr);
        // SAFETY: as in `GridOut2::stencil_by`.
        unsafe { W::walk3(from, to, (nx, ny, nz), height, &interior, &edge) }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::registers::Registers;
    use super::rows::RowStretches;
    use super::*;
    use crate::index::host_context::{run_threads, ThreadRange};
    use crate::Dim3;
    use std::cell::RefCell;
    use std::format;
    use std::vec;
    use std::vec::Vec;

    /// Threads per call of the launches below: one per call as on GPUs, and ranges run as one
    /// call (the host backend's), cut at points that split strips and rows. Under Miri, whose
    /// runs are slow, ranges of 64 alone: the unsafe code is the same for every cut.
    const PER_CALL: &[u64] = if cfg!(miri) { &[64] } else { &[1, 3, 64] };

    /// Offsets of the grids in their allocations (1 and 2 put f32 rows off 16-byte boundaries,
    /// 1 f64 ones); under Miri one aligned and one not.
    const SKIPS: &[usize] = if cfg!(miri) { &[0, 1] } else { &[0, 1, 2, 4] };

    /// Whether to run a grid of `points` points: under Miri the small ones only (the larger ones
    /// run the same code over more strips).
    fn runs_here(points: usize) -> bool {
        !cfg!(miri) || points <= 300
    }

    /// The launch shapes (blocks, threads) a comparison takes from its list `all`: every one
    /// natively, the last (of several blocks and warps) under Miri (the others walk the same
    /// strips in other orders).
    fn shapes(all: &'static [(u32, u32)]) -> &'static [(u32, u32)] {
        if cfg!(miri) {
            &all[all.len().saturating_sub(1)..]
        } else {
            all
        }
    }

    /// Runs `body` as every thread of a `blocks × threads` launch, `per_call` consecutive
    /// threads per call.
    fn launch(blocks: u32, threads: u32, per_call: u64, mut body: impl FnMut()) {
        let total = blocks as u64 * threads as u64;
        for first in (0..total).step_by(per_call as usize) {
            let range = ThreadRange {
                grid: Dim3::new(blocks, 1, 1),
                block: Dim3::new(threads, 1, 1),
                first,
                end: (first + per_call).min(total),
                warp_size: 32,
                as_one: true,
            };
            run_threads(range, true, &mut body);
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

    /// `GridOut2::stencil` by the walk `W` with the 5-point stencil, on `input[skip..]` into
    /// `out[skip..]` (a `skip` that is not a multiple of 4 takes the unaligned path).
    fn five_point_tiles<W: Walk>(nx: usize, ny: usize, skip: usize, launch_shape: (u32, u32)) {
        let (blocks, threads) = launch_shape;
        let input: Vec<f32> = (0..skip + nx * ny)
            .map(|i| (i * 7919 % 1009) as f32)
            .collect();
        for &per_call in PER_CALL {
            let mut out = vec![f32::NAN; skip + nx * ny];
            launch(blocks, threads, per_call, || {
                let grid = Grid2::new(&input[skip..], nx as u32, ny as u32);
                // SAFETY: `out` outlives the launch; every thread converts the same whole view.
                let mut tiles = unsafe {
                    let view = ThreadSlice::from_raw_parts(out.as_mut_ptr().add(skip), nx * ny);
                    GridOut2::from_thread_slice(view, nx, ny)
                };
                tiles.stencil_by::<W>(
                    &grid,
                    |p| {
                        0.5 * p.at(0, 0)
                            + 0.125 * (p.at(-1, 0) + p.at(1, 0) + p.at(0, -1) + p.at(0, 1))
                    },
                    |x, y| grid.get(y * nx + x),
                );
            });
            assert_eq!(
                out[skip..],
                five_point(&input[skip..], nx, ny)[..],
                "{nx}x{ny}, skip {skip}, {blocks}x{threads}, {per_call} per call"
            );
        }
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
            (40, 37),
        ] {
            if !runs_here(nx * ny) {
                continue;
            }
            for &skip in SKIPS {
                for &shape in shapes(&[(1, 1), (1, 3), (2, 5), (3, 64), (7, 32)]) {
                    five_point_tiles::<Registers>(nx, ny, skip, shape);
                    five_point_tiles::<RowStretches>(nx, ny, skip, shape);
                }
            }
        }
    }

    /// Every point is computed once by the walk `W`: the interior closure sees each interior
    /// point once and the edge closure each border point once, whatever the launch.
    fn each_point_once<W: Walk>() {
        for (nx, ny) in [(9, 7), (16, 16), (5, 2), (9, 30), (30, 20)] {
            if !runs_here(nx * ny) {
                continue;
            }
            for &(blocks, threads) in shapes(&[(1, 1), (2, 3), (4, 32)]) {
                for &per_call in PER_CALL {
                    let input: Vec<u32> = (0..(nx * ny) as u32).collect();
                    let mut out = vec![0u32; nx * ny];
                    let calls = RefCell::new(vec![0u32; nx * ny]);
                    launch(blocks, threads, per_call, || {
                        let grid = Grid2::new(&input, nx as u32, ny as u32);
                        // SAFETY: as above.
                        let mut tiles = unsafe {
                            let view = ThreadSlice::from_raw_parts(out.as_mut_ptr(), nx * ny);
                            GridOut2::from_thread_slice(view, nx, ny)
                        };
                        tiles.stencil_by::<W>(
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
                    let shape = format!("{nx}x{ny} {blocks}x{threads}, {per_call} per call");
                    assert!(calls.borrow().iter().all(|&c| c == 1), "{shape}");
                    for (i, &v) in out.iter().enumerate() {
                        let (x, y) = (i % nx, i / nx);
                        let interior = x >= 1 && x + 1 < nx && y >= 1 && y + 1 < ny;
                        let want = if interior { 2 * nx as u32 + 2 } else { 0 };
                        assert_eq!(v, want, "{shape}: point {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn each_point_is_computed_once() {
        each_point_once::<Registers>();
        each_point_once::<RowStretches>();
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

    /// `GridOut3::stencil` by the walk `W` with the 7-point stencil against the plain loop.
    fn seven_point_tiles<W: Walk>() {
        for extent in [
            (1, 1, 1),
            (3, 3, 3),
            (5, 4, 6),
            (8, 3, 4),
            (2, 9, 5),
            (7, 7, 2),
            (9, 5, 12),
            (9, 5, 20),
            // Small enough for Miri, with strips of more planes than the GPU walk's batches of
            // border points.
            (3, 3, 20),
            // 70 columns of f64 chunks and 10 rows: the GPU walk's tiles of 32 x 8 cut short.
            (140, 10, 3),
        ] {
            let (nx, ny, nz) = extent;
            let n = nx * ny * nz;
            if !runs_here(n) {
                continue;
            }
            for &skip in SKIPS {
                for &(blocks, threads) in shapes(&[(1, 1), (2, 5), (3, 64)]) {
                    for &per_call in PER_CALL {
                        let input: Vec<f64> =
                            (0..skip + n).map(|i| (i * 7919 % 1009) as f64).collect();
                        let mut out = vec![f64::NAN; skip + n];
                        launch(blocks, threads, per_call, || {
                            let grid = Grid3::new(&input[skip..], nx as u32, ny as u32, nz as u32);
                            // SAFETY: as above.
                            let mut tiles = unsafe {
                                let out = out.as_mut_ptr().add(skip);
                                let view = ThreadSlice::from_raw_parts(out, n);
                                GridOut3::from_thread_slice(view, nx, ny, nz)
                            };
                            tiles.stencil_by::<W>(
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
                            "{extent:?}, skip {skip}, {blocks}x{threads}, {per_call} per call"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_3d_stencil_equals_the_plain_loop_for_any_extent_alignment_and_launch() {
        seven_point_tiles::<Registers>();
        seven_point_tiles::<RowStretches>();
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
