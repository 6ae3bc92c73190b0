//! `D (8×8) = A (8×4) · B (4×8) + C (8×8)` in `f64` (PTX
//! `mma.sync.aligned.m8n8k4.row.col.rn.f64.f64.f64.f64`): fused multiply-adds rounded to
//! nearest-even, the same bits on the GPU and the host backend.

use super::fragment::Acc8x8;
use super::matrix::MatrixRef;
use super::{group_and_thread, require_tensor_cores};

/// The calling lane's element of the 8 × 4 A operand: row `lane / 4`, column `lane % 4`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct A(pub f64);

/// The calling lane's element of the 4 × 8 B operand: row `k = lane % 4`, column `n = lane / 4`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct B(pub f64);

impl A {
    /// Row and column, in the 8 × 4 tile, of this lane's element.
    #[inline(always)]
    pub fn position() -> (usize, usize) {
        group_and_thread()
    }

    /// The fragment whose element at (row, column) is `f(row, column)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
        let (r, c) = Self::position();
        A(f(r, c))
    }

    /// The 8 × 4 tile at `(row0, col0)` of `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f64>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
    }
}

impl B {
    /// Row (`k`) and column (`n`), in the 4 × 8 tile, of this lane's element.
    #[inline(always)]
    pub fn position() -> (usize, usize) {
        let (g, t) = group_and_thread();
        (t, g)
    }

    /// The fragment whose element at (k, n) is `f(k, n)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
        let (k, n) = Self::position();
        B(f(k, n))
    }

    /// The 4 × 8 tile at `(k0, n0)` of a row-major `K × N` matrix (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f64>, k0: usize, n0: usize) -> Self {
        Self::from_fn(|k, n| m.get_or(k0 + k, n0 + n, 0.0))
    }
}

/// `a · b + c` over the warp, in `f64`. Collective: all 32 lanes call it together.
#[inline(always)]
pub fn mma(a: &A, b: &B, c: Acc8x8) -> Acc8x8 {
    require_tensor_cores::<A>();
    arch::mma(a, b, c)
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::super::ptx;
    use super::{Acc8x8, A, B};

    #[inline(always)]
    pub(super) fn mma(a: &A, b: &B, c: Acc8x8) -> Acc8x8 {
        Acc8x8(ptx::mma_m8n8k4_f64(a.0, b.0, c.0))
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
))]
mod arch {
    use super::{Acc8x8, A, B};

    #[inline(always)]
    pub(super) fn mma(_: &A, _: &B, _: Acc8x8) -> Acc8x8 {
        unreachable!("require_tensor_cores panicked before")
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::super::host;
    use super::{Acc8x8, A, B};

    pub(super) fn mma(a: &A, b: &B, c: Acc8x8) -> Acc8x8 {
        let lanes = host::warp_gather([a.0.to_bits(), b.0.to_bits()], "m8n8k4::mma");
        let (mut ta, mut tb) = ([[0.0f64; 4]; 8], [[0.0f64; 8]; 4]);
        for (lane, w) in lanes.iter().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            ta[g][t] = f64::from_bits(w[0]);
            tb[t][g] = f64::from_bits(w[1]);
        }
        let mut d = c;
        for (i, d) in d.0.iter_mut().enumerate() {
            let (r, col) = Acc8x8::position(i);
            *d = (0..4).fold(*d, |acc, k| ta[r][k].mul_add(tb[k][col], acc));
        }
        d
    }
}
