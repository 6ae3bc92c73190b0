//! `out = act(A · Wᵀ + bias)` on Hopper's warpgroup tensor cores (`mma::wgmma`, sm_90a) fed
//! by the copy engine (`tensor_copy`): a linear layer with `bf16` operands, `f32` accumulation,
//! `bf16` out.
//!
//! A block of 2 warpgroups computes a 128 × 256 output tile, each warpgroup 64 × 256 of it. One
//! thread asks the copy engine for the k slices (64 deep) of A and W, `STAGES` ahead, into
//! 128-byte-swizzled stages that the tensor cores read; every slice completes on its stage's
//! transaction barrier. One slice's products run while the next is waited for. The epilogue
//! (bias, activation, rounding) writes the tile 64 columns at a time into one of two swizzled
//! boxes of shared memory, which the copy engine stores while the next is written and while
//! the next tile's products run.
use super::gemm_bf16::activate;
use super::gemm_tiles::{grouped_tile, unroll};
use super::tensor::MatDims;
use offload::half::bf16;
use offload::math::to_bf16;
use offload::mma::wgmma::{self, Acc64x256, SwizzledTile, SWIZZLE_ALIGN, SWIZZLE_ROW};
use offload::prelude::*;
use offload::tensor_copy::{
    acquire_maps, commit_stores, copy_box_2d, fence_shared_for_copies, store_box_2d,
    wait_stores_read, TensorMap, TiledLayout, TransferBarrier,
};

/// Output tile of one block: rows (of A), columns (rows of W).
pub const WGMMA_BM: usize = 128;
pub const WGMMA_BN: usize = 256;
/// Depth of a slice: one 128-byte swizzle row of `bf16`.
const BK: usize = SWIZZLE_ROW;
/// Slices in shared memory at once.
const STAGES: usize = 4;
/// Elements of one stage: the A slice, then the W slice.
const STAGE: usize = (WGMMA_BM + WGMMA_BN) * BK;
/// Elements of one output box: the tile's rows by one swizzle row of columns.
const OUT_BOX: usize = WGMMA_BM * SWIZZLE_ROW;
/// Output boxes in shared memory: one is written while the other is stored.
const OUT_BOXES: usize = 2;
/// Threads per block: two warpgroups.
pub const GEMM_WGMMA_THREADS: u32 = 2 * wgmma::WARPGROUP_THREADS;
/// Dynamic shared memory per block: the stages and the output boxes, room to align them to
/// 1024 bytes, and one barrier per stage.
pub const GEMM_WGMMA_SHARED_BYTES: u32 =
    ((STAGES * STAGE + OUT_BOXES * OUT_BOX) * 2 + SWIZZLE_ALIGN + 8 * STAGES) as u32;

