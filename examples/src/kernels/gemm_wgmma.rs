//! `out = A · Wᵀ` on Hopper's warpgroup tensor cores (`mma::wgmma`, sm_90a) fed by the copy
//! engine (`tensor_copy`): `bf16` operands, `f32` accumulation, `bf16` out.
//!
//! A block of 2 warpgroups computes a 128 × 256 output tile, each warpgroup 64 × 256 of it. One
//! thread asks the copy engine for the k slices (64 deep) of A and W, `STAGES` ahead, into
//! 128-byte-swizzled stages that the tensor cores read; every slice completes on its stage's
//! transaction barrier. One slice's products run while the next is waited for.
use super::gemm_tiles::{grouped_tile, unroll};
use super::tensor::MatDims;
use offload::half::bf16;
use offload::mma::wgmma::{self, Acc64x256, SwizzledTile, SWIZZLE_ALIGN, SWIZZLE_ROW};
use offload::mma::MatrixMut;
use offload::prelude::*;
use offload::tensor_copy::{copy_box_2d, TensorMap, TiledLayout, TransferBarrier};

/// Output tile of one block: rows (of A), columns (rows of W).
pub const WGMMA_BM: usize = 128;
pub const WGMMA_BN: usize = 256;
/// Depth of a slice: one 128-byte swizzle row of `bf16`.
const BK: usize = SWIZZLE_ROW;
/// Slices in shared memory at once.
const STAGES: usize = 4;
/// Elements of one stage: the A slice, then the W slice.
const STAGE: usize = (WGMMA_BM + WGMMA_BN) * BK;
/// Threads per block: two warpgroups.
pub const GEMM_WGMMA_THREADS: u32 = 2 * wgmma::WARPGROUP_THREADS;
/// Dynamic shared memory per block: the stages, room to align them to 1024 bytes, and one
/// barrier per stage.
pub const GEMM_WGMMA_SHARED_BYTES: u32 = (STAGES * STAGE * 2 + SWIZZLE_ALIGN + 8 * STAGES) as u32;

/// The layouts of the tensor maps [`gemm_bf16_wgmma`] copies through: `rows × k` row-major
/// `bf16` (A with `m` rows, W with `n`), boxes of 64 columns by `box_rows` rows (128 for A,
/// 256 for W), swizzled. The copy engine needs `k` to be a multiple of 8.
pub fn gemm_wgmma_layout(rows: u32, k: u32, box_rows: usize) -> TiledLayout {
    TiledLayout {
        element_bytes: 2,
        cols: k as u64,
        rows: rows as u64,
        row_stride_bytes: 2 * k as u64,
        box_cols: BK as u32,
        box_rows: box_rows as u32,
        swizzle_128: true,
    }
}

/// Blocks that cover an `m × n` output with one tile each (any grid works: blocks take tiles
/// grid-stride).
pub fn gemm_wgmma_blocks(dims: MatDims) -> u32 {
    (dims.m as usize).div_ceil(WGMMA_BM) as u32 * (dims.n as usize).div_ceil(WGMMA_BN) as u32
}

