//! The 7-point 3D stencil of `stencils::stencil7_tiles` (the same sums, bit for bit) with its
//! input brought into shared memory by the copy engine (`tensor_copy`, sm_90).
//!
//! A block owns a tile of `TX × TY` points of a plane over a run of planes and marches along z.
//! One thread asks the copy engine for each plane's tile with its halo (4 points left and right,
//! so that box rows stay whole 16-byte chunks, and a row above and below) into a ring of
//! `TmaMarch::ring` slots, each completing on its slot's transaction barrier, `ring - 2` planes
//! ahead of the plane the block computes. Every thread owns `CPT` 16-byte chunks of the tile,
//! keeps its chunks of the planes below and at the one it computes in registers, reads the
//! neighbours in that plane and its chunks of the plane above from shared memory, and stores
//! 16 bytes at a time. A block's planes form one stream over its work items (tile and run), so
//! the next item's first planes arrive while the current one ends.
//!
//! The grid is read through a 2D tensor map of its `ny · nz` rows ([`stencil_tma_layout`]): the
//! tile of plane `z` with its halo is the box at row `z · ny + y0 - 1`. The rows above and below
//! a plane there are the neighbouring planes' rows (or zeros past the grid), and only border
//! points, which are copies, would read them.
use super::stencils::Params3;
use offload::prelude::*;
use offload::tensor_copy::{acquire_maps, copy_box_2d, TensorMap, TiledLayout, TransferBarrier};

/// Points of halo left and right of a tile in a box: one 16-byte chunk of `f32`.
const HALO_X: usize = 4;
/// Shared-memory alignment of a box (what the copy engine needs), in bytes.
const BOX_ALIGN: usize = 128;

/// How a launch of [`stencil7_tma`] marches: slots of its ring (at least 3: the plane computed,
/// the one above it, and `ring - 2` in flight) and planes per work item (a block's run along z;
/// the grid's `nz` for whole columns).
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct TmaMarch {
    pub ring: u32,
    pub planes: u32,
}

/// Elements of one ring slot for `TX × TY` tiles: the box, rounded up to [`BOX_ALIGN`].
const fn slot_len(tx: usize, ty: usize) -> usize {
    ((tx + 2 * HALO_X) * (ty + 2)).next_multiple_of(BOX_ALIGN / 4)
}

/// Dynamic shared memory a block of [`stencil7_tma`] with `TX × TY` tiles and `ring` slots
/// needs: the slots, room to align them, and a barrier per slot.
pub const fn stencil_tma_shared_bytes(tx: usize, ty: usize, ring: u32) -> u32 {
    (BOX_ALIGN + ring as usize * (slot_len(tx, ty) * 4 + 8)) as u32
}

/// Threads per block of [`stencil7_tma`] with `TX × TY` tiles and `CPT` chunks per thread.
pub const fn stencil_tma_threads(tx: usize, ty: usize, cpt: usize) -> u32 {
    (tx * ty / 4 / cpt) as u32
}

/// Work items of `grid` (tiles times runs of `planes`): one block each covers it in one wave of
/// items, any other grid grid-stride.
pub fn stencil_tma_items(grid: Params3, tx: usize, ty: usize, planes: u32) -> u32 {
    let tiles = (grid.nx as usize).div_ceil(tx) * (grid.ny as usize).div_ceil(ty);
    (tiles * (grid.nz as usize).div_ceil(planes.max(1) as usize)) as u32
}

/// The tensor map layout [`stencil7_tma`] reads `grid` through: its `ny · nz` rows of `nx`
/// `f32`, boxes of a `TX × TY` tile with its halo. `nx` must be a multiple of 4 (the copy engine
/// takes rows of whole 16-byte chunks).
pub fn stencil_tma_layout(grid: Params3, tx: usize, ty: usize) -> TiledLayout {
    TiledLayout {
        element_bytes: 4,
        cols: grid.nx as u64,
        rows: grid.ny as u64 * grid.nz as u64,
        row_stride_bytes: 4 * grid.nx as u64,
        box_cols: (tx + 2 * HALO_X) as u32,
        box_rows: (ty + 2) as u32,
        swizzle_128: false,
    }
}

/// Four points at a 16-byte boundary, moved with one access.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Quad([f32; 4]);

/// A block's place in its stream of planes: the ring slot of the next plane and the parity of
/// the barrier phase it completes.
#[derive(Clone, Copy)]
struct RingPos {
    slot: u32,
    phase: u32,
}

impl RingPos {
    fn advance(&mut self, ring: u32) {
        self.slot += 1;
        if self.slot == ring {
            self.slot = 0;
            self.phase ^= 1;
        }
    }
}

/// One work item: the tile's first point and the run of planes `za..zb`, whose stream is the
/// planes `za - 1 ..= zb` (those past the grid arrive as zeros and are read by no sum). In
/// 32-bit arithmetic, as every index in the kernel but the output's: fewer registers.
#[derive(Clone, Copy)]
struct Item {
    x0: u32,
    y0: u32,
    za: u32,
    zb: u32,
}

