//! What the tensor-core GEMMs share: which output tile a block computes, and how a tile of a
//! row-major matrix is staged in shared memory.
use offload::mma::MatrixRef;
use offload::ASYNC_CHUNK_BYTES;
use offload::prelude::*;

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
    (m.data().as_ptr() as usize | m.stride() * core::mem::size_of::<T>()) % ASYNC_CHUNK_BYTES == 0
}

/// Starts staging the `ROWS × CHUNKS` chunks (16 bytes each) of the tile of `m` at
/// `(row0, col0)` in `dst`: chunk `(r, c)` goes to element `place(r, c)`. The block's `THREADS`
/// threads share the chunks; this thread copies chunks `t`, `t + THREADS`, … (`t` its index in
/// the block). What lies outside `m` becomes zeros. With `aligned` (see [`chunks_aligned`]) the
/// copies are asynchronous, else element by element at once.
///
/// # Safety
/// No thread touches the destination chunks until the block has waited for these copies
/// ([`wait_async_copies`]) and met at a barrier.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn stage_tile<T: Copy, const ROWS: usize, const CHUNKS: usize, const THREADS: usize>(
    dst: SharedSlice<T>,
    place: impl Fn(usize, usize) -> usize,
    m: &MatrixRef<'_, T>,
    row0: usize,
    col0: usize,
    aligned: bool,
    zero: T,
) {
    const { assert!(ROWS * CHUNKS % THREADS == 0) };
    let per_chunk = ASYNC_CHUNK_BYTES / core::mem::size_of::<T>();
    let t = thread_idx().x as usize;
    for j in 0..ROWS * CHUNKS / THREADS {
        let chunk = t + j * THREADS;
        let (r, c) = (chunk / CHUNKS, chunk % CHUNKS);
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

/// How many stages of `stage` elements fit in the launch's dynamic shared memory (at most 4).
///
/// # Panics
/// If fewer than two fit (`kernel` names the caller).
#[inline(always)]
#[track_caller]
pub(super) fn stages_in<T: Copy>(smem: SharedSlice<T>, stage: usize, kernel: &str) -> usize {
    let stages = (smem.len() / stage).min(4);
    assert!(stages >= 2, "{kernel}: launch with dynamic shared memory for two stages at least");
    let _ = kernel;
    stages
}

/// The k loop over `slices` slices of one output tile, software-pipelined over `stages` (2..=4)
/// shared-memory stages: `stage(s, slice)` starts copying slice `slice` into stage `s` (see
/// [`stage_tile`]); `compute(s)` multiplies the slice in stage `s`, once the block's copies have
/// landed. Ends with a barrier, so the stages may be refilled for the next tile.
#[inline(always)]
pub(super) fn pipelined(
    slices: usize,
    stages: usize,
    mut stage: impl FnMut(usize, usize),
    mut compute: impl FnMut(usize),
) {
    let next_stage = |s: usize| if s + 1 == stages { 0 } else { s + 1 };
    for s in 0..stages - 1 {
        if s < slices {
            stage(s, s);
        }
        commit_async_copies();
    }
    let (mut read, mut write) = (0, stages - 1);
    for slice in 0..slices {
        // This thread's copies of `slice` have landed (the newer groups may still be in flight);
        // after the barrier, everyone's have, and nobody still reads stage `write`.
        match stages {
            2 => wait_async_copies::<0>(),
            3 => wait_async_copies::<1>(),
            _ => wait_async_copies::<2>(),
        }
        sync_threads();
        let next = slice + stages - 1;
        if next < slices {
            stage(write, next);
        }
        commit_async_copies();
        compute(read);
        (read, write) = (next_stage(read), next_stage(write));
    }
    sync_threads();
}