/// `out = a · wᵀ` with `a` (`m × k`) and `w` (`n × k`) row-major in device memory, read
/// through the tensor maps `maps[0]` (layout `gemm_wgmma_layout(m, k, WGMMA_BM)`) and `maps[1]`
/// (`gemm_wgmma_layout(n, k, WGMMA_BN)`), made by `Device::tensor_map_2d` for the launch's
/// device; `out` (`m × n`, row-major) gets the `f32` sums rounded to `bf16`. The maps come in a
/// slice (device memory), not by value: rustc's nvptx kernel ABI takes no parameter aligned to
/// more than 16 bytes, and a tensor map must be aligned to 64.
///
/// Launch: blocks of [`GEMM_WGMMA_THREADS`] threads with [`GEMM_WGMMA_SHARED_BYTES`] of
/// dynamic shared memory, [`gemm_wgmma_blocks`] blocks (or another number). Needs an sm_90a
/// image: elsewhere the launch fails (see `mma::wgmma`).
///
/// # Safety
/// The maps describe the launch device's memory holding `a` and `w` with those layouts, alive
/// and unwritten during the launch.
#[offload::kernel]
pub unsafe fn gemm_bf16_wgmma(dims: MatDims, maps: &[TensorMap], out: &mut [bf16]) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().count() == GEMM_WGMMA_THREADS as u64,
        "gemm_bf16_wgmma: launch blocks of GEMM_WGMMA_THREADS threads"
    );
    assert!(maps.len() >= 2, "gemm_bf16_wgmma: two tensor maps (A, W)");
    let smem = dynamic_shared::<bf16>();
    assert!(
        smem.len() * 2 >= GEMM_WGMMA_SHARED_BYTES as usize,
        "gemm_bf16_wgmma: launch with GEMM_WGMMA_SHARED_BYTES of dynamic shared memory"
    );
    // The stages start at the first 1024-byte boundary, the barriers after the last stage.
    let pad = (SWIZZLE_ALIGN - smem.as_ptr() as usize % SWIZZLE_ALIGN) % SWIZZLE_ALIGN / 2;
    let stage_at = |s: usize| pad + s * STAGE;
    let slots = dynamic_shared::<u64>();
    let first_barrier = (stage_at(STAGES) * 2).div_ceil(8);
    let barrier = |s: usize| TransferBarrier::at(slots, first_barrier + s);
    let thread = thread_idx().x as usize;
    let group = thread / wgmma::WARPGROUP_THREADS as usize;
    if thread == 0 {
        for s in 0..STAGES {
            // SAFETY: nothing uses the barriers before the barrier below.
            unsafe { barrier(s).init(1) };
        }
    }
    sync_threads();

    let mut om = MatrixMut::new(&mut out, m, n, n);
    let slices = k.div_ceil(BK);
    let (tiles_m, tiles_n) = (m.div_ceil(WGMMA_BM), n.div_ceil(WGMMA_BN));
    let (first_tile, tile_step) = (block_idx().x as usize, grid_dim().x as usize);
    let my_tiles = (tiles_m * tiles_n)
        .saturating_sub(first_tile)
        .div_ceil(tile_step);
    // The block's slices form one stream over its tiles: slice `g` is slice `g % slices` of
    // its `g / slices`-th tile, goes to stage `g % STAGES` and completes phase
    // `(g / STAGES) % 2` of that stage's barrier. So the next tile's first slices are copied
    // while this one's last products and its stores run.
    let total = my_tiles * slices;
    let origin = |i: usize| {
        let (tm, tn) = grouped_tile(first_tile + i * tile_step, tiles_m, tiles_n);
        (tm * WGMMA_BM, tn * WGMMA_BN)
    };
    // Thread 0's cursor over the stream: the next slice to copy, its place in its tile, and
    // that tile's origin, advanced one step at a time (no divisions on the way: thread 0's
    // warp issues products too, which would wait for them).
    let mut next = (0usize, 0usize, 0usize, origin(0));
    // Copies the next slice into its stage (thread 0 only).
    let mut start_next = || {
        let (g, t, i, (row0, col0)) = next;
        let s = g % STAGES;
        let bar = barrier(s);
        bar.arrive_expect_bytes((STAGE * 2) as u32);
        let col = (t * BK) as i32;
        // SAFETY: the caller's contract for the maps; stage `s` lies in `smem` at a 1024-byte
        // boundary and nobody reads it before its barrier's phase completes (the waits below);
        // it was last read by products that every warpgroup waited for before the barrier that
        // precedes this call.
        unsafe {
            copy_box_2d(smem, stage_at(s), &maps[0], (col, row0 as i32), &bar);
            let w_at = stage_at(s) + WGMMA_BM * BK;
            copy_box_2d(smem, w_at, &maps[1], (col, col0 as i32), &bar);
        }
        next = if t + 1 < slices {
            (g + 1, t + 1, i, (row0, col0))
        } else if i + 1 < my_tiles {
            (g + 1, 0, i + 1, origin(i + 1))
        } else {
            (g + 1, 0, i + 1, (row0, col0))
        };
    };
    if thread == 0 {
        for _ in 0..STAGES.min(total) {
            start_next();
        }
    }
    for i in 0..my_tiles {
        let (row0, col0) = origin(i);
        let mut acc = Acc64x256::ZERO;
        for g in i * slices..(i + 1) * slices {
            let s = g % STAGES;
            barrier(s).wait((g / STAGES % 2) as u32);
            let a = SwizzledTile::new(smem, stage_at(s), WGMMA_BM).rows_from(64 * group);
            let w = SwizzledTile::new(smem, stage_at(s) + WGMMA_BM * BK, WGMMA_BN);
            // SAFETY: both warpgroups run this whole loop (the trip counts are uniform); stage
            // `s` has landed (its barrier) and is refilled only after every warpgroup has
            // waited for these products and met at the barrier below.
            unsafe { wgmma::mma_async_k64(&mut acc, a, w) };
            // The previous slice's products are done (at a tile's first slice, since the
            // previous tile's last wait): its stage may be refilled.
            wgmma::wait::<1>();
            if g >= 1 && g - 1 + STAGES < total {
                sync_threads();
                if thread == 0 {
                    // The cursor is at slice g - 1 + STAGES.
                    start_next();
                }
            }
        }
        wgmma::wait::<0>();
        let me = thread % wgmma::WARPGROUP_THREADS as usize;
        unroll!(p in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
            let (r, c) = Acc64x256::position(me, 2 * p);
            let (row, col) = (row0 + 64 * group + r, col0 + c);
            let (v, u) = (bf16::from_f32(acc.0[2 * p]), bf16::from_f32(acc.0[2 * p + 1]));
            // SAFETY: (row, col) and (row, col + 1) are this thread's elements of this
            // warpgroup's part of this block's tile; tiles, parts and threads' elements do not
            // overlap.
            unsafe { om.set_pair(row, col, v, u) };
        });
    }
}
