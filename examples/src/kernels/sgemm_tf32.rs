//! `C = A · B` in `f32` on the tf32 tensor cores at `f32` accuracy ("3×TF32").
//!
//! Each operand is split into two tf32 numbers, `x = big + small` to about 22 bits
//! (`mma::tf32_split`); three tf32 products `small·big' + big·small' + big·big'` stand for
//! `x·x'`, and each slice's sum (32 products, four `m16n8k8` steps chained on the tensor cores)
//! is added into an `f32` accumulator outside the tensor cores, rounded to nearest: the
//! truncating sums of the tensor cores then never grow longer than one slice.
use super::gemm_tiles::{chunks_aligned, grouped_tile, pipelined, stage_tile, stages_in, unroll};
use super::tensor::MatDims;
use offload::mma::{m16n8k8, Acc16x8, MatrixMut, MatrixRef};
use offload::prelude::*;

/// Output tile of one block.
const BM: usize = 128;
const BN: usize = 128;
/// Depth of the slices staged in shared memory: the tensor cores sum 32 products of a row and a
/// column before each `f32` addition.
const BK: usize = 32;
/// Slices in flight (fewer when the launch gives less shared memory).
const STAGES: usize = 4;
/// Row stride of the staged B slices (`BK × BN`), padded so that the fragment loads of a warp
/// fall in different shared-memory banks; A slices (`BM × BK`) have `BK + 4`.
const B_STRIDE: usize = BN + 8;
/// Elements of one stage.
const STAGE_LEN: usize = BM * (BK + 4) + BK * B_STRIDE;
/// Threads per block: 8 warps, 2 down × 4 across, each computing 64 × 32 of the tile.
pub const SGEMM_TF32_THREADS: u32 = 256;
/// Dynamic shared memory per block for all stages of [`sgemm_tf32x3`], in bytes (fewer whole
/// stages work too).
pub const SGEMM_TF32_SHARED_BYTES: u32 = (STAGES * STAGE_LEN * 4) as u32;

/// Blocks that cover an `m × n` output with one tile each (any grid works).
pub fn sgemm_tf32_blocks(dims: MatDims) -> u32 {
    (dims.m as usize).div_ceil(BM) as u32 * (dims.n as usize).div_ceil(BN) as u32
}

