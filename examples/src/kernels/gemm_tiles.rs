//! What the tensor-core GEMMs share: which output tile a block computes, and how a tile of a
//! row-major matrix is staged in shared memory.
use offload::mma::MatrixRef;
use offload::prelude::*;
use offload::{copy_async_chunk_unchecked, ASYNC_CHUNK_BYTES};

/// `body` once for each listed value of `i`, a constant in each copy: the compiler then keeps
/// arrays indexed by `i` (the accumulators) in registers, where a loop it did not unroll would
/// put them in local memory.
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $({
            #[allow(non_upper_case_globals)]
            const $i: usize = $n;
            $body
        })*
    };
}
pub(super) use unroll;

/// Output tiles per group of rows in [`grouped_tile`].
const GROUP_ROWS: usize = 8;

/// The (row, column) tile that linear tile index `tile` names, when consecutive indices walk down
/// groups of 8 tile rows before moving right: blocks running at once then share rows of A and
/// columns of B in the L2 cache.
#[inline(always)]
pub(super) fn grouped_tile(tile: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let per_group = GROUP_ROWS * tiles_n;
    let first = tile / per_group * GROUP_ROWS;
    let rows = (tiles_m - first).min(GROUP_ROWS);
    let within = tile % per_group;
    (first + within % rows, within / rows)
}

/// Whether every 16-byte chunk of `m`'s rows starts at a 16-byte boundary (so tiles can be
/// staged with asynchronous copies).
#[inline(always)]
pub(super) fn chunks_aligned<T: Copy>(m: &MatrixRef<'_, T>) -> bool {
    (m.data().as_ptr() as usize | (m.stride() * core::mem::size_of::<T>()))
        .is_multiple_of(ASYNC_CHUNK_BYTES)
}

/// [`stage_tile`] for a tile that lies inside `m`, whose rows start at 16-byte boundaries:
/// asynchronous copies without a check per chunk.
///
/// # Safety
/// As for [`stage_tile`]; moreover `row0 + rows <= m.rows()`, `col0 + chunks * 16 bytes` fits
/// in `m.cols()`, and [`chunks_aligned`]`(m)`.
#[inline(always)]
pub(super) unsafe fn stage_tile_inside<T: Copy, const THREADS: usize>(
    dst: SharedSlice<T>,
    place: impl Fn(usize, usize) -> usize,
    m: &MatrixRef<'_, T>,
    (row0, col0): (usize, usize),
    (rows, chunks): (usize, usize),
) {
    let per_chunk = ASYNC_CHUNK_BYTES / core::mem::size_of::<T>();
    let t = thread_idx().x as usize;
    // This thread's chunks are in one column, `THREADS / chunks` rows apart: one pointer moves
    // down.
    let (r0, c) = (t / chunks, t % chunks);
    let rows_apart = THREADS / chunks;
    let mut from = m
        .data()
        .as_ptr()
        .wrapping_add((row0 + r0) * m.stride() + col0 + c * per_chunk);
    for j in 0..rows * chunks / THREADS {
        // SAFETY: row0 + r0 + j * rows_apart < rows and the chunk's columns are below cols, so
        // the 16 bytes at `from` are inside `m` (hence inside its slice), at a 16-byte boundary
        // (`chunks_aligned`); the destination is the caller's (`place` stays inside `dst` at
        // 16-byte boundaries).
        unsafe { copy_async_chunk_unchecked(dst, place(r0 + j * rows_apart, c), from, per_chunk) };
        from = from.wrapping_add(rows_apart * m.stride());
    }
}

