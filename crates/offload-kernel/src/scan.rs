//! Prefix scans: the device-side building blocks of `offload::scan_kernel!`'s device-wide scan.
//!
//! - [`scan_block`]: an exclusive scan of one value per thread of a block, with the block's
//!   total, in shared memory, in a fixed order.
//! - [`scan_tiles`]: the body of the one kernel a device-wide scan launches three times
//!   (reduce-then-scan): each block scans its tiles of the input in chunks staged through shared
//!   memory, each chunk of `items × threads` elements, each thread `items` consecutive ones.
//!   1. tile totals: the total of each tile of `tile` elements (no output);
//!   2. the exclusive scan of those totals, in one block: each tile's offset;
//!   3. the scan of each tile, starting from its offset.
//!
//! The order of the combines depends on the launch shape (threads per block and tile length)
//! and on the element's size (which sets `items`), never on the warp width or on timing: the
//! result is the same bits from run to run, and on the host backend and a GPU for the same
//! shape. Operands are combined left to right (`combine(earlier, later)`), so an associative
//! operation need not be commutative. `identity()` must change nothing on either side.

use crate::reduce::ReduceOp;
use crate::{block_dim, block_idx, grid_dim, sync_threads, thread_idx, BlockTiles, DeviceCopy};
use crate::{Tile, TileMineIter};

/// One 16-byte cell of a shared area.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Cell([u8; 16]);

/// Bytes of the shared area a block stages one chunk of its tile in: 16 KiB.
pub const STAGE_BYTES: usize = 16 * 1024;
const STAGE_CELLS: usize = STAGE_BYTES / 16;

/// Cells of the area of [`scan_block`]: 4 KiB.
const LANE_CELLS: usize = 256;

/// Slots of `T` in [`scan_block`]'s area.
const fn lane_slots<T>() -> usize {
    let size = core::mem::size_of::<T>();
    assert!(
        size <= LANE_CELLS * 16,
        "a scanned value may be at most 4 KiB"
    );
    match (LANE_CELLS * 16).checked_div(size) {
        Some(slots) => slots,
        None => LANE_CELLS,
    }
}

/// Consecutive elements each of `threads` threads scans per chunk, for elements of `size` bytes:
/// as many as the 16 KiB staging area holds, made odd (so that threads reading `items` apart in
/// shared memory hit different banks), 0 when not even one element each fits.
pub const fn items_per_thread(size: usize, threads: usize) -> usize {
    if threads == 0 {
        return 0;
    }
    let size = if size == 0 { 1 } else { size };
    let items = STAGE_BYTES / size / threads;
    if items > 1 && items % 2 == 0 {
        items - 1
    } else {
        items
    }
}

/// The most threads per block a scan of elements of `size` bytes may use (at most 1024).
pub const fn max_threads(size: usize) -> usize {
    let size = if size == 0 { 1 } else { size };
    let fit = STAGE_BYTES / size;
    if fit < 1024 {
        fit
    } else {
        1024
    }
}

