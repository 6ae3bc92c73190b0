//! `C = A · B` in `f64` on the `f64` tensor cores of sm_90 (`mma::m16n8k8_f64` or
//! `mma::m16n8k16_f64`): a DGEMM.
//!
//! Each block computes a 128 × 128 tile of C, its 8 warps 64 × 32 each, from slices of A
//! (128 × 16) and B (16 × 128) staged in shared memory with asynchronous copies, four deep.
//! The tensor cores compute the transposed product, `Cᵀ = Bᵀ · Aᵀ` (their A operand from B's
//! slice, their B operand from A's), and two relabellings put every pair of values that a
//! fragment holds in adjacent registers next to each other in shared memory, so that each
//! 16-byte read fills two fragment registers with no moves in between:
//! - the sum over `k`: fragment position `t + 4q` of a step of depth `K` is column (of A) or
//!   row (of B) `(K / 4) · t + q` of the step;
//! - the columns of C: in each group of 16, column `n` of the tensor cores' 16-row tile is
//!   column `2 (n % 8) + n / 8`, so a lane's values of columns `n` and `n + 8` are adjacent (and
//!   it stores C two adjacent elements at a time).
//!
//! Rows of A swap halves of their chunks, rows of B permute theirs (XOR swizzles), so that every
//! phase of a warp's 16-byte reads touches 8 different bank groups. Each element of C is the sum
//! of its products in some order, one rounding per fused multiply-add; the host backend runs the
//! same code and gives the same bits.
use super::gemm_tiles::{chunks_aligned, grouped_tile, pipelined, stage_tile, stages_in, unroll};
use super::tensor::MatDims;
use offload::mma::{m16n8k16_f64, m16n8k8_f64, Acc16x8F64, MatrixMut, MatrixRef};
use offload::prelude::*;

/// Rows and columns of the output tile of one block.
const BM: usize = 128;
const BN: usize = 128;
/// Depth of the slices staged in shared memory.
const BK: usize = 16;
/// Slices in flight (fewer when the launch gives less shared memory: one on the host
/// backend's 48 KiB).
const STAGES: usize = 4;
/// Elements of one stage: the A slice (`BM × BK`), then the B slice (`BK × BN`).
const STAGE_LEN: usize = BM * BK + BK * BN;
/// Threads per block: 8 warps, 2 down × 4 across.
const THREADS: usize = 256;
pub const DGEMM_THREADS: u32 = THREADS as u32;
/// Dynamic shared memory per block for all stages of [`dgemm`], in bytes (fewer whole stages
/// work too).
pub const DGEMM_SHARED_BYTES: u32 = (STAGES * STAGE_LEN * 8) as u32;

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

/// The tensor-core step of the k loop: one `mma` shape, the relabelling of `k` that its
/// fragments need (see the module docs), and the swizzles that keep their reads free of bank
/// conflicts.
pub trait Step {
    /// Elements of each `A` row's chunks XORed into its chunk index on odd rows.
    const A_SWIZZLE: usize;
    /// Rows of B that share one permutation of their chunks.
    const B_ROWS: usize;

    /// Adds this warp's part (rows of C from `wr`, columns from `wc`) of the product of the
    /// slice in stage `s` into `acc` (`[p][q]`: the tensor cores' tile of C's columns
    /// `16 p ..` (relabelled) and rows `8 q ..`).
    ///
    /// # Safety
    /// Stage `s` has landed (the block waited and met at a barrier since) and is not written
    /// before the next barrier; the whole warp calls this; `s` is below the stages that fit in
    /// `smem`.
    unsafe fn multiply(
        smem: SharedSlice<f64>,
        s: usize,
        warp_tile: (usize, usize),
        acc: &mut [[Acc16x8F64; 8]; 2],
    );
}

/// Element offset in stage `s` of chunk `c` (two values) of row `r` of the A slice.
#[inline(always)]
fn a_at<S: Step>(s: usize, r: usize, c: usize) -> usize {
    s * STAGE_LEN + r * BK + 2 * (c ^ (S::A_SWIZZLE * (r & 1)))
}

/// Element offset in stage `s` of chunk `c` of row `r` (a `k`) of the B slice.
#[inline(always)]
fn b_at<S: Step>(s: usize, r: usize, c: usize) -> usize {
    s * STAGE_LEN + BM * BK + r * BN + 2 * (c ^ (2 * ((r / S::B_ROWS) & 3)))
}

/// Multiplies with `m16n8k8_f64`: two steps per slice, 4 values of B and 2 of A per fragment.
#[derive(Clone, Copy)]
pub struct Depth8;

impl Step for Depth8 {
    // A lane reads chunk t of each 4 of A's rows g (its columns 2t, 2t + 1): rows g and g + 1
    // of a read phase must use different halves. B: a lane reads rows 2t and 2t + 1.
    const A_SWIZZLE: usize = 4;
    const B_ROWS: usize = 2;

    #[inline(always)]
    unsafe fn multiply(
        smem: SharedSlice<f64>,
        s: usize,
        (wr, wc): (usize, usize),
        acc: &mut [[Acc16x8F64; 8]; 2],
    ) {
        let lane = lane_id() as usize;
        let (g, t) = (lane / 4, lane % 4);
        unroll!(step in [0, 1] {
            let mut fa = [m16n8k8_f64::A::ZERO; 2];
            unroll!(p in [0, 1] {
                let (k, c) = (8 * step + 2 * t, wc / 2 + 8 * p + g);
                // SAFETY: (all reads) the caller's contract; the offsets lie in stage s.
                let (e0, e1) = unsafe {
                    (pair(smem, b_at::<Self>(s, k, c)), pair(smem, b_at::<Self>(s, k + 1, c)))
                };
                fa[p] = m16n8k8_f64::A([e0[0], e0[1], e1[0], e1[1]]);
            });
            let mut fb = [m16n8k8_f64::B::ZERO; 8];
            unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
                // SAFETY: as above.
                fb[q] = m16n8k8_f64::B(unsafe {
                    pair(smem, a_at::<Self>(s, wr + 8 * q + g, 4 * step + t))
                });
            });
            unroll!(p in [0, 1] {
                unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
                    acc[p][q] = m16n8k8_f64::mma(&fa[p], &fb[q], acc[p][q]);
                });
            });
        });
    }
}