/// `c = a · b` with `a` (`m × k`), `b` (`k × n`) and `c` (`m × n`) row-major `f32`, by 3×TF32
/// on the tensor cores (see the module docs). Launch: blocks of [`SGEMM_TF32_THREADS`] threads
/// with [`SGEMM_TF32_SHARED_BYTES`] of dynamic shared memory, [`sgemm_tf32_blocks`] blocks (or
/// any other number). Rows at 16-byte boundaries (`k` and `n` multiples of 4) take
/// the fast path; other shapes are staged element by element, with the same results.
#[offload::kernel]
pub fn sgemm_tf32x3(dims: MatDims, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        block_dim().x == SGEMM_TF32_THREADS && block_dim().count() == SGEMM_TF32_THREADS as u64,
        "sgemm_tf32x3: launch blocks of SGEMM_TF32_THREADS threads"
    );
    let smem = dynamic_shared::<f32>();
    let stages = stages_in(smem, STAGE_LEN, 4, "sgemm_tf32x3");
    let (am, bm) = (MatrixRef::new(a, m, k), MatrixRef::new(b, k, n));
    let mut cm = MatrixMut::new(&mut c, m, n, n);
    let aligned = chunks_aligned(&am) && chunks_aligned(&bm);
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(BN));
    let warp = warp_id() as usize;
    let (wr, wc) = (warp / 4 * 64, warp % 4 * 32);
    let slices = k.div_ceil(BK);
    let a_at = |s: usize, r: usize, col: usize| s * STAGE_LEN + r * (BK + 4) + col;
    let b_at = |s: usize, r: usize, col: usize| s * STAGE_LEN + BM * (BK + 4) + r * B_STRIDE + col;

    let mut tile = block_idx().x as usize;
    while tile < tiles_m * tiles_n {
        let (tm, tn) = grouped_tile(tile, tiles_m, tiles_n);
        let (row0, col0) = (tm * BM, tn * BN);
        let mut acc = [[Acc16x8::ZERO; 4]; 4];
        pipelined!(
            slices,
            stages,
            |s, slice| {
                // SAFETY: (both stagings) `pipelined` reads stage s only after the wait and
                // barrier that follow, and refills it only after a barrier that every reader of
                // it has passed.
                unsafe {
                    stage_tile::<f32, 256>(
                        smem,
                        |r, ch| a_at(s, r, 4 * ch),
                        &am,
                        (row0, slice * BK),
                        (BM, BK / 4),
                        aligned,
                        0.0,
                    );
                    stage_tile::<f32, 256>(
                        smem,
                        |r, ch| b_at(s, r, 4 * ch),
                        &bm,
                        (slice * BK, col0),
                        (BK, BN / 4),
                        aligned,
                        0.0,
                    );
                }
            },
            |s| {
                // Stage s was copied (wait and barrier in `pipelined`) and is not written until
                // every warp has passed the next barrier; the whole warp runs the fragment loads.
                let zero_b = m16n8k8::B::from_array([0.0; 2]);
                let mut fb = [[(zero_b, zero_b); 4]; 4];
                unroll!(ks in [0, 1, 2, 3] {
                    unroll!(j in [0, 1, 2, 3] {
                        fb[ks][j] = m16n8k8::B::split(m16n8k8::B::gather(|kk, nn| {
                            // SAFETY: stage s as said above; in bounds without a check: s < stages,
                            // and `stages_in` checked that `stages` whole stages fit in `smem`.
                            unsafe { smem.as_ptr().add(b_at(s, 8 * ks + kk, wc + 8 * j + nn)).read() }
                        }));
                    });
                });
                unroll!(i in [0, 1, 2, 3] {
                    let zero_a = m16n8k8::A::from_array([0.0; 4]);
                    let mut fa = [(zero_a, zero_a); 4];
                    unroll!(ks in [0, 1, 2, 3] {
                        // SAFETY: stage s as said above.
                        fa[ks] = m16n8k8::A::split(unsafe {
                            m16n8k8::A::load_shared_f32(smem, |r, h| {
                                a_at(s, wr + 16 * i + r, 8 * ks + 4 * h)
                            })
                        });
                    });
                    // The slice's 32 products summed on the tensor cores (four independent sums
                    // side by side, so that consecutive mma do not wait for each other), then added
                    // in f32.
                    let mut t = [Acc16x8::ZERO; 4];
                    unroll!(ks in [0, 1, 2, 3] {
                        let (a_big, a_small) = &fa[ks];
                        unroll!(j in [0, 1, 2, 3] {
                            t[j] = m16n8k8::mma(a_small, &fb[ks][j].0, t[j]);
                        });
                        unroll!(j in [0, 1, 2, 3] {
                            t[j] = m16n8k8::mma(a_big, &fb[ks][j].1, t[j]);
                        });
                        unroll!(j in [0, 1, 2, 3] {
                            t[j] = m16n8k8::mma(a_big, &fb[ks][j].0, t[j]);
                        });
                    });
                    unroll!(j in [0, 1, 2, 3] {
                        acc[i][j] = acc[i][j].add(t[j]);
                    });
                });
            }
        );
        unroll!(i in [0, 1, 2, 3] {
            unroll!(j in [0, 1, 2, 3] {
                unroll!(half in [0, 1] {
                    let (r, col) = Acc16x8::position(2 * half);
                    let (r, col) = (row0 + wr + 16 * i + r, col0 + wc + 8 * j + col);
                    // SAFETY: this lane's elements of this warp's part of this block's tile.
                    unsafe { cm.set_pair(r, col, acc[i][j].0[2 * half], acc[i][j].0[2 * half + 1]) };
                });
            });
        });
        tile += grid_dim().x as usize;
    }
}