/// The layouts of the tensor maps [`gemm_bf16_wgmma`] copies through: `rows × cols` row-major
/// `bf16`, boxes of 64 columns by `box_rows` rows, swizzled: A (`m × k`, boxes of 128 rows), W
/// (`n × k`, 256) and out (`m × n`, 128). The copy engine needs `cols` (`k`, `n`) to be a
/// multiple of 8.
pub fn gemm_wgmma_layout(rows: u32, cols: u32, box_rows: usize) -> TiledLayout {
    TiledLayout {
        element_bytes: 2,
        cols: cols as u64,
        rows: rows as u64,
        row_stride_bytes: 2 * cols as u64,
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

/// `out = act(a · wᵀ + bias)` with `a` (`m × k`), `w` (`n × k`, a weight matrix as
/// `torch.nn.Linear` holds it) and `out` (`m × n`) row-major `bf16` in device memory: products
/// summed in `f32`, then `bias` (`n` elements, or none) is added, `activation` (`ACT_*` of
/// `gemm_bf16`) applies and the result is rounded to nearest-even `bf16`. A, W and out are
/// read and written through the tensor maps `maps[0]` (layout `gemm_wgmma_layout(m, k,
/// WGMMA_BM)`), `maps[1]` (`gemm_wgmma_layout(n, k, WGMMA_BN)`) and `maps[2]`
/// (`gemm_wgmma_layout(m, n, WGMMA_BM)`, of `out`), made by `Device::tensor_map_2d` for the
/// launch's device: `k` and `n` multiples of 8. `out` itself is taken for the launch to map
/// (the kernel writes it through `maps[2]` only). The maps come in a slice (device memory), not
/// by value: rustc's nvptx kernel ABI takes no parameter aligned to more than 16 bytes, and a
/// tensor map must be aligned to 64.
///
/// Launch: blocks of [`GEMM_WGMMA_THREADS`] threads with [`GEMM_WGMMA_SHARED_BYTES`] of
/// dynamic shared memory, [`gemm_wgmma_blocks`] blocks (or another number). Needs an sm_90a
/// image: elsewhere the launch fails (see `mma::wgmma`).
///
/// # Safety
/// The maps describe the launch device's memory holding `a`, `w` and `out` with those layouts;
/// `a` and `w` stay alive and unwritten during the launch, `out` is the memory `maps[2]`
/// describes.
#[offload::kernel]
pub unsafe fn gemm_bf16_wgmma(
    dims: MatDims,
    activation: u32,
    maps: &[TensorMap],
    bias: &[f32],
    out: &mut [bf16],
) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().count() == GEMM_WGMMA_THREADS as u64,
        "gemm_bf16_wgmma: launch blocks of GEMM_WGMMA_THREADS threads"
    );
    assert!(
        maps.len() >= 3,
        "gemm_bf16_wgmma: three tensor maps (A, W, out)"
    );
    assert!(
        out.len() >= m * n,
        "gemm_bf16_wgmma: out needs m * n elements"
    );
    assert!(
        bias.is_empty() || bias.len() >= n,
        "gemm_bf16_wgmma: bias needs n elements"
    );
    // Every thread: whichever issues copies has fenced the maps before.
    acquire_maps(maps);
    let smem = dynamic_shared::<bf16>();
    assert!(
        smem.len() * 2 >= GEMM_WGMMA_SHARED_BYTES as usize,
        "gemm_bf16_wgmma: launch with GEMM_WGMMA_SHARED_BYTES of dynamic shared memory"
    );
    // The stages start at the first 1024-byte boundary, the output boxes after the last stage,
    // the barriers after them.
    let pad = (SWIZZLE_ALIGN - smem.as_ptr() as usize % SWIZZLE_ALIGN) % SWIZZLE_ALIGN / 2;
    let stage_at = |s: usize| pad + s * STAGE;
    let out_at = |b: usize| stage_at(STAGES) + b * OUT_BOX;
    let slots = dynamic_shared::<u64>();
    let first_barrier = (out_at(OUT_BOXES) * 2).div_ceil(8);
    let barrier = |s: usize| TransferBarrier::at(slots, first_barrier + s);
    // The output boxes as pairs of bf16 (the accumulators come in pairs of columns).
    let pairs = dynamic_shared::<u32>();
    let thread = thread_idx().x as usize;
    let group = thread / wgmma::WARPGROUP_THREADS as usize;
    if thread == 0 {
        for s in 0..STAGES {
            // SAFETY: nothing uses the barriers before the barrier below.
            unsafe { barrier(s).init(1) };
        }
    }
    sync_threads();

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
        let bias_at = |col: usize| if col < bias.len() { bias[col] } else { 0.0 };
        // Output box `q` holds columns `64 q ..` of the tile: accumulator pairs `16 q ..`.
        unroll!(q in [0, 1, 2, 3] {
            let to = out_at(q % OUT_BOXES);
            // The box was last stored two stores ago (this tile's or the previous one's).
            if thread == 0 {
                wait_stores_read::<{ OUT_BOXES as u32 - 1 }>();
            }
            sync_threads();
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                let p = 16 * q + j;
                let (r, c) = Acc64x256::position(me, 2 * p);
                let col = col0 + c;
                let v = activate(acc.0[2 * p] + bias_at(col), activation);
                let u = activate(acc.0[2 * p + 1] + bias_at(col + 1), activation);
                let pair = to_bf16(v).to_bits() as u32 | (to_bf16(u).to_bits() as u32) << 16;
                let at = to + SwizzledTile::offset_of(64 * group + r, c % SWIZZLE_ROW);
                // SAFETY: (r, c) and (r, c + 1) are this thread's elements of this warpgroup's
                // rows of the box (threads' elements do not overlap), `at` is even (c is) and
                // inside the boxes; the copy engine read the box's last contents before the
                // barrier above.
                unsafe { pairs.write(at / 2, pair) };
            });
            fence_shared_for_copies();
            sync_threads();
            if thread == 0 {
                // SAFETY: the caller's contract for maps[2]; the box lies in `smem` at a
                // 1024-byte boundary, laid out as the copy engine swizzles (`offset_of`), written
                // and fenced by its writers before the barrier above, and written again only
                // after the wait above has covered this store (the last wait below at the end).
                unsafe {
                    store_box_2d(smem, to, &maps[2], ((col0 + 64 * q) as i32, row0 as i32));
                }
                commit_stores();
            }
        });
    }
    if thread == 0 {
        // The block's shared memory stays until the copy engine has read the last boxes.
        wait_stores_read::<0>();
    }
}
