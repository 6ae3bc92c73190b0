//! `C = A · B` in `f64` on the `f64` tensor cores of sm_90 (`mma::m16n8k8_f64`): a DGEMM.
//!
//! Each block computes a 128 × 64 tile of C, its 4 warps 64 × 32 each, from 16-deep slices of A
//! (128 × 16) and B (16 × 64) that asynchronous copies stage in shared memory, as many ahead as
//! the launch's dynamic shared memory holds (up to [`DGEMM_MAX_STAGES`]). The k loop is pipelined
//! twice: the block meets at one barrier per slice, and each warp loads every fragment one 8-deep
//! step before the products that use it, so that the loads overlap the products. Two blocks fit
//! a multiprocessor (about 255 registers a thread), so one block's barriers leave the tensor
//! cores to the other.
//!
//! The tensor cores compute the transposed product, `Cᵀ = Bᵀ · Aᵀ` (their A operand from B's
//! slice, their B operand from A's), and two relabellings put every pair of values that a
//! fragment holds in adjacent registers next to each other in shared memory, so that each
//! 16-byte read fills two fragment registers with no moves in between:
//! - the sum over `k`: fragment position `t + 4q` of an 8-deep step is column (of A) or row (of
//!   B) `2t + q` of the step;
//! - the columns of C: in each group of 16, column `n` of the tensor cores' 16-row tile is
//!   column `2 (n % 8) + n / 8`, so a lane's values of columns `n` and `n + 8` are adjacent (and
//!   it stores C two adjacent elements at a time).
//!
//! Rows of A swap halves of their chunks, rows of B permute theirs (XOR swizzles), so that every
//! phase of a warp's 16-byte reads touches 8 different bank groups. Each element of C is the sum
//! of its products, `k` ascending, one rounding per fused multiply-add; the host backend runs the
//! same code and gives the same bits.
use super::gemm_tiles::{
    chunks_aligned, grouped_tile, stage_tile, stages_in, unroll, wait_all_groups_but,
};
use super::tensor::MatDims;
use offload::copy_async_chunk_unchecked;
use offload::mma::{m16n8k8_f64, Acc16x8F64, MatrixMut, MatrixRef};
use offload::prelude::*;

/// Rows and columns of the output tile of one block.
const BM: usize = 128;
const BN: usize = 64;
/// Depth of the slices staged in shared memory.
const BK: usize = 16;
/// Steps of the tensor cores (8 deep each) per slice.
const STEPS: usize = BK / m16n8k8_f64::K;
/// Elements of one stage: the A slice (`BM × BK`), then the B slice (`BK × BN`).
const STAGE_LEN: usize = BM * BK + BK * BN;
/// Most slices in shared memory at once.
pub const DGEMM_MAX_STAGES: usize = 7;
/// Bytes of one stage of [`dgemm`]'s shared memory.
pub const DGEMM_STAGE_BYTES: u32 = (STAGE_LEN * 8) as u32;
/// Threads per block: 4 warps, 2 down × 2 across.
const THREADS: usize = 128;
pub const DGEMM_THREADS: u32 = THREADS as u32;
/// Dynamic shared memory per block for [`dgemm`], in bytes: 4 stages (2 to [`DGEMM_MAX_STAGES`]
/// whole stages work too).
pub const DGEMM_SHARED_BYTES: u32 = 4 * DGEMM_STAGE_BYTES;

/// Blocks that cover an `m × n` output with one tile each (any grid works: blocks take tiles
/// grid-stride).
pub fn dgemm_blocks(dims: MatDims) -> u32 {
    (dims.m as usize).div_ceil(BM) as u32 * (dims.n as usize).div_ceil(BN) as u32
}

/// Two adjacent `f64` in shared memory, read as one 16-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Pair([f64; 2]);

/// The two values at element `at` (even) of `smem`.
///
/// # Safety
/// Both lie inside `smem`, were written before the block's last barrier and are not written
/// before its next one.
#[inline(always)]
unsafe fn pair(smem: SharedSlice<f64>, at: usize) -> [f64; 2] {
    // SAFETY: the caller's contract; `dynamic_shared` starts at a 16-byte boundary and `at` is
    // even, so the pair is aligned.
    unsafe { (smem.as_ptr().add(at) as *const Pair).read().0 }
}