/// The exclusive scan of `mine`, each thread's value, over the block (in linear thread order),
/// and the block's total: thread `t` gets `(v0 ⊕ … ⊕ v(t-1), v0 ⊕ … ⊕ v(last))`, thread 0 the
/// identity. Every thread of the block calls it.
///
/// The order: the threads in groups of as many as the 4 KiB area holds values (one group for
/// up to 1024 values of 4 bytes); in each group an inclusive Kogge–Stone scan (step `d`:
/// `slot[i] = slot[i - d] ⊕ slot[i]`, `d = 1, 2, 4, …`); groups one after another, each
/// combined after the total of those before.
#[inline(always)]
pub fn scan_block<T: DeviceCopy, Op: ReduceOp<T>>(mine: T) -> (T, T) {
    let area = crate::shared!([Cell; LANE_CELLS]);
    let slot = area.as_ptr() as *mut T;
    let capacity = const { lane_slots::<T>() };
    let threads = block_dim().count() as usize;
    let t = thread_idx().linear_in(block_dim());
    let mut exclusive = Op::identity();
    let mut carry: Option<T> = None;
    let groups = threads.div_ceil(capacity);
    for g in 0..groups {
        let base = g * capacity;
        let n = capacity.min(threads - base);
        let here = t >= base && t < base + n;
        let i = t.wrapping_sub(base);
        let mut v = mine;
        if here {
            // SAFETY: i < n <= capacity slots of the 4 KiB area, aligned for `T` (16-byte cells;
            // kernel values are aligned to at most 16); slot i is this thread's alone here.
            unsafe { slot.add(i).write(v) };
        }
        sync_threads();
        let mut d = 1;
        while d < n {
            let left = if here && i >= d {
                // SAFETY: slot i - d was written before the last barrier; nothing writes it
                // until the next one.
                Some(unsafe { slot.add(i - d).read() })
            } else {
                None
            };
            sync_threads();
            if let Some(left) = left {
                v = Op::combine(left, v);
                // SAFETY: slot i is this thread's alone between these barriers.
                unsafe { slot.add(i).write(v) };
            }
            sync_threads();
            d *= 2;
        }
        if here {
            let within = if i > 0 {
                // SAFETY: written before the last barrier, unchanged until the next one.
                Some(unsafe { slot.add(i - 1).read() })
            } else {
                None
            };
            exclusive = match (carry, within) {
                (None, None) => Op::identity(),
                (None, Some(w)) => w,
                (Some(c), None) => c,
                (Some(c), Some(w)) => Op::combine(c, w),
            };
        }
        // SAFETY: n - 1 < capacity; written before the last barrier, unchanged until the next.
        let group_total = unsafe { slot.add(n - 1).read() };
        carry = Some(match carry {
            None => group_total,
            Some(c) => Op::combine(c, group_total),
        });
        // The area is free again once every thread has read it.
        sync_threads();
    }
    (exclusive, carry.unwrap_or_else(Op::identity))
}

/// Scan `input`, one tile, in chunks, starting from `prefix`: with `out` (the block's iterator
/// over its elements of the tile's output, which is `input.len()` long) write the inclusive or
/// exclusive scan there. Returns `prefix ⊕ total of input`. Every thread of the block calls it
/// with the same `input` and `prefix`.
#[inline(always)]
fn scan_tile<T: DeviceCopy, Op: ReduceOp<T>>(
    input: &[T],
    prefix: T,
    inclusive: bool,
    mut out: Option<TileMineIter<'_, T>>,
) -> T {
    let stage = crate::shared!([Cell; STAGE_CELLS]);
    let slot = stage.as_ptr() as *mut T;
    let threads = block_dim().count() as usize;
    let t = thread_idx().linear_in(block_dim());
    let items = items_per_thread(core::mem::size_of::<T>(), threads);
    assert!(
        items > 0,
        "scan: too many threads per block for elements of this size"
    );
    let chunk = items * threads;
    let mut carry = prefix;
    let mut start = 0;
    while start < input.len() {
        let m = chunk.min(input.len() - start);
        let part = &input[start..start + m];
        // Coalesced: thread t stages elements t, t + threads, …
        let mut k = t;
        while k < m {
            // SAFETY: k < m <= chunk slots, which fit the 16 KiB area (items_per_thread);
            // 16-byte cells align any kernel value; slot k is this thread's alone here.
            unsafe { slot.add(k).write(part[k]) };
            k += threads;
        }
        sync_threads();
        // Thread t's own run: elements t·items .. (t+1)·items of the chunk.
        let lo = (t * items).min(m);
        let hi = (lo + items).min(m);
        let mut run = Op::identity();
        for k in lo..hi {
            // SAFETY: staged before the barrier; only this thread touches slots lo..hi now.
            run = Op::combine(run, unsafe { slot.add(k).read() });
        }
        let (before, chunk_total) = scan_block::<T, Op>(run);
        if let Some(out) = out.as_mut() {
            let mut acc = Op::combine(carry, before);
            for k in lo..hi {
                // SAFETY: as above; these slots are this thread's alone until the barrier.
                unsafe {
                    let x = slot.add(k).read();
                    if inclusive {
                        acc = Op::combine(acc, x);
                        slot.add(k).write(acc);
                    } else {
                        slot.add(k).write(acc);
                        acc = Op::combine(acc, x);
                    }
                }
            }
            sync_threads();
            // Thread t owns elements t, t + threads, … of the tile: the chunk's in order.
            let mut k = t;
            while k < m {
                let (i, o) = out
                    .next()
                    .expect("scan: the output tile is shorter than the input");
                debug_assert_eq!(i, start + k);
                // SAFETY: written before the barrier, unchanged until the next one.
                *o = unsafe { slot.add(k).read() };
                k += threads;
            }
        }
        carry = Op::combine(carry, chunk_total);
        // The stage is free again once every thread has read it.
        sync_threads();
        start += m;
    }
    carry
}

