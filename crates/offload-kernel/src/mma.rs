//! Tensor cores: warp-level matrix multiply-accumulate (PTX `mma.sync`, sm_80 and newer).
//!
//! A warp multiplies small tiles together: `D = A · B + C`. Each lane holds a *fragment* of every
//! tile, a few values at positions that the shape fixes (PTX ISA, "Matrix Fragments for mma").
//! A fragment is an ordinary per-lane value (`Copy`, in registers); `position`-style methods say
//! which rows and columns the calling lane holds, so a kernel can fill fragments from anywhere
//! (`from_fn`), load them from global memory through a [`MatrixRef`] (zeros outside the matrix),
//! or from shared memory with `ldmatrix` (16-bit elements and tf32), and store accumulators back.
//!
//! | shape | module | A × B | accumulate |
//! | --- | --- | --- | --- |
//! | 16 × 8 × 16 | [`m16n8k16`] | `f16` or `bf16` | `f32` ([`Acc16x8`]) |
//! | 16 × 8 × 8 | [`m16n8k8`] | tf32 (`f32` rounded to 10 mantissa bits, [`tf32_round`]) | `f32` ([`Acc16x8`]) |
//! | 8 × 8 × 4 | [`m8n8k4`] | `f64` | `f64` ([`Acc8x8`]) |
//! | 16 × 8 × 4, 8, 16 (sm_90) | [`m16n8k4_f64`], [`m16n8k8_f64`], [`m16n8k16_f64`] | `f64` | `f64` ([`Acc16x8F64`]) |
//! | 64 × 256 × 16, a warpgroup, sm_90a | [`wgmma`] | `bf16` | `f32` ([`wgmma::Acc64x256`]) |
//!
//! A warp's product of a `16 × k` tile of A with a `k × 8` tile of B (held as W = Bᵀ, as
//! `nn.Linear` holds its weights) loads a fragment of each per 16 columns of k
//! (`m16n8k16::A::load(&a, row0, k0)`, `m16n8k16::B::load_transposed(&w, k0, col0)`) and
//! accumulates `acc = m16n8k16::mma(&fa, &fb, acc)`; the `offload` crate's docs ("Tensor cores")
//! hold a whole kernel doing this, which runs as a doctest on the host backend.
//!
//! # The f64 shapes of sm_90
//! Hopper's `f64` tensor cores take three shapes besides `m8n8k4`, all 16 × 8 and `K` = 4, 8 or
//! 16 deep, with one fragment layout (`g = lane / 4`, `t = lane % 4`): A's element `i` (0..K/2)
//! at row `g + 8 * (i % 2)`, column `t + 4 * (i / 2)`; B's element `i` (0..K/4) at row
//! `k = t + 4 * i`, column `n = g`; C and D as [`Acc16x8F64`] (the layout of [`Acc16x8`]).
//! Each lane thus holds pairs of A values 4 columns apart, and B values 4 rows apart: a GEMM that
//! stores the columns `t` and `t + 4` of each 8 next to each other in shared memory loads both
//! with one 16-byte access (the order of the sum over `k` changes with such a relabelling, the
//! product does not). The `dgemm` example kernel does this.
//!
//! # Taking part
//! `mma` and the shared-memory loads are collective over the whole warp, as the crate's other
//! warp operations ([`crate::shuffle`] and friends), but stricter: all 32 lanes must exist (a
//! block size that is a multiple of 32) and call the same operation together, from code the
//! whole warp reaches; no lane may have returned. On the GPU breaking this is undefined in PTX
//! (in practice: wrong values or a hang); `mma` only reads and writes registers, so it stays safe.
//! On the host backend it fails the launch with a message naming the missing lane.
//!
//! # Numbers: the GPU against the host backend
//! The host backend computes each product-sum in order, `d = c; d = fma(a[k], b[k], d)` for `k`
//! ascending, rounding to nearest-even at every step (for the 16-bit types and tf32 every product
//! is exact in `f32`, so only the additions round).
//! - `f64` (`m8n8k4` and the sm_90 shapes): PTX specifies fused multiply-adds rounded to
//!   nearest-even; the GPU's results equal the host's bit for bit (checked on an H200 by the
//!   `tensor` tests).
//! - `f16`, `bf16`, tf32 with `f32` accumulation: PTX leaves the order and rounding of the
//!   accumulation unspecified (tensor cores align the products to the largest exponent and
//!   truncate). The documented bound, checked by the `tensor` tests on random tiles: for every
//!   element, `|d_gpu - d_host| <= 2·K · 2⁻²³ · (|c| + Σ_k |a_k·b_k|)` (`K` = 16 or 8), with
//!   normal (not subnormal) inputs. Each `mma` rounds once per element on the GPU, so long
//!   products stay at `f32` accuracy when the caller adds each `mma`'s result into its own `f32`
//!   sum (see the 3×TF32 SGEMM in the examples).
//!
//! # Architectures
//! Built for an NVIDIA target older than sm_80, a kernel that uses this module does not compile:
//! the error names the missing architecture. In AMD and SPIR-V images (which the device pass
//! builds from the same kernels module) an operation panics when it runs, so a launch of a
//! tensor-core kernel there is `Err(KernelFailed)` with that message while the module's other
//! kernels work. An image built for sm_80 or newer
//! does not load on an older GPU (the launch fails with `Error::NoImage`). The `f64` shapes of
//! sm_90 in an image for sm_80 to sm_89 panic when they run (`Error::KernelFailed` naming sm_90),
//! so a kernels module that holds a DGEMM still builds and runs its other kernels there.

use crate::warp::lane_id;