/// Element offset in stage `s` of chunk `c` (two values) of row `r` of the A slice. A lane
/// reads chunk `4 · step + t` of rows `g` (see [`b_operand`]): rows `g` and `g + 1` of a read
/// phase use different halves of their chunks.
#[inline(always)]
fn a_at(s: usize, r: usize, c: usize) -> usize {
    s * STAGE_LEN + r * BK + 2 * (c ^ (4 * (r & 1)))
}

/// Element offset in stage `s` of chunk `c` of row `r` (a `k`) of the B slice. A lane reads
/// rows `8 · step + 2t` and the next (see [`a_operands`]): each pair of rows permutes its
/// chunks its own way.
#[inline(always)]
fn b_at(s: usize, r: usize, c: usize) -> usize {
    s * STAGE_LEN + BM * BK + r * BN + 2 * (c ^ (2 * ((r / 2) & 3)))
}

/// This lane's A operands (from B's slice: C's columns from `wc`, relabelled; `[p]`: 16 of them
/// from `wc + 16 p`) of step `step` of the slice in stage `s`: 4 values each, 2 reads.
///
/// # Safety
/// Stage `s` has landed (the block waited and met at a barrier since) and is not written
/// before the next barrier; `s` is below the stages that fit in `smem`.
#[inline(always)]
unsafe fn a_operands(
    smem: SharedSlice<f64>,
    s: usize,
    step: usize,
    wc: usize,
) -> [m16n8k8_f64::A; 2] {
    let lane = lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    let k = 8 * step + 2 * t;
    let mut fa = [m16n8k8_f64::A::ZERO; 2];
    unroll!(p in [0, 1] {
        let c = wc / 2 + 8 * p + g;
        // SAFETY: (both reads) the caller's contract; the offsets lie in stage s.
        let (e0, e1) = unsafe { (pair(smem, b_at(s, k, c)), pair(smem, b_at(s, k + 1, c))) };
        fa[p] = m16n8k8_f64::A([e0[0], e0[1], e1[0], e1[1]]);
    });
    fa
}

/// This lane's B operand (from A's slice: C's rows `wr + 8 q ..`) of step `step` of the slice
/// in stage `s`: 2 values, one read.
///
/// # Safety
/// As for [`a_operands`].
#[inline(always)]
unsafe fn b_operand(
    smem: SharedSlice<f64>,
    s: usize,
    step: usize,
    wr: usize,
    q: usize,
) -> m16n8k8_f64::B {
    let lane = lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    // SAFETY: the caller's contract; the offset lies in stage s.
    m16n8k8_f64::B(unsafe { pair(smem, a_at(s, wr + 8 * q + g, 4 * step + t)) })
}

