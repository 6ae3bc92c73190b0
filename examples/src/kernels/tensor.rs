//! Tensor-core kernels (`offload::mma`, sm_80 and newer; the host backend runs them too):
//! - `mma_tiles_*`: one `mma` per warp on independent tiles from global memory, for every
//!   shape (the tests compare them with CPU loops, and the GPU with the host backend);
//! - `fragments_from_shared`: the `ldmatrix` loads against fragments built element by element;
//! - `sgemm_tf32x3`: `C = A · B` in `f32` at `f32` accuracy on tf32 tensor cores (3×TF32);
//! - `gemm_bf16`: `out = act(A · Wᵀ + bias)` with `bf16` operands and `f32` accumulation,
//!   `f32` or `bf16` out (a linear layer);
//! - `dgemm`: `C = A · B` in `f64` on the `f64` tensor cores of sm_90.
//!
//! The GEMMs stage tiles of A and B in shared memory with asynchronous copies, four stages deep,
//! and handle any m, n, k (tiles overhanging the edges read zeros and skip their stores).
use offload::half::{bf16, f16};
use offload::mma::{
    self, m16n8k16, m16n8k16_f64, m16n8k4_f64, m16n8k8, m16n8k8_f64, m8n8k4, Acc16x8, Acc16x8F64,
    Acc8x8, MatrixMut, MatrixRef,
};
use offload::prelude::*;

