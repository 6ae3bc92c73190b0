//! `out = act(A · Wᵀ + bias)`: a linear layer on the tensor cores, `bf16` operands, `f32`
//! accumulation, `f32` or `bf16` out.
use super::gemm_tiles::{chunks_aligned, grouped_tile, pipelined, stage_tile, stages_in, unroll};
use super::tensor::MatDims;
use offload::half::bf16;
use offload::mma::{m16n8k16, Acc16x8, MatrixMut, MatrixRef};
use offload::prelude::*;

/// Rows and columns of the output tile of one block.
const BM: usize = 128;
const BN: usize = 256;
/// Slices in flight: one being multiplied, the others being copied (fewer when the launch
/// gives less shared memory, as the host backend's 48 KiB).
const STAGES: usize = 4;
/// Threads per block: 8 warps, 2 down × 4 across, each computing 64 × 64 of the tile.
pub const GEMM_BF16_THREADS: u32 = 256;
/// Dynamic shared memory per block for all stages of [`gemm_bf16`]`::<BK>`, in bytes (launch
/// with `.dynamic_shared(...)` of this, or of fewer whole stages).
pub const fn gemm_bf16_shared_bytes(bk: usize) -> u32 {
    (STAGES * (BM + BN) * bk * 2) as u32
}

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

/// A call rather than inlined: the epilogue applies it to 128 values per thread.
#[inline(never)]
fn gelu(x: f32) -> f32 {
    let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    0.5 * x * (1.0 + math::tanh(inner))
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

/// Element offset, in a stage of rows of `BK` values (4 or 8 chunks of 8), of chunk `c` of row
/// `r`: the chunks of each row are permuted by `(r / 2) % 4` (`r % 8` for 8 chunks), so that the
/// 8 rows an `ldmatrix` phase reads, and the 32 chunks a warp copies, fall in different
/// shared-memory banks.
#[inline(always)]
fn swizzled<const BK: usize>(r: usize, c: usize) -> usize {
    let permutation = if BK == 64 { r & 7 } else { (r >> 1) & 3 };
    r * BK + ((c ^ permutation) * 8)
}

/// `out = act(a · wᵀ + bias)` with `a` (`m × k`), `w` (`n × k`, a weight matrix as
/// `torch.nn.Linear` holds it) and `out` (`m × n`) row-major; `bias` has `n` elements or none.
/// Products of `bf16` are summed in `f32` on the tensor cores (`m16n8k16`), then `activation`
/// (`ACT_*`) applies and the result is rounded to `O` (to nearest-even for `bf16`).
///
/// `BK` (32 or 64) is the depth of the slices staged in shared memory. Launch: blocks of
/// [`GEMM_BF16_THREADS`] threads (1D) with [`gemm_bf16_shared_bytes`]`(BK)` of dynamic shared
/// memory, [`gemm_bf16_blocks`] blocks (or any other number). Rows of `a` and
/// `w` at 16-byte boundaries (`k` a multiple of 8, device allocations) take the fast path; other
/// shapes are staged element by element, with the same results.
#[offload::kernel(instances(O = f32 | bf16, BK = 32 | 64))]
pub fn gemm_bf16<O: GemmOut, const BK: usize>(
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
    let stages = stages_in(smem, (BM + BN) * BK, "gemm_bf16");
    let (am, wm) = (MatrixRef::new(a, m, k), MatrixRef::new(w, n, k));
    let mut om = MatrixMut::new(&mut out, m, n, n);
    let aligned = chunks_aligned(&am) && chunks_aligned(&wm);
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let warp = warp_id() as usize;
    let (wr, wc) = (warp / 4 * 64, warp % 4 * 64);
    let slices = k.div_ceil(BK);
    let a_at = |s: usize, r: usize, c: usize| s * (BM + BN) * BK + swizzled::<BK>(r, c);
    let w_at = |s: usize, r: usize, c: usize| s * (BM + BN) * BK + BM * BK + swizzled::<BK>(r, c);

    let mut tile = block_idx().x as usize;
    while tile < tiles_m * tiles_n {
        let (tm, tn) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tm * BM, tn * BN);
        let stage = |s: usize, slice: usize| {
            // SAFETY: (both stagings) `pipelined` reads stage `s` only after the wait and barrier
            // that follow, and refills it only after a barrier that every reader of it has passed.
            unsafe {
                stage_tile::<bf16, 256>(
                    smem,
                    |r, c| a_at(s, r, c),
                    &am,
                    (row0, slice * BK),
                    (BM, BK / 8),
                    aligned,
                    bf16::ZERO,
                );
                stage_tile::<bf16, 256>(
                    smem,
                    |r, c| w_at(s, r, c),
                    &wm,
                    (col0, slice * BK),
                    (BN, BK / 8),
                    aligned,
                    bf16::ZERO,
                );
            }
        };
        let mut acc = [[Acc16x8::ZERO; 8]; 4];
        pipelined(slices, stages, stage, |s| {
            unroll!(ks in [0, 1, 2, 3] {
              if ks < BK / 16 {
                let mut fa = [m16n8k16::A::<bf16>::from_regs([0; 4]); 4];
                unroll!(i in [0, 1, 2, 3] {
                    // SAFETY: stage s was copied (wait and barrier in `pipelined`) and is not
                    // written until every warp has passed the next barrier; the whole warp
                    // runs this load.
                    fa[i] = unsafe {
                        m16n8k16::A::load_shared(smem, |r, h| a_at(s, wr + 16 * i + r, 2 * ks + h))
                    };
                });
                let mut fb = [m16n8k16::B::<bf16>::from_regs([0; 2]); 8];
                unroll!(j in [0, 1, 2, 3] {
                    // SAFETY: as for the A fragments.
                    [fb[2 * j], fb[2 * j + 1]] = unsafe {
                        m16n8k16::B::load_shared_transposed_pair(smem, |c, h| {
                            w_at(s, wc + 16 * j + c, 2 * ks + h)
                        })
                    };
                });
                unroll!(i in [0, 1, 2, 3] {
                    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                        acc[i][j] = m16n8k16::mma(&fa[i], &fb[j], acc[i][j]);
                    });
                });
              }
            });
        });
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