/// Starts copying slice `slice` of the block's rows of `a` (from `row0`) and columns of `b`
/// (from `col0`) into stage `s`.
///
/// `INSIDE` (the tile lies inside C, and rows of `a` and `b` start at 16-byte boundaries, see
/// [`chunks_aligned`]): slice `i` covers `k` from `BK · i − pad`, `pad` zeros first (`pad` even,
/// so that the other slices are whole), with 12 asynchronous copies of this thread: chunk `t % 8`
/// of A's rows `t / 8 + 16 j` and chunk `t % 32` of B's rows `t / 32 + 4 j`, where `t` is the
/// thread's index (no check but `k ≥ 0`). Else slice `i` covers `k` from `BK · i` (`pad` is 0),
/// zeros past the edges, copied asynchronously where `aligned`, else element by element.
///
/// # Safety
/// No thread touches stage `s` until the block has waited for these copies and met at a
/// barrier; `s` is below the stages that fit in `smem`; `slice` covers some `k < a.cols()`; with
/// `INSIDE`, what it says holds.
#[inline(always)]
unsafe fn stage_slice<const INSIDE: bool>(
    smem: SharedSlice<f64>,
    (s, slice, pad): (usize, usize, usize),
    (a, b): (&MatrixRef<'_, f64>, &MatrixRef<'_, f64>),
    (row0, col0): (usize, usize),
    aligned: bool,
) {
    let k0 = slice * BK;
    if !INSIDE {
        // SAFETY: (both) the caller's contract; `a_at` and `b_at` stay inside stage s at 16-byte
        // boundaries.
        unsafe {
            let (place_a, place_b) = (|r, c| a_at(s, r, c), |r, c| b_at(s, r, c));
            let (a_tile, b_tile) = ((row0, k0), (k0, col0));
            stage_tile::<f64, THREADS>(smem, place_a, a, a_tile, (BM, BK / 2), aligned, 0.0);
            stage_tile::<f64, THREADS>(smem, place_b, b, b_tile, (BK, BN / 2), aligned, 0.0);
        }
        return;
    }
    let t = thread_idx().x as usize;
    let (ra, ca) = (t / 8, t % 8);
    // The chunks of A's rows at this k (all of them or none: `pad` is even).
    let a_k = k0 + 2 * ca;
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
        let inside = a_k >= pad;
        let from = if inside { (row0 + ra + 16 * j) * a.stride() + a_k - pad } else { 0 };
        // SAFETY: the caller's contract; the chunk at `from` lies in `a` (the tile's rows, a k
        // below `a.cols()`) at a 16-byte boundary (`chunks_aligned`), or nothing is read; `a_at`
        // gives a chunk of stage s.
        unsafe {
            let from = a.data().as_ptr().wrapping_add(from);
            copy_async_chunk_unchecked(smem, a_at(s, ra + 16 * j, ca), from, 2 * inside as usize);
        }
    });
    let (rb, cb) = (t / 32, t % 32);
    unroll!(j in [0, 1, 2, 3] {
        let b_k = k0 + rb + 4 * j;
        let inside = b_k >= pad;
        let from = if inside { (b_k - pad) * b.stride() + col0 + 2 * cb } else { 0 };
        // SAFETY: as for A.
        unsafe {
            let from = b.data().as_ptr().wrapping_add(from);
            copy_async_chunk_unchecked(smem, b_at(s, rb + 4 * j, cb), from, 2 * inside as usize);
        }
    });
}

/// The product of the block's `BM` rows of `a` (from `row0`) and `BN` columns of `b` (from
/// `col0`): this warp's 64 × 32 part (C's rows from `wr`, columns from `wc`) in accumulators
/// `[p][q]` (the tensor cores' tile of C's columns `16 p ..`, relabelled, and rows `8 q ..`).
///
/// `stages` slices are copied ahead (one commit group per slice, empty past the end, so that the
/// waits count right). At the last step of a slice the block waits for the next slice and meets;
/// past that barrier nobody reads the slice's stage any more, and it is refilled with the slice
/// `stages` ahead (2 stages at least). Ends with a barrier (the stages may be refilled); with
/// `k = 0` nothing is staged.
#[inline(always)]
fn k_loop<const INSIDE: bool>(
    smem: SharedSlice<f64>,
    stages: usize,
    (a, b): (&MatrixRef<'_, f64>, &MatrixRef<'_, f64>),
    (row0, col0): (usize, usize),
    aligned: bool,
    (wr, wc): (usize, usize),
) -> [[Acc16x8F64; 8]; 2] {
    let k = a.cols();
    let slices = k.div_ceil(BK);
    let pad = if INSIDE { slices * BK - k } else { 0 };
    let mut acc = [[Acc16x8F64::ZERO; 8]; 2];
    if slices == 0 {
        return acc;
    }
    // Every `stage_slice` below: the stage is read only after the wait and barrier that follow
    // the copy, and refilled only after a barrier that every reader of it has passed; it is
    // below `stages`; the caller passes `INSIDE` only if it holds. (Calls, not a closure: each
    // must be inlined.) Every operand load: the stage it reads has landed (a wait and barrier
    // since) and is refilled only after the barrier that follows the last load from it; the
    // whole warp runs this code.
    let next = |s: usize| if s + 1 == stages { 0 } else { s + 1 };
    for s in 0..stages {
        if s < slices {
            // SAFETY: see above.
            unsafe { stage_slice::<INSIDE>(smem, (s, s, pad), (a, b), (row0, col0), aligned) };
        }
        commit_async_copies();
    }
    wait_all_groups_but(stages - 1);
    sync_threads();
    // SAFETY: see above.
    let mut fa = unsafe { a_operands(smem, 0, 0, wc) };
    let mut fb = [m16n8k8_f64::B::ZERO; 8];
    unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
        // SAFETY: see above.
        fb[q] = unsafe { b_operand(smem, 0, 0, wr, q) };
    });
    let mut s = 0;
    for slice in 0..slices {
        unroll!(step in [0, 1] {
            // Where the next step's operands are: this slice, or the next one (past the last
            // slice, this step's again, loaded and not used).
            let (ns, nstep) = if step + 1 < STEPS {
                (s, step + 1)
            } else {
                // Every warp has loaded its last operands of stage s (the step before); at
                // most `stages - 2` groups pending: the next slice has landed.
                wait_all_groups_but(stages - 2);
                sync_threads();
                if slice + 1 < slices { (next(s), 0) } else { (s, step) }
            };
            // SAFETY: see above.
            let fa_next = unsafe { a_operands(smem, ns, nstep, wc) };
            unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
                acc[0][q] = m16n8k8_f64::mma(&fa[0], &fb[q], acc[0][q]);
                acc[1][q] = m16n8k8_f64::mma(&fa[1], &fb[q], acc[1][q]);
                // SAFETY: see above.
                fb[q] = unsafe { b_operand(smem, ns, nstep, wr, q) };
            });
            fa = fa_next;
            if step + 1 == STEPS {
                if slice + stages < slices {
                    let at = (s, slice + stages, pad);
                    // SAFETY: see above.
                    unsafe { stage_slice::<INSIDE>(smem, at, (a, b), (row0, col0), aligned) };
                }
                commit_async_copies();
            }
        });
        s = next(s);
    }
    // Nobody reads the stages any more: the next tile may refill them.
    sync_threads();
    acc
}

