//! `out = act(A · Wᵀ + bias)`: a linear layer on the tensor cores, `bf16` operands, `f32`
//! accumulation, `f32` or `bf16` out.
use super::gemm_tiles::{
    chunks_aligned, grouped_tile, stage_tile, stage_tile_inside, stages_in, unroll,
    wait_all_groups_but,
};
use super::tensor::MatDims;
use offload::half::bf16;
use offload::mma::{m16n8k16, Acc16x8, MatrixMut, MatrixRef};
use offload::prelude::*;

/// Rows and columns of the output tile of one block, one warp per 64 × 64 of it.
const BM: usize = 128;
const BN: usize = 128;
/// Depth of the slices staged in shared memory.
const BK: usize = 32;
/// Slices in flight: one being multiplied, the others being copied (fewer when the launch
/// gives less shared memory, as the host backend's 48 KiB; two at least).
const STAGES: usize = 4;
/// Threads per block: 4 warps, 2 down × 2 across. With 64 KiB of shared memory and up to 255
/// registers per thread, two blocks share an H200 SM.
const THREADS: usize = 128;
pub const GEMM_BF16_THREADS: u32 = THREADS as u32;
/// Dynamic shared memory per block for all stages of [`gemm_bf16`], in bytes (launch with
/// `.dynamic_shared(...)` of this, or of fewer whole stages, two at least).
pub const GEMM_BF16_SHARED_BYTES: u32 = (STAGES * (BM + BN) * BK * 2) as u32;

/// Blocks that cover an `m × n` output with one tile each (any grid works: blocks take tiles
/// grid-stride).
pub fn gemm_bf16_blocks(dims: MatDims) -> u32 {
    (dims.m as usize).div_ceil(BM) as u32 * (dims.n as usize).div_ceil(BN) as u32
}

/// The activations [`gemm_bf16`] applies after adding the bias.
pub const ACT_NONE: u32 = 0;
pub const ACT_RELU: u32 = 1;
/// GELU, tanh approximation: `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
pub const ACT_GELU: u32 = 2;

/// `activation` (one of the `ACT_*`) of `x`.
#[inline(always)]
pub fn activate(x: f32, activation: u32) -> f32 {
    match activation {
        ACT_RELU => x.max(0.0),
        ACT_GELU => gelu(x),
        _ => x,
    }
}

/// GELU, tanh approximation, as `x · σ(2u) = x / (1 + e^(-2u))` (the same function:
/// `(1 + tanh u) / 2 = σ(2u)`), with `u = √(2/π) · (x + 0.044715 x³)`: no cancellation for
/// negative `x`, and no libm call (see [`exp_poly`]). A call rather than inlined: inlined in
/// each of the epilogue's 128 values, it made the kernel's code 60% larger, and that cold code
/// slowed even launches without GELU (0.56× cuBLAS → 0.42× at 8192³ on the H200).
#[inline(never)]
fn gelu(x: f32) -> f32 {
    let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_poly(-2.0 * u))
}

