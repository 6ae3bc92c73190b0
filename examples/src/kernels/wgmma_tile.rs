//! One warpgroup's `64 × 256` product `A · Wᵀ` through the copy engine and `mma::wgmma`, one
//! 64-deep slice at a time through a single stage: the smallest use of both, for the tests (it
//! fits the host backend's 48 KiB of shared memory).
use super::gemm_tiles::unroll;
use offload::half::bf16;
use offload::mma::wgmma::{self, Acc64x256, SwizzledTile, SWIZZLE_ALIGN, SWIZZLE_ROW};
use offload::mma::MatrixMut;
use offload::prelude::*;
use offload::tensor_copy::{acquire_maps, copy_box_2d, TensorMap, TransferBarrier};

/// Rows of A and of W a launch multiplies (their boxes).
pub const TILE_A_ROWS: usize = 64;
pub const TILE_W_ROWS: usize = 256;
/// Dynamic shared memory of [`wgmma_tile_product`]: the stage, room to align it, a barrier.
pub const WGMMA_TILE_SHARED_BYTES: u32 =
    ((TILE_A_ROWS + TILE_W_ROWS) * SWIZZLE_ROW * 2 + SWIZZLE_ALIGN + 8) as u32;

/// `out` (`64 × 256` `f32`, row-major) = rows `0..64` of A times rows `0..256` of W, transposed,
/// over `k` columns, with A and W read through `maps[0]` and `maps[1]` (boxes of 64 columns by 64
/// and 256 rows, 128-byte swizzled: rows and columns outside the matrices count as zeros).
/// Launch: one block of 128 threads with [`WGMMA_TILE_SHARED_BYTES`].
///
/// # Safety
/// The maps describe `bf16` matrices of the launch device, alive and unwritten during the launch.
#[offload::kernel]
pub unsafe fn wgmma_tile_product(k: u32, maps: &[TensorMap], out: &mut [f32]) {
    assert!(
        block_dim().count() == wgmma::WARPGROUP_THREADS as u64,
        "wgmma_tile_product: one warpgroup"
    );
    assert!(
        maps.len() >= 2,
        "wgmma_tile_product: two tensor maps (A, W)"
    );
    // Every thread: whichever issues copies has fenced the maps before.
    acquire_maps(maps);
    let smem = dynamic_shared::<bf16>();
    let pad = (SWIZZLE_ALIGN - smem.as_ptr() as usize % SWIZZLE_ALIGN) % SWIZZLE_ALIGN / 2;
    let w_at = pad + TILE_A_ROWS * SWIZZLE_ROW;
    let barrier_slot = (w_at + TILE_W_ROWS * SWIZZLE_ROW) * 2 / 8;
    let barrier = TransferBarrier::at(dynamic_shared::<u64>(), barrier_slot);
    let first = thread_idx().x == 0;
    if first {
        // SAFETY: nobody uses the barrier before the barrier below.
        unsafe { barrier.init(1) };
    }
    sync_threads();
    let mut acc = Acc64x256::ZERO;
    for slice in 0..(k as usize).div_ceil(SWIZZLE_ROW) {
        if first {
            barrier.arrive_expect_bytes(WGMMA_TILE_SHARED_BYTES - SWIZZLE_ALIGN as u32 - 8);
            let col = (slice * SWIZZLE_ROW) as i32;
            // SAFETY: the caller's contract for the maps; the stage lies in `smem` at 1024-byte
            // boundaries, and the previous slice's products were waited for before the barrier
            // at the end of the last iteration.
            unsafe {
                copy_box_2d(smem, pad, &maps[0], (col, 0), &barrier);
                copy_box_2d(smem, w_at, &maps[1], (col, 0), &barrier);
            }
        }
        sync_threads();
        barrier.wait(slice as u32 % 2);
        let a = SwizzledTile::new(smem, pad, TILE_A_ROWS);
        let w = SwizzledTile::new(smem, w_at, TILE_W_ROWS);
        // SAFETY: the whole warpgroup runs the loop; the stage is not written until every
        // thread has waited for these products and met at the barrier below.
        unsafe { wgmma::mma_async_k64(&mut acc, a, w) };
        wgmma::wait::<0>();
        sync_threads();
    }
    let mut om = MatrixMut::new(&mut out, TILE_A_ROWS, TILE_W_ROWS, TILE_W_ROWS);
    let me = thread_idx().x as usize;
    // Unrolled, so that the accumulators stay in registers (indexed by constants).
    unroll!(p in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
        let (r, c) = Acc64x256::position(me, 2 * p);
        // SAFETY: (r, c) and (r, c + 1) are this thread's accumulators, which no other thread
        // holds.
        unsafe { om.set_pair(r, c, acc.0[2 * p], acc.0[2 * p + 1]) };
    });
}