/// Sizes of a GEMM: `C (m × n) = A (m × k) · B (k × n)`.
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct MatDims {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

/// The tiles warp `w` of the launch takes: `w`, then every `warps`-th one.
fn my_tiles(tiles: usize) -> impl Iterator<Item = usize> {
    let warps_per_block = (block_dim().count() as usize).div_ceil(32);
    let warp = block_idx().linear_in(grid_dim()) * warps_per_block + warp_id() as usize;
    let warps = grid_dim().count() as usize * warps_per_block;
    (warp..tiles).step_by(warps)
}

/// For each tile `t` (`d.len() / 128` of them): `d_t = a_t · b_t + c_t` with one
/// `m16n8k16::mma`; `a_t` is 16 × 16, `b_t` 16 × 8, `c_t` and `d_t` 16 × 8, all row-major.
/// Blocks of a multiple of 32 threads.
#[offload::kernel(instances(T = f16 | bf16))]
pub fn mma_tiles_16<T: mma::Half>(a: &[T], b: &[T], c: &[f32], d: &mut [f32]) {
    let tiles = d.len() / 128;
    let mut out = MatrixMut::new(&mut d, tiles * 16, 8, 8);
    for t in my_tiles(tiles) {
        let fa = m16n8k16::A::load(&MatrixRef::new(&a[t * 256..], 16, 16), 0, 0);
        let fb = m16n8k16::B::load(&MatrixRef::new(&b[t * 128..], 16, 8), 0, 0);
        let fc = Acc16x8::load(&MatrixRef::new(&c[t * 128..], 16, 8), 0, 0);
        // SAFETY: tile t belongs to this warp alone, and each element of it to one lane.
        unsafe { m16n8k16::mma(&fa, &fb, fc).store(&mut out, t * 16, 0, |v| v) };
    }
}

/// [`mma_tiles_16`] for tf32 (`m16n8k8`): `a_t` 16 × 8, `b_t` 8 × 8, rounded to tf32 first.
#[offload::kernel]
pub fn mma_tiles_tf32(a: &[f32], b: &[f32], c: &[f32], d: &mut [f32]) {
    let tiles = d.len() / 128;
    let mut out = MatrixMut::new(&mut d, tiles * 16, 8, 8);
    for t in my_tiles(tiles) {
        let fa = m16n8k8::A::load(&MatrixRef::new(&a[t * 128..], 16, 8), 0, 0);
        let fb = m16n8k8::B::load(&MatrixRef::new(&b[t * 64..], 8, 8), 0, 0);
        let fc = Acc16x8::load(&MatrixRef::new(&c[t * 128..], 16, 8), 0, 0);
        // SAFETY: as in mma_tiles_16.
        unsafe { m16n8k8::mma(&fa, &fb, fc).store(&mut out, t * 16, 0, |v| v) };
    }
}

/// [`mma_tiles_16`] for `f64` (`m8n8k4`): `a_t` 8 × 4, `b_t` 4 × 8, `c_t` and `d_t` 8 × 8.
#[offload::kernel]
pub fn mma_tiles_f64(a: &[f64], b: &[f64], c: &[f64], d: &mut [f64]) {
    let tiles = d.len() / 64;
    let mut out = MatrixMut::new(&mut d, tiles * 8, 8, 8);
    for t in my_tiles(tiles) {
        let fa = m8n8k4::A::load(&MatrixRef::new(&a[t * 32..], 8, 4), 0, 0);
        let fb = m8n8k4::B::load(&MatrixRef::new(&b[t * 32..], 4, 8), 0, 0);
        let fc = Acc8x8::load(&MatrixRef::new(&c[t * 64..], 8, 8), 0, 0);
        // SAFETY: as in mma_tiles_16.
        unsafe { m8n8k4::mma(&fa, &fb, fc).store(&mut out, t * 8, 0) };
    }
}

/// [`mma_tiles_16`] for the `f64` shapes of sm_90 (`m16n8k4_f64`, `m16n8k8_f64`,
/// `m16n8k16_f64` for `K` = 4, 8, 16): `a_t` 16 × K, `b_t` K × 8, `c_t` and `d_t` 16 × 8.
#[offload::kernel(instances(K = 4 | 8 | 16))]
pub fn mma_tiles_f64_16x8<const K: usize>(a: &[f64], b: &[f64], c: &[f64], d: &mut [f64]) {
    let tiles = d.len() / 128;
    let mut out = MatrixMut::new(&mut d, tiles * 16, 8, 8);
    for t in my_tiles(tiles) {
        let (am, bm) = (
            MatrixRef::new(&a[t * 16 * K..], 16, K),
            MatrixRef::new(&b[t * 8 * K..], K, 8),
        );
        let fc = Acc16x8F64::load(&MatrixRef::new(&c[t * 128..], 16, 8), 0, 0);
        let fd = match K {
            4 => m16n8k4_f64::mma(
                &m16n8k4_f64::A::load(&am, 0, 0),
                &m16n8k4_f64::B::load(&bm, 0, 0),
                fc,
            ),
            8 => m16n8k8_f64::mma(
                &m16n8k8_f64::A::load(&am, 0, 0),
                &m16n8k8_f64::B::load(&bm, 0, 0),
                fc,
            ),
            _ => m16n8k16_f64::mma(
                &m16n8k16_f64::A::load(&am, 0, 0),
                &m16n8k16_f64::B::load(&bm, 0, 0),
                fc,
            ),
        };
        // SAFETY: as in mma_tiles_16.
        unsafe { fd.store(&mut out, t * 16, 0) };
    }
}

/// One warp (launch 32 threads) loads the 16 × 16 `bf16` tile `x` and the 16 × 8 `f32` tile `y`
/// into shared memory, then builds fragments from it twice: with the `ldmatrix` loads and
/// element by element. Lane `l` writes 16 pairs (got, expected) of 32-bit words to
/// `out[32 l..]`: A (4 registers), B of the two 8-column halves with `x` holding Bᵀ (2 × 2),
/// the same with `x` holding B (2 × 2), tf32 A from `y` (4).
#[offload::kernel]
pub fn fragments_from_shared(x: &[bf16], y: &[f32], out: &mut [u32]) {
    let xs = offload::shared!([bf16; 256]);
    let ys = offload::shared!([f32; 128]);
    let lane = lane_id() as usize;
    for i in (lane..256).step_by(32) {
        // SAFETY: each element is written by one lane; the barrier below orders the reads.
        unsafe { xs.write(i, x[i]) };
    }
    for i in (lane..128).step_by(32) {
        // SAFETY: as above.
        unsafe { ys.write(i, y[i]) };
    }
    sync_threads();
    let (xm, ym) = (MatrixRef::new(x, 16, 16), MatrixRef::new(y, 16, 8));
    // SAFETY: the tiles were written before the barrier and are not written again; the whole
    // warp calls each load.
    let (a, bt, b, t) = unsafe {
        (
            m16n8k16::A::<bf16>::load_shared(xs, |r, h| r * 16 + 8 * h),
            m16n8k16::B::<bf16>::load_shared_transposed_pair(xs, |n, h| n * 16 + 8 * h),
            m16n8k16::B::<bf16>::load_shared_pair(xs, |k, h| k * 16 + 8 * h),
            m16n8k8::A::load_shared_f32(ys, |r, h| r * 8 + 4 * h),
        )
    };
    let a_ref = m16n8k16::A::load(&xm, 0, 0);
    let bt_ref = [0, 8].map(|n0| m16n8k16::B::load_transposed(&xm, 0, n0));
    let b_ref = [0, 8].map(|n0| m16n8k16::B::load(&xm, 0, n0));
    let t_ref = m16n8k8::A::gather(|r, c| ym.get_or(r, c, 0.0));
    let mut pairs = [(0u32, 0u32); 16];
    for j in 0..4 {
        pairs[j] = (a.regs()[j], a_ref.regs()[j]);
        pairs[12 + j] = (t[j].to_bits(), t_ref[j].to_bits());
    }
    for h in 0..2 {
        for j in 0..2 {
            pairs[4 + 2 * h + j] = (bt[h].regs()[j], bt_ref[h].regs()[j]);
            pairs[8 + 2 * h + j] = (b[h].regs()[j], b_ref[h].regs()[j]);
        }
    }
    for (i, (got, want)) in pairs.iter().enumerate() {
        // SAFETY: elements 32 * lane .. + 32 belong to this lane alone (one warp).
        unsafe {
            *out.at(32 * lane + 2 * i) = *got;
            *out.at(32 * lane + 2 * i + 1) = *want;
        }
    }
}