/// `e^t` within about 2 ulp for `t` in [-87, 88] (clamped to it): `t = n ln 2 + r` with
/// `|r| <= ln 2 / 2`, `e^r` by its Taylor polynomial of degree 7 (truncation below 0.1 ulp),
/// `2^n` from the exponent bits. Additions, multiplications and integer operations only, no
/// branch: the host backend and the GPU give the same bits, in ~20 instructions where libm's
/// `expf`/`tanhf` (`math::exp`, `math::tanh`) branch, call and take ~100, which made the GELU
/// epilogue (128 values per thread) a large part of the MLP's first layer.
#[inline(always)]
fn exp_poly(t: f32) -> f32 {
    const LOG2_E: f32 = core::f32::consts::LOG2_E;
    // ln 2 in two parts: the first has 15 significant bits, so `n * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let t = t.clamp(-87.0, 88.0);
    let n = (t * LOG2_E + ROUND) - ROUND;
    let r = (t - n * LN2_HI) - n * LN2_LO;
    // Written out: a loop over the coefficients stays a loop over local memory on the GPU.
    let p = ((((1.0 / 5040.0 * r + 1.0 / 720.0) * r + 1.0 / 120.0) * r + 1.0 / 24.0) * r
        + 1.0 / 6.0)
        * r;
    let p = ((p + 0.5) * r + 1.0) * r + 1.0;
    // n is in [-126, 127]: 2^n is a normal number.
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// An output element type of [`gemm_bf16`].
pub trait GemmOut: Copy {
    fn from_f32(x: f32) -> Self;
}

impl GemmOut for f32 {
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl GemmOut for bf16 {
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// Element offset, in a stage of rows of `BK` values (4 chunks of 8), of chunk `c` of row `r`:
/// the chunks of each row are permuted by `(r / 2) % 4`, so that the 8 rows an `ldmatrix`
/// phase reads, and the 32 chunks a warp copies, fall in different shared-memory banks.
#[inline(always)]
fn swizzled(r: usize, c: usize) -> usize {
    r * BK + ((c ^ ((r >> 1) & 3)) * 8)
}

/// One warp's operands for one 16-deep step: 4 A fragments (64 rows), 8 B fragments (64
/// columns).
#[derive(Clone, Copy)]
struct Operands {
    a: [m16n8k16::A<bf16>; 4],
    b: [m16n8k16::B<bf16>; 8],
}

const NO_OPERANDS: Operands = Operands {
    a: [m16n8k16::A::from_regs([0; 4]); 4],
    b: [m16n8k16::B::from_regs([0; 2]); 8],
};

/// Element offset of chunk `c` of row `r` of the A slice in stage `s`.
#[inline(always)]
fn a_at(s: usize, r: usize, c: usize) -> usize {
    s * (BM + BN) * BK + swizzled(r, c)
}

/// Element offset of chunk `c` of row `r` of the W slice in stage `s`.
#[inline(always)]
fn w_at(s: usize, r: usize, c: usize) -> usize {
    s * (BM + BN) * BK + BM * BK + swizzled(r, c)
}

/// Starts copying slice `slice` (columns `slice * BK ..`) of the block's rows of `a` (from
/// `row0`) and of `w` (from `col0`) into stage `s`. `INSIDE`: both tiles lie inside their
/// matrices, whose rows start at 16-byte boundaries (no check per chunk).
///
/// # Safety
/// No thread touches stage `s` until the block has waited for these copies and met at a
/// barrier; with `INSIDE`, what it says holds.
#[inline(always)]
unsafe fn stage_slice<const INSIDE: bool>(
    smem: SharedSlice<bf16>,
    s: usize,
    slice: usize,
    (a, w): (&MatrixRef<'_, bf16>, &MatrixRef<'_, bf16>),
    (row0, col0): (usize, usize),
    aligned: bool,
) {
    let a_place = |r, c| a_at(s, r, c);
    let w_place = |r, c| w_at(s, r, c);
    let (a_tile, w_tile) = ((row0, slice * BK), (col0, slice * BK));
    // SAFETY: (all four) the caller's contract.
    unsafe {
        if INSIDE {
            stage_tile_inside::<bf16, THREADS>(smem, a_place, a, a_tile, (BM, BK / 8));
            stage_tile_inside::<bf16, THREADS>(smem, w_place, w, w_tile, (BN, BK / 8));
        } else {
            let zero = bf16::ZERO;
            stage_tile::<bf16, THREADS>(smem, a_place, a, a_tile, (BM, BK / 8), aligned, zero);
            stage_tile::<bf16, THREADS>(smem, w_place, w, w_tile, (BN, BK / 8), aligned, zero);
        }
    }
}

/// This warp's operands (its rows from `wr`, columns from `wc`) of step `step` (16 deep) of the
/// slice in stage `s`.
///
/// # Safety
/// Stage `s` was copied (the block waited and met at a barrier since) and is not written until
/// every warp has passed the next barrier; the whole warp calls this; `s` is below the stages
/// that fit in `smem`.
#[inline(always)]
unsafe fn operands(
    smem: SharedSlice<bf16>,
    s: usize,
    step: usize,
    (wr, wc): (usize, usize),
) -> Operands {
    let mut o = NO_OPERANDS;
    // The swizzle depends on the row's low 3 bits only, so fragments 16 rows apart are
    // `16 * BK` elements apart: one address per step and operand, constant offsets from it.
    unroll!(i in [0, 1, 2, 3] {
        // SAFETY: the caller's contract; the chunks lie inside `smem` (stage s fits, rows
        // below BM + BN, chunks below BK / 8) at 16-byte boundaries (`dynamic_shared` is
        // 16-byte aligned, chunks are 8 elements).
        o.a[i] = unsafe {
            m16n8k16::A::load_shared_unchecked(smem, |r, h| {
                a_at(s, wr + r, 2 * step + h) + 16 * i * BK
            })
        };
    });
    unroll!(j in [0, 1, 2, 3] {
        // SAFETY: as for the A fragments.
        [o.b[2 * j], o.b[2 * j + 1]] = unsafe {
            m16n8k16::B::load_shared_transposed_pair_unchecked(smem, |c, h| {
                w_at(s, wc + c, 2 * step + h) + 16 * j * BK
            })
        };
    });
    o
}

/// The product of the block's `BM × k` rows of `a` (from `row0`) and `BN × k` rows of `w`
/// (from `col0`): this warp's 64 × 64 part (rows from `wr`, columns from `wc`) in accumulators
/// `[i][j]` (rows `16 i`, columns `8 j`). The k loop is software-pipelined twice: slices
/// `stages - 1` ahead in shared memory (one commit group per slice, empty past the end, so that
/// the waits count right), and each step's fragments loaded while the previous step multiplies.
/// `INSIDE`: the tiles lie inside `a` and `w`, whose rows start at 16-byte boundaries, and `k` is
/// a multiple of `BK` (no check per copy). Ends with a barrier (the stages may be refilled).
#[inline(always)]
fn k_loop<const INSIDE: bool>(
    smem: SharedSlice<bf16>,
    stages: usize,
    (a, w): (&MatrixRef<'_, bf16>, &MatrixRef<'_, bf16>),
    (row0, col0): (usize, usize),
    aligned: bool,
    (wr, wc): (usize, usize),
) -> [[Acc16x8; 8]; 4] {
    const STEPS: usize = BK / 16;
    let slices = a.cols().div_ceil(BK);
    let stage = |s: usize, slice: usize| {
        if slice < slices {
            // SAFETY: stage s is read only after the wait and barrier that follow this
            // copy, and refilled only after a barrier that every reader of it has passed
            // (see the k loop).
            unsafe { stage_slice::<INSIDE>(smem, s, slice, (a, w), (row0, col0), aligned) };
        }
    };
    let next = |s: usize| if s + 1 == stages { 0 } else { s + 1 };
    for s in 0..stages - 1 {
        stage(s, s);
        commit_async_copies();
    }
    let wait_oldest = || {
        // At most `stages - 2` groups pending: the oldest slice has landed.
        wait_all_groups_but(stages - 2);
        sync_threads();
    };
    wait_oldest();
    let (mut read, mut write) = (0, stages - 1);
    // SAFETY: stage `read` has landed (`wait_oldest`) and is refilled only after the barrier
    // that follows the step that loads its last operands; the whole warp runs this code;
    // `read < stages`.
    let mut ops = [unsafe { operands(smem, read, 0, (wr, wc)) }, NO_OPERANDS];
    let mut acc = [[Acc16x8::ZERO; 8]; 4];
    for slice in 0..slices {
        unroll!(step in [0, 1] {
            if step == STEPS - 1 {
                // Every warp has loaded its last fragments of stage `read` (the step before):
                // after the barrier it may be refilled, and the next slice has landed in stage
                // `next(read)`.
                read = next(read);
                wait_oldest();
            }
            // The next step's operands (of the next slice after the last step; past the last
            // slice they are loaded and not used).
            // SAFETY: as for the first operands: stage `read` has landed and is not refilled
            // before the next barrier.
            ops[(step + 1) % 2] = unsafe { operands(smem, read, (step + 1) % STEPS, (wr, wc)) };
            if step == 0 {
                // Stage `write` was last read in the previous slice, before the barrier.
                stage(write, slice + stages - 1);
                commit_async_copies();
                write = next(write);
            }
            let o = &ops[step % 2];
            unroll!(i in [0, 1, 2, 3] {
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                    acc[i][j] = m16n8k16::mma(&o.a[i], &o.b[j], acc[i][j]);
                });
            });
        });
    }
    // Nobody reads the stages any more: the next tile may refill them.
    sync_threads();
    acc
}

/// `out = act(a · wᵀ + bias)` with `a` (`m × k`), `w` (`n × k`, a weight matrix as
/// `torch.nn.Linear` holds it) and `out` (`m × n`) row-major; `bias` has `n` elements or none.
/// Products of `bf16` are summed in `f32` on the tensor cores (`m16n8k16`), then `activation`
/// (`ACT_*`) applies and the result is rounded to `O` (to nearest-even for `bf16`).
///
/// Launch: blocks of [`GEMM_BF16_THREADS`] threads (1D) with [`GEMM_BF16_SHARED_BYTES`] of
/// dynamic shared memory, [`gemm_bf16_blocks`] blocks (or any other number). Rows of `a` and `w`
/// at 16-byte boundaries (`k` a multiple of 8, device allocations) take the fast path; other
/// shapes are staged element by element, with the same results.
#[offload::kernel(instances(O = f32 | bf16))]
pub fn gemm_bf16<O: GemmOut>(
    dims: MatDims,
    activation: u32,
    a: &[bf16],
    w: &[bf16],
    bias: &[f32],
    out: &mut [O],
) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().x == GEMM_BF16_THREADS && block_dim().count() == GEMM_BF16_THREADS as u64,
        "gemm_bf16: launch blocks of GEMM_BF16_THREADS threads"
    );
    assert!(
        bias.is_empty() || bias.len() >= n,
        "gemm_bf16: bias needs n elements"
    );
    let smem = dynamic_shared::<bf16>();
    let stages = stages_in(smem, (BM + BN) * BK, 4, "gemm_bf16");
    assert!(
        stages >= 2,
        "gemm_bf16: launch with dynamic shared memory for two stages at least"
    );
    let (am, wm) = (MatrixRef::new(a, m, k), MatrixRef::new(w, n, k));
    let mut om = MatrixMut::new(&mut out, m, n, n);
    let aligned = chunks_aligned(&am) && chunks_aligned(&wm);
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let warp = warp_id() as usize;
    let (wr, wc) = (warp / 2 * 64, warp % 2 * 64);
    let mut tile = block_idx().x as usize;
    while tile < tiles_m * tiles_n {
        let (tm, tn) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tm * BM, tn * BN);
        let inside = aligned && row0 + BM <= m && col0 + BN <= n && k % BK == 0;
        let tiles = (&am, &wm);
        let acc = if inside {
            k_loop::<true>(smem, stages, tiles, (row0, col0), aligned, (wr, wc))
        } else {
            k_loop::<false>(smem, stages, tiles, (row0, col0), aligned, (wr, wc))
        };
        let bias_at = |col: usize| if col < bias.len() { bias[col] } else { 0.0 };
        unroll!(i in [0, 1, 2, 3] {
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                unroll!(half in [0, 1] {
                    let (r, c) = Acc16x8::position(2 * half);
                    let (row, col) = (row0 + wr + 16 * i + r, col0 + wc + 8 * j + c);
                    let v = activate(acc[i][j].0[2 * half] + bias_at(col), activation);
                    let u = activate(acc[i][j].0[2 * half + 1] + bias_at(col + 1), activation);
                    // SAFETY: (row, col) and (row, col + 1) are this lane's elements of this
                    // warp's part of this block's tile; tiles, warps' parts and lanes' elements
                    // do not overlap.
                    unsafe { om.set_pair(row, col, O::from_f32(v), O::from_f32(u)) };
                });
            });
        });
        tile += grid_dim().x as usize;
    }
}