/// The body of a device-wide scan's kernel (`offload::scan_kernel!` writes the kernel): each
/// block takes tiles `block, block + blocks, …` of `x`, tiles of `out.tile_len()` elements.
/// - `out` empty: the tile totals only, into `totals` (`#[tile(1)]`, one element per tile).
/// - else the scan of each tile into `out` (as long as `x`), inclusive or exclusive, starting
///   from `offsets[tile]` (from the identity when `offsets` is empty); `totals` may be empty.
///
/// Every thread of the launch calls it.
///
/// # Panics
/// If `out` is neither empty nor as long as `x`, if `totals` or `offsets` is neither empty nor
/// one element per tile, or if the block has more threads than [`max_threads`].
#[inline(always)]
pub fn scan_tiles<T: DeviceCopy, Op: ReduceOp<T>>(
    inclusive: bool,
    x: &[T],
    offsets: &[T],
    mut out: BlockTiles<'_, T>,
    mut totals: BlockTiles<'_, T>,
) {
    let tile_len = out.tile_len();
    let tiles = x.len().div_ceil(tile_len);
    assert!(
        out.is_empty() || out.len() == x.len(),
        "scan: the output is not as long as the input"
    );
    assert!(
        totals.is_empty() || (totals.len() == tiles && totals.tile_len() == 1),
        "scan: the totals are not one per tile"
    );
    assert!(
        offsets.is_empty() || offsets.len() == tiles,
        "scan: the offsets are not one per tile"
    );
    let mut out_tiles = out.iter_mine();
    let mut total_tiles = totals.iter_mine();
    let blocks = grid_dim().count() as usize;
    let mut k = block_idx().linear_in(grid_dim());
    while k < tiles {
        let start = k * tile_len;
        let end = (start + tile_len).min(x.len());
        let prefix = if offsets.is_empty() {
            Op::identity()
        } else {
            offsets[k]
        };
        let mut tile: Option<Tile<'_, T>> = out_tiles.next();
        let total = scan_tile::<T, Op>(
            &x[start..end],
            prefix,
            inclusive,
            tile.as_mut().map(|t| t.iter_mine()),
        );
        if let Some(mut cell) = total_tiles.next() {
            for (_, v) in cell.iter_mine() {
                *v = total;
            }
        }
        k += blocks;
    }
}

#[cfg(all(test, not(any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod tests {
    use super::*;

    #[test]
    fn items_are_odd_and_fit_the_stage() {
        for size in [1, 2, 4, 8, 12, 16, 64] {
            for threads in [1, 32, 100, 256, 1024] {
                let items = items_per_thread(size, threads);
                if threads <= max_threads(size) {
                    assert!(items >= 1, "{size} bytes, {threads} threads");
                }
                assert!(items * threads * size <= STAGE_BYTES);
                assert!(items <= 1 || items % 2 == 1);
            }
        }
        assert_eq!(items_per_thread(4, 256), 15);
        assert_eq!(max_threads(64), 256);
    }
}