mod fragment;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod host;
mod ldmatrix;
mod m16n8_f64;
pub mod m16n8k16;
pub mod m16n8k8;
pub mod m8n8k4;
mod matrix;
#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod ptx;
pub mod wgmma;
#[cfg(all(
    target_arch = "nvptx64",
    target_feature = "sm_90a",
    not(feature = "spirv")
))]
mod wgmma_ptx;

pub use fragment::{Acc16x8, Acc16x8F64, Acc8x8, Half};
pub use m16n8_f64::{m16n8k16_f64, m16n8k4_f64, m16n8k8_f64};
pub use matrix::{MatrixMut, MatrixRef};

/// Whether this build's target has `mma.sync` for the shapes here (sm_80 and newer).
#[cfg(not(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
)))]
const SUPPORTED: bool = cfg!(any(
    all(target_arch = "nvptx64", target_feature = "sm_80"),
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
));

/// Refuses a tensor-core operation where there is none. Built as PTX for a GPU older than
/// sm_80 this is a compile error, raised where a kernel instantiates the operation (generic, so
/// that the constant is evaluated for used operations only: the crate itself still builds for
/// every target). In an AMD or SPIR-V image it is a panic when the operation runs, so the
/// module's other kernels still build and run there, and a launch of a tensor-core kernel fails
/// with this message (`Error::KernelFailed`).
#[inline(always)]
#[allow(clippy::extra_unused_type_parameters)]
pub(crate) fn require_tensor_cores<T>() {
    #[cfg(any(
        target_arch = "amdgpu",
        all(target_arch = "nvptx64", feature = "spirv")
    ))]
    panic!("offload::mma needs an NVIDIA GPU of sm_80 or newer: this image is for a GPU without mma.sync (AMD or SPIR-V)");
    #[cfg(not(any(
        target_arch = "amdgpu",
        all(target_arch = "nvptx64", feature = "spirv")
    )))]
    const {
        assert!(
            SUPPORTED,
            "offload::mma needs an NVIDIA GPU of sm_80 or newer: build for sm_80+ \
             (OFFLOAD_CUDA_ARCH or Kernels::cuda_arch)"
        )
    }
}

/// The calling lane's group (`lane / 4`) and its index in the group (`lane % 4`): the two
/// numbers every fragment layout is written in.
#[inline(always)]
fn group_and_thread() -> (usize, usize) {
    let lane = lane_id() as usize;
    (lane >> 2, lane & 3)
}

/// `x` rounded to tf32 (10 explicit mantissa bits, as the tensor cores read `.tf32` operands):
/// to nearest, ties away from zero, as PTX `cvt.rna.tf32.f32`, with the 13 low bits cleared.
/// Infinities stay; finite values that round past the largest tf32 become infinite; NaNs stay
/// NaNs. Integer operations on both backends, so the bits are the same everywhere.
#[inline(always)]
pub fn tf32_round(x: f32) -> f32 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0x7f80_0000 {
        // Infinity or NaN: clearing the low bits keeps an infinity; a NaN keeps a payload bit.
        let nan = if bits & 0x007f_ffff != 0 {
            0x0040_0000
        } else {
            0
        };
        return f32::from_bits((bits & 0xffff_e000) | nan);
    }
    f32::from_bits(bits.wrapping_add(0x1000) & 0xffff_e000)
}

/// `x` as a tf32 pair `(big, small)` with `big + small ≈ x` to about 22 bits: `big =
/// tf32_round(x)`, `small = tf32_round(x - big)` (the difference is exact). Three tf32 products,
/// `big·big' + big·small' + small·big'`, give `x·x'` to about `f32` accuracy ("3×TF32").
///
/// For finite `x` only (4 integer operations and a subtraction: it runs once per operand in
/// GEMM loops): a NaN gives a NaN part, an infinity gives `(±∞, NaN)`, so a product through the
/// split is NaN when an operand is not finite.
#[inline(always)]
pub fn tf32_split(x: f32) -> (f32, f32) {
    let round = |v: f32| f32::from_bits(v.to_bits().wrapping_add(0x1000) & 0xffff_e000);
    let big = round(x);
    (big, round(x - big))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_rounding_is_to_nearest_ties_away() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: away from zero.
        assert_eq!(tf32_round(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
        assert_eq!(tf32_round(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
        assert_eq!(tf32_round(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(tf32_round(1.0 + 3.0 * 2f32.powi(-12)), 1.0 + 2f32.powi(-10));
        assert_eq!(tf32_round(f32::MAX), f32::INFINITY);
        assert_eq!(tf32_round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(tf32_round(f32::from_bits(0x7f80_0001)).is_nan());
        assert_eq!(tf32_round(0.0).to_bits(), 0);
        for x in [0.1f32, -3.7e-5, 12345.678, 1e30] {
            let r = tf32_round(x);
            assert_eq!(r.to_bits() & 0x1fff, 0);
            assert!((r - x).abs() <= x.abs() * 2f32.powi(-11), "{x} -> {r}");
        }
    }

    #[test]
    fn tf32_split_recovers_about_22_bits() {
        for x in [0.1f32, -3.7e-5, 12345.678, 1.0 / 3.0, -7.25e12] {
            let (big, small) = tf32_split(x);
            assert_eq!(big.to_bits() & 0x1fff, 0);
            assert_eq!(small.to_bits() & 0x1fff, 0);
            assert_eq!(big, tf32_round(x));
            let err = ((big as f64 + small as f64) - x as f64).abs();
            assert!(
                err <= x.abs() as f64 * 2f64.powi(-21),
                "{x}: {big} + {small}"
            );
        }
        assert!(tf32_split(f32::NAN).1.is_nan());
        assert!(tf32_split(f32::INFINITY).1.is_nan());
    }
}
