//! A box through the copy engine both ways (`tensor_copy`): loaded from one matrix into shared
//! memory, stored into another, for the tests of the store (clipping, swizzle) on the host
//! backend and the GPU.
use offload::prelude::*;
use offload::tensor_copy::{
    acquire_maps, commit_stores, copy_box_2d, fence_shared_for_copies, store_box_2d,
    wait_stores_read, TensorMap, TransferBarrier,
};

/// The box's bytes at most (the maps' `box_bytes`).
pub const ROUND_TRIP_BOX_BYTES: usize = 4096;
/// Dynamic shared memory of [`box_round_trip`]: the box, room to align it, a barrier.
pub const ROUND_TRIP_SHARED_BYTES: u32 = (ROUND_TRIP_BOX_BYTES + 1024 + 8) as u32;

/// Copies the box of `maps[0]` at column `from_col`, row `from_row` into shared memory and stores
/// it into `maps[1]`'s matrix at `to_col`, `to_row`; `dst` is that matrix, taken for the launch
/// to map. Both maps have `u16` elements and the same box (at most [`ROUND_TRIP_BOX_BYTES`]),
/// swizzled or not alike.
/// Launch: one block (any size) with [`ROUND_TRIP_SHARED_BYTES`].
///
/// # Safety
/// `maps[0]` describes memory of the launch device alive and unwritten during the launch,
/// `maps[1]` the memory of `dst`.
#[offload::kernel]
pub unsafe fn box_round_trip(
    maps: &[TensorMap],
    box_bytes: u32,
    from_col: i32,
    from_row: i32,
    to_col: i32,
    to_row: i32,
    dst: &mut [u16],
) {
    assert!(
        maps.len() >= 2 && box_bytes as usize <= ROUND_TRIP_BOX_BYTES && !dst.is_empty(),
        "box_round_trip: two maps, a box that fits, a destination"
    );
    // Every thread: whichever issues copies has fenced the maps before.
    acquire_maps(maps);
    let smem = dynamic_shared::<u16>();
    let pad = (1024 - smem.as_ptr() as usize % 1024) % 1024 / 2;
    let barrier = TransferBarrier::at(
        dynamic_shared::<u64>(),
        (pad * 2 + ROUND_TRIP_BOX_BYTES) / 8,
    );
    let first = thread_idx().x == 0 && thread_idx().y == 0 && thread_idx().z == 0;
    if first {
        // SAFETY: nobody uses the barrier before the barrier below.
        unsafe { barrier.init(1) };
        barrier.arrive_expect_bytes(box_bytes);
        // SAFETY: the caller's contract for maps[0]; the box lies in `smem` at a 1024-byte
        // boundary and is read only after the barrier's phase 0.
        unsafe { copy_box_2d(smem, pad, &maps[0], (from_col, from_row), &barrier) };
    }
    sync_threads();
    barrier.wait(0);
    if first {
        // The copy engine wrote the box; this thread passes it on without touching it, so the
        // fence has nothing of its own to order, but keeps to store_box_2d's contract.
        fence_shared_for_copies();
        // SAFETY: the caller's contract for maps[1]; the box is the one loaded above, written
        // by no thread, and the wait below keeps the block alive until it has been read.
        unsafe { store_box_2d(smem, pad, &maps[1], (to_col, to_row)) };
        commit_stores();
        wait_stores_read::<0>();
    }
}