/// `c = a · b` with `a` (`m × k`), `b` (`k × n`) and `c` (`m × n`) row-major `f64`, on the
/// `f64` tensor cores (`m16n8k8_f64`, sm_90 and newer; elsewhere the launch fails). Launch:
/// blocks of [`DGEMM_THREADS`] threads with [`DGEMM_SHARED_BYTES`] of dynamic shared memory (or
/// 2 to [`DGEMM_MAX_STAGES`] stages of [`DGEMM_STAGE_BYTES`]), [`dgemm_blocks`]
/// blocks (or any other number). Rows at 16-byte boundaries (`k` and `n` even) take the
/// asynchronous copies; other shapes are staged element by element, with the same results.
#[offload::kernel]
pub fn dgemm(dims: MatDims, a: &[f64], b: &[f64], c: &mut [f64]) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().x == DGEMM_THREADS && block_dim().count() == DGEMM_THREADS as u64,
        "dgemm: launch blocks of DGEMM_THREADS threads"
    );
    let smem = dynamic_shared::<f64>();
    let stages = stages_in(smem, STAGE_LEN, DGEMM_MAX_STAGES, "dgemm");
    assert!(
        stages >= 2,
        "dgemm: launch with dynamic shared memory for two stages at least"
    );
    let (am, bm) = (MatrixRef::new(a, m, k), MatrixRef::new(b, k, n));
    let mut cm = MatrixMut::new(&mut c, m, n, n);
    let aligned = chunks_aligned(&am) && chunks_aligned(&bm);
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let warp = warp_id() as usize;
    let (wr, wc) = (warp / 2 * 64, warp % 2 * 32);
    let lane = lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    let mut tile = block_idx().x as usize;
    while tile < tiles_m * tiles_n {
        let (tm, tn) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tm * BM, tn * BN);
        let origin = (row0, col0);
        let acc = if aligned && row0 + BM <= m && col0 + BN <= n {
            k_loop::<true>(smem, stages, (&am, &bm), origin, aligned, (wr, wc))
        } else {
            k_loop::<false>(smem, stages, (&am, &bm), origin, aligned, (wr, wc))
        };
        // Tile [p][q] holds, in this lane's elements 0 and 2 (1 and 3), C's row 8q + 2t
        // (+ 1) at the adjacent columns 16p + 2g, + 1 (see the module docs).
        unroll!(p in [0, 1] {
            unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
                let d = acc[p][q].0;
                let (row, col) = (row0 + wr + 8 * q + 2 * t, col0 + wc + 16 * p + 2 * g);
                // SAFETY: these 4 elements belong to this lane of this warp of this block's
                // tile alone.
                unsafe {
                    cm.set_pair(row, col, d[0], d[2]);
                    cm.set_pair(row + 1, col, d[1], d[3]);
                }
            });
        });
        tile += grid_dim().x as usize;
    }
}