impl Item {
    fn loads(&self) -> u32 {
        self.zb - self.za + 2
    }
}

/// [`stencils::stencil7_tiles`](super::stencils::stencil7_tiles) of `input` into `output`
/// (`grid.nx × grid.ny × grid.nz`, x fastest, `nx` a multiple of 4, `output` 16-byte aligned),
/// reading `input` through `maps[0]`, a tensor map of layout `stencil_tma_layout(grid, TX, TY)`
/// over `input`'s device memory made by `Device::tensor_map_2d` for the launch's device (a slice,
/// not by value: see `tensor_copy`). `offload_examples::stencil_tma_launch` makes the map and
/// launches it safely.
///
/// Launch: blocks of `stencil_tma_threads(TX, TY, CPT)` threads with
/// `stencil_tma_shared_bytes(TX, TY, march.ring)` of dynamic shared memory, any number of blocks
/// (`stencil_tma_items` gives one item each). Needs an image with bulk tensor copies (sm_90a, or
/// sm_90 with PTX 8.3): elsewhere the launch fails (see `tensor_copy`).
///
/// # Safety
/// `maps[0]` describes `input`'s memory on the launch's device with that layout.
#[offload::kernel(instances(TX = 64 | 128, TY = 16 | 32, CPT = 2 | 4))]
pub unsafe fn stencil7_tma<const TX: usize, const TY: usize, const CPT: usize>(
    grid: Params3,
    march: TmaMarch,
    maps: &[TensorMap],
    input: &[f32],
    output: &mut [f32],
) {
    let (nx, ny, nz) = (grid.nx, grid.ny, grid.nz);
    let threads = stencil_tma_threads(TX, TY, CPT);
    let (tx, ty) = (TX as u32, TY as u32);
    let (bw, slot) = (tx + 2 * HALO_X as u32, slot_len(TX, TY) as u32);
    let (ring, planes) = (march.ring, march.planes);
    assert!(
        block_dim().count() == threads as u64,
        "stencil7_tma: launch blocks of stencil_tma_threads(TX, TY, CPT) threads"
    );
    let points = nx as usize * ny as usize * nz as usize;
    assert!(
        input.len() == points && output.len() == points && nx % 4 == 0,
        "stencil7_tma: input and output hold the grid, whose nx is a multiple of 4"
    );
    assert!(
        ring >= 3 && planes >= 1 && !maps.is_empty(),
        "stencil7_tma: a ring of 3 slots or more, runs of 1 plane or more, and a tensor map"
    );
    let tiles_x = nx.div_ceil(tx);
    let tiles = tiles_x as u64 * ny.div_ceil(ty) as u64;
    let items = tiles * nz.div_ceil(planes) as u64;
    assert!(
        (ny as u64 * (nz as u64 + 1)) < i32::MAX as u64
            && items * (planes as u64 + 2) < u32::MAX as u64,
        "stencil7_tma: the grid's rows (ny · nz) must fit the copy engine's 32-bit coordinates, \
         and its planes' loads 32 bits"
    );
    let (tiles, items) = (tiles as u32, items as u32);
    let out = output.as_mut_ptr();
    assert!(
        (out as usize).is_multiple_of(16),
        "stencil7_tma: output must be 16-byte aligned"
    );
    let smem = dynamic_shared::<f32>();
    let pad = ((BOX_ALIGN - smem.as_ptr() as usize % BOX_ALIGN) % BOX_ALIGN / 4) as u32;
    let first_barrier = (pad + ring * slot).div_ceil(2);
    assert!(
        smem.len() >= 2 * (first_barrier + ring) as usize,
        "stencil7_tma: launch with stencil_tma_shared_bytes(TX, TY, ring) of dynamic shared memory"
    );
    let slots = dynamic_shared::<u64>();
    let barrier = |s: u32| TransferBarrier::at(slots, (first_barrier + s) as usize);
    let slot_at = |s: u32| pad + s * slot;
    // Every thread: whichever issues copies has fenced the maps before.
    acquire_maps(maps);

    let (first, step) = (block_idx().x, grid_dim().x);
    let item = |w: u32| {
        let (run, tile) = (w / tiles, w % tiles);
        Item {
            x0: tile % tiles_x * tx,
            y0: tile / tiles_x * ty,
            za: run * planes,
            zb: ((run + 1) * planes).min(nz),
        }
    };
    let thread = thread_idx().x;

    // Thread 0's cursor over the stream: the next load's item, its place in the item, and its
    // slot (its phase is the waiters'); `issued` loads so far.
    let mut next_w = first;
    let mut next_item = item(first);
    let mut next_j = 0u32;
    let mut next_slot = RingPos { slot: 0, phase: 0 };
    let mut issued = 0u32;
    let box_bytes = stencil_tma_layout(grid, TX, TY).box_bytes();
    // Loads the stream's planes until `ring` are unreleased (thread 0 only); `released`: the
    // loads whose slots nobody reads any more.
    let mut fill = |released: u32| {
        while next_w < items && issued < released + ring {
            let bar = barrier(next_slot.slot);
            bar.arrive_expect_bytes(box_bytes);
            let (it, j) = (next_item, next_j);
            let plane = (it.za + j) as i32 - 1;
            let at = (
                it.x0 as i32 - HALO_X as i32,
                plane * ny as i32 + it.y0 as i32 - 1,
            );
            // SAFETY: the caller's contract for the map; the slot lies in `smem` at a 128-byte
            // boundary (`pad`), and its last readers passed the barrier before this call
            // (`released` counts only slots that every thread is done with).
            unsafe { copy_box_2d(smem, slot_at(next_slot.slot) as usize, &maps[0], at, &bar) };
            issued += 1;
            next_slot.advance(ring);
            next_j += 1;
            if next_j == it.loads() {
                next_j = 0;
                next_w += step;
                if next_w < items {
                    next_item = item(next_w);
                }
            }
        }
    };
    if thread == 0 {
        for s in 0..ring {
            // SAFETY: nothing uses the barriers before the barrier below.
            unsafe { barrier(s).init(1) };
        }
        fill(0);
    }
    sync_threads();

    // The 4 points at element `at` of a slot's box (a multiple of 4: slots and box rows are
    // whole chunks), and the point at `at`.
    let quad = |at: u32| {
        // SAFETY: the box lies in `smem` (checked above), 16-byte aligned; its copy has landed
        // (its barrier was waited for) and is not refilled before the barrier that follows its
        // last reads.
        unsafe { (smem.as_ptr().add(at as usize) as *const Quad).read().0 }
    };
    // SAFETY: as for `quad`.
    let point = |at: u32| unsafe { smem.as_ptr().add(at as usize).read() };
    let mut wait = RingPos { slot: 0, phase: 0 };
    let mut consumed = 0u32;
    let side = (1.0 - grid.centre) / 6.0;
    let mut w = first;
    while w < items {
        let it = item(w);
        // This thread's chunks: offset in a slot, and where they lie in the grid.
        let at = core::array::from_fn::<_, CPT, _>(|i| {
            let c = thread + i as u32 * threads;
            let (r, q) = (c / (tx / 4), c % (tx / 4));
            (
                (r + 1) * bw + HALO_X as u32 + 4 * q,
                it.x0 + 4 * q,
                it.y0 + r,
            )
        });
        let take = |pos: &mut RingPos| {
            barrier(pos.slot).wait(pos.phase);
            let s = slot_at(pos.slot);
            pos.advance(ring);
            s
        };
        let below = take(&mut wait);
        let mut prev = at.map(|(o, _, _)| quad(below + o));
        let mut here = take(&mut wait);
        let mut cur = at.map(|(o, _, _)| quad(here + o));
        for z in it.za..it.zb {
            let above = take(&mut wait);
            let z_border = z == 0 || z + 1 == nz;
            for i in 0..CPT {
                let (o, x, y) = at[i];
                let next = quad(above + o);
                if x < nx && y < ny {
                    let (c, p) = (cur[i], prev[i]);
                    let (ym, yp) = (quad(here + o - bw), quad(here + o + bw));
                    // The halo columns hold the points left and right of a tile's row.
                    let (left, right) = (point(here + o - 1), point(here + o + 4));
                    let row_border = z_border || y == 0 || y + 1 == ny;
                    let v = core::array::from_fn(|l| {
                        let l32 = l as u32;
                        let border = row_border || x + l32 == 0 || x + l32 + 1 == nx;
                        let xm = if l == 0 { left } else { c[l - 1] };
                        let xp = if l == 3 { right } else { c[l + 1] };
                        if border {
                            c[l]
                        } else {
                            grid.centre * c[l] + side * (xm + xp + ym[l] + yp[l] + p[l] + next[l])
                        }
                    });
                    let index = (z as usize * ny as usize + y as usize) * nx as usize + x as usize;
                    // SAFETY: point (x..x + 4, y, z) lies in the grid (x + 4 <= nx, as nx is a
                    // multiple of 4) at a 16-byte boundary; it belongs to this chunk of this
                    // item's tile and run, and items, tiles and chunks do not overlap, so no
                    // other thread writes it.
                    unsafe { (out.add(index) as *mut Quad).write(Quad(v)) };
                }
                prev[i] = cur[i];
                cur[i] = next;
            }
            here = above;
            // Planes up to this one are done with; at the run's end the plane above it too.
            consumed += 1;
            let released = if z + 1 == it.zb {
                consumed + 2
            } else {
                consumed + 1
            };
            sync_threads();
            if thread == 0 {
                fill(released);
            }
        }
        consumed += 2;
        w += step;
    }
}