/// Starts staging the `rows × chunks` chunks (16 bytes each) of the tile of `m` at
/// `(row0, col0)` in `dst`: chunk `(r, c)` goes to element `place(r, c)`. The block's `THREADS`
/// threads share the chunks (`rows * chunks` a multiple of `THREADS`, `THREADS` of `chunks`); this thread copies
/// chunks `t`, `t + THREADS`, … (`t` its index in the block). What lies outside `m` becomes zeros. With `aligned` (see [`chunks_aligned`]) the
/// copies are asynchronous, else element by element at once.
///
/// # Safety
/// No thread touches the destination chunks until the block has waited for these copies
/// ([`wait_async_copies`]) and met at a barrier.
#[inline(always)]
pub(super) unsafe fn stage_tile<T: Copy, const THREADS: usize>(
    dst: SharedSlice<T>,
    place: impl Fn(usize, usize) -> usize,
    m: &MatrixRef<'_, T>,
    (row0, col0): (usize, usize),
    (rows, chunks): (usize, usize),
    aligned: bool,
    zero: T,
) {
    let per_chunk = ASYNC_CHUNK_BYTES / core::mem::size_of::<T>();
    let t = thread_idx().x as usize;
    if aligned && row0 + rows <= m.rows() && col0 + chunks * per_chunk <= m.cols() {
        // SAFETY: the tile lies inside `m`, whose rows start at 16-byte boundaries; the rest
        // is the caller's contract.
        unsafe { stage_tile_inside::<T, THREADS>(dst, place, m, (row0, col0), (rows, chunks)) };
        return;
    }
    for j in 0..rows * chunks / THREADS {
        let chunk = t + j * THREADS;
        let (r, c) = (chunk / chunks, chunk % chunks);
        let (row, col) = (row0 + r, col0 + c * per_chunk);
        let to = place(r, c);
        if aligned {
            let valid = if row < m.rows() && col < m.cols() {
                (m.cols() - col).min(per_chunk)
            } else {
                0
            };
            let from = if valid > 0 { row * m.stride() + col } else { 0 };
            // SAFETY: the caller's contract.
            unsafe { copy_async_chunk(dst, to, m.data(), from, valid) };
        } else {
            for e in 0..per_chunk {
                // SAFETY: the caller's contract.
                unsafe { dst.write(to + e, m.get_or(row, col + e, zero)) };
            }
        }
    }
}

/// How many stages of `stage` elements fit in the launch's dynamic shared memory (at most
/// `max`).
///
/// # Panics
/// If not even one fits (`kernel` names the caller).
#[inline(always)]
#[track_caller]
pub(super) fn stages_in<T: Copy>(
    smem: SharedSlice<T>,
    stage: usize,
    max: usize,
    kernel: &str,
) -> usize {
    let stages = (smem.len() / stage).min(max);
    assert!(
        stages >= 1,
        "{kernel}: launch with dynamic shared memory for one stage at least"
    );
    stages
}

/// Waits until at most `pending` (0 to 6) of this thread's committed copy groups are
/// unfinished ([`wait_async_copies`] with a count known only at run time; more than 6 counts
/// as 6).
#[inline(always)]
pub(super) fn wait_all_groups_but(pending: usize) {
    match pending {
        0 => wait_async_copies::<0>(),
        1 => wait_async_copies::<1>(),
        2 => wait_async_copies::<2>(),
        3 => wait_async_copies::<3>(),
        4 => wait_async_copies::<4>(),
        5 => wait_async_copies::<5>(),
        _ => wait_async_copies::<6>(),
    }
}

/// The k loop over `slices` slices of one output tile, software-pipelined over `stages` (1..=4)
/// shared-memory stages: `|s, slice| stage` starts copying slice `slice` into stage `s` (see
/// [`stage_tile`]); `|s| compute` multiplies the slice in stage `s`, once the block's copies have
/// landed. With `stages - 1` slices copied ahead, each copy overlaps the multiplication of the
/// slices before it (with one stage, each copy is waited for at once). Ends with a barrier, so
/// the stages may be refilled for the next tile.
///
/// A macro, so that both bodies are written into the caller's loop (a sibling module of this
/// one, with offload's prelude in scope): as closures passed to a function, LLVM's loop
/// unswitching (on the one-stage case) duplicated the call of a closure too large to inline
/// twice, and the accumulators it updates went to local memory.
macro_rules! pipelined {
    (
        $slices:expr,
        $stages:expr,
        |$ws:ident, $slice:ident| $stage:block,
        |$rs:ident| $compute:block
    ) => {{
        let (slices, stages): (usize, usize) = ($slices, $stages);
        let ahead = stages - 1;
        let next_stage = |s: usize| if s + 1 == stages { 0 } else { s + 1 };
        let (mut read, mut write) = (0, 0);
        // Step `step` copies slice `step` and, from step `ahead` on, multiplies slice
        // `step - ahead`.
        for step in 0..slices + ahead {
            let multiply = step >= ahead;
            if multiply && ahead > 0 {
                // This thread's copies of the slice to multiply have landed (the `ahead - 1`
                // newer groups may still be in flight); after the barrier, everyone's have, and
                // nobody still reads stage `write` (its slice was multiplied in the previous step).
                super::gemm_tiles::wait_all_groups_but(stages - 2);
                sync_threads();
            }
            if step < slices {
                let ($ws, $slice) = (write, step);
                $stage
                write = next_stage(write);
            }
            commit_async_copies();
            if multiply {
                if ahead == 0 {
                    wait_async_copies::<0>();
                    sync_threads();
                }
                let $rs = read;
                $compute
                read = next_stage(read);
                if ahead == 0 {
                    sync_threads();
                }
            }
        }
        sync_threads();
    }};
}
pub(super) use pipelined;