/// Multiplies with `m16n8k16_f64`: one step per slice, 8 values of B and 4 of A per fragment.
#[derive(Clone, Copy)]
pub struct Depth16;

impl Step for Depth16 {
    // A lane reads chunks 2t and 2t + 1 of A's rows g (columns 4t..4t + 4): rows g and g + 1 of
    // a read phase must differ in the chunk's lowest bit. B: a lane reads rows 4t..4t + 4.
    const A_SWIZZLE: usize = 1;
    const B_ROWS: usize = 4;

    #[inline(always)]
    unsafe fn multiply(
        smem: SharedSlice<f64>,
        s: usize,
        (wr, wc): (usize, usize),
        acc: &mut [[Acc16x8F64; 8]; 2],
    ) {
        let lane = lane_id() as usize;
        let (g, t) = (lane / 4, lane % 4);
        let mut fa = [m16n8k16_f64::A::ZERO; 2];
        unroll!(p in [0, 1] {
            let c = wc / 2 + 8 * p + g;
            // SAFETY: (all reads) the caller's contract; the offsets lie in stage s.
            let e = unsafe { [0, 1, 2, 3].map(|q| pair(smem, b_at::<Self>(s, 4 * t + q, c))) };
            fa[p] = m16n8k16_f64::A([
                e[0][0], e[0][1], e[1][0], e[1][1], e[2][0], e[2][1], e[3][0], e[3][1],
            ]);
        });
        let mut fb = [m16n8k16_f64::B::ZERO; 8];
        unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
            let r = wr + 8 * q + g;
            // SAFETY: as above.
            let (x0, x1) = unsafe {
                (pair(smem, a_at::<Self>(s, r, 2 * t)), pair(smem, a_at::<Self>(s, r, 2 * t + 1)))
            };
            fb[q] = m16n8k16_f64::B([x0[0], x0[1], x1[0], x1[1]]);
        });
        unroll!(p in [0, 1] {
            unroll!(q in [0, 1, 2, 3, 4, 5, 6, 7] {
                acc[p][q] = m16n8k16_f64::mma(&fa[p], &fb[q], acc[p][q]);
            });
        });
    }
}

/// `c = a · b` with `a` (`m × k`), `b` (`k × n`) and `c` (`m × n`) row-major `f64`, on the
/// `f64` tensor cores (`S`: [`Depth8`] for `m16n8k8`, [`Depth16`] for `m16n8k16`; sm_90 and
/// newer). Launch: blocks of [`DGEMM_THREADS`] threads with [`DGEMM_SHARED_BYTES`] of dynamic
/// shared memory (or fewer whole stages), [`dgemm_blocks`] blocks (or any other number). Rows at
/// 16-byte boundaries (`k` and `n` even) take the asynchronous copies; other shapes are staged
/// element by element, with the same results.
#[offload::kernel(instances(S = Depth8 | Depth16))]
pub fn dgemm<S: Step>(dims: MatDims, a: &[f64], b: &[f64], c: &mut [f64]) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().x == DGEMM_THREADS && block_dim().count() == DGEMM_THREADS as u64,
        "dgemm: launch blocks of DGEMM_THREADS threads"
    );
    let smem = dynamic_shared::<f64>();
    let stages = stages_in(smem, STAGE_LEN, "dgemm");
    let (am, bm) = (MatrixRef::new(a, m, k), MatrixRef::new(b, k, n));
    let mut cm = MatrixMut::new(&mut c, m, n, n);
    let aligned = chunks_aligned(&am) && chunks_aligned(&bm);
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let warp = warp_id() as usize;
    let (wr, wc) = (warp / 4 * 64, warp % 4 * 32);
    let lane = lane_id() as usize;
    let (g, t) = (lane / 4, lane % 4);
    let mut tile = block_idx().x as usize;
    while tile < tiles_m * tiles_n {
        let (tm, tn) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tm * BM, tn * BN);
        let stage = |s: usize, slice: usize| {
            // SAFETY: (both stagings) `pipelined` reads stage s only after the wait and barrier
            // that follow, and refills it only after a barrier that every reader of it has
            // passed.
            unsafe {
                stage_tile::<f64, THREADS>(
                    smem,
                    |r, ch| a_at::<S>(s, r, ch),
                    &am,
                    (row0, slice * BK),
                    (BM, BK / 2),
                    aligned,
                    0.0,
                );
                stage_tile::<f64, THREADS>(
                    smem,
                    |r, ch| b_at::<S>(s, r, ch),
                    &bm,
                    (slice * BK, col0),
                    (BK, BN / 2),
                    aligned,
                    0.0,
                );
            }
        };
        let mut acc = [[Acc16x8F64::ZERO; 8]; 2];
        pipelined(k.div_ceil(BK), stages, stage, |s| {
            // SAFETY: stage s has landed (wait and barrier in `pipelined`) and is not written
            // until every warp has passed the next barrier; the whole warp runs this; s <
            // stages, which `stages_in` checked to fit.
            unsafe { S::multiply(smem, s, (wr, wc), &mut acc) };
        });
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
