//! `D (16×8, f32) = A (16×8) · B (8×8) + C (16×8, f32)` with tf32 operands
//! (PTX `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`).
//!
//! Operand fragments always hold tf32 values (`f32` with the 13 low mantissa bits clear): the
//! constructors round with [`tf32_round`], or split an `f32` into two tf32 parts
//! ([`A::split`], [`B::split`]) for the 3×TF32 product `big·big' + big·small' + small·big'`.

use super::fragment::Acc16x8;
use super::matrix::MatrixRef;
use super::{group_and_thread, ldmatrix, require_tensor_cores, tf32_round, tf32_split};
use crate::SharedSlice;

/// The calling lane's part of the 16 × 8 A operand: 4 tf32 values.
///
/// Element `i` (0..4) sits at row `lane / 4 + 8 * (i % 2)`, column `lane % 4 + 4 * (i / 2)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct A([f32; 4]);

/// The calling lane's part of the 8 × 8 B operand (8 rows `k`, 8 columns `n`): 2 tf32 values.
///
/// Element `i` (0..2) sits at row `k = lane % 4 + 4 * i`, column `n = lane / 4`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct B([f32; 2]);

impl A {
    /// Row and column, in the 16 × 8 tile, of this lane's element `i` (0..4).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (g + 8 * (i % 2), t + 4 * (i / 2))
    }

    /// The lane's `f32` values at [`position`](Self::position)s, rounded to tf32.
    #[inline(always)]
    pub fn from_array(values: [f32; 4]) -> Self {
        A(values.map(tf32_round))
    }

    /// The lane's `f32` values split into `(big, small)` fragments (see [`tf32_split`]).
    #[inline(always)]
    pub fn split(values: [f32; 4]) -> (Self, Self) {
        let parts = values.map(tf32_split);
        (A(parts.map(|p| p.0)), A(parts.map(|p| p.1)))
    }

    /// The fragment whose element at (row, column) is `tf32_round(f(row, column))`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f32) -> Self {
        Self::from_array(Self::gather(f))
    }

    /// The `f32` values `f(row, column)` at this lane's positions, in order.
    #[inline(always)]
    pub fn gather(f: impl Fn(usize, usize) -> f32) -> [f32; 4] {
        core::array::from_fn(|i| {
            let (r, c) = Self::position(i);
            f(r, c)
        })
    }

    /// The 16 × 8 tile at `(row0, col0)` of `m`, rounded to tf32 (zeros outside `m`).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f32>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
    }

    /// This lane's `f32` values of the tile, not rounded yet (pass them to
    /// [`from_array`](Self::from_array) or [`split`](Self::split)), from shared memory with one
    /// `ldmatrix.x4`: `row_chunk(row, half)` is the element offset of the 4 elements
    /// `(row, 4 * half ..= 4 * half + 3)`, `row` in 0..16 and `half` in 0..2. Collective.
    ///
    /// # Safety
    /// As for [`m16n8k16::A::load_shared`](super::m16n8k16::A::load_shared).
    ///
    /// # Panics
    /// If a chunk lies outside `tile` or does not start at a 16-byte boundary.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared_f32(
        tile: SharedSlice<f32>,
        row_chunk: impl Fn(usize, usize) -> usize,
    ) -> [f32; 4] {
        let lane = crate::lane_id() as usize;
        // 8×4 blocks of 32-bit values, read as 8×8 blocks of 16-bit halves: lane l receives
        // word l % 4 of row l / 4. Matrices 0-3: rows 0-7 and 8-15 of columns 0-3, then 4-7.
        let offset = row_chunk(lane % 16, lane / 16);
        // SAFETY: the caller's contract.
        let r = unsafe { ldmatrix::x4::<f32, false>(tile, offset) };
        r.map(f32::from_bits)
    }

    /// This lane's values, in order.
    #[inline(always)]
    pub fn to_array(&self) -> [f32; 4] {
        self.0
    }
}

impl B {
    /// Row (`k`) and column (`n`), in the 8 × 8 tile, of this lane's element `i` (0..2).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (t + 4 * i, g)
    }

    /// The lane's `f32` values at [`position`](Self::position)s, rounded to tf32.
    #[inline(always)]
    pub fn from_array(values: [f32; 2]) -> Self {
        B(values.map(tf32_round))
    }

    /// The lane's `f32` values split into `(big, small)` fragments (see [`tf32_split`]).
    #[inline(always)]
    pub fn split(values: [f32; 2]) -> (Self, Self) {
        let parts = values.map(tf32_split);
        (B(parts.map(|p| p.0)), B(parts.map(|p| p.1)))
    }

    /// The fragment whose element at (k, n) is `tf32_round(f(k, n))`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f32) -> Self {
        Self::from_array(Self::gather(f))
    }

    /// The `f32` values `f(k, n)` at this lane's positions, in order.
    #[inline(always)]
    pub fn gather(f: impl Fn(usize, usize) -> f32) -> [f32; 2] {
        core::array::from_fn(|i| {
            let (k, n) = Self::position(i);
            f(k, n)
        })
    }

    /// The 8 × 8 tile at `(k0, n0)` of a row-major `K × N` matrix, rounded to tf32 (zeros outside).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f32>, k0: usize, n0: usize) -> Self {
        Self::from_fn(|k, n| m.get_or(k0 + k, n0 + n, 0.0))
    }

    /// This lane's values, in order.
    #[inline(always)]
    pub fn to_array(&self) -> [f32; 2] {
        self.0
    }
}

/// `a · b + c` over the warp. Collective: all 32 lanes call it together.
#[inline(always)]
pub fn mma(a: &A, b: &B, c: Acc16x8) -> Acc16x8 {
    require_tensor_cores::<A>();
    arch::mma(a, b, c)
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::super::ptx;
    use super::{Acc16x8, A, B};

    #[inline(always)]
    pub(super) fn mma(a: &A, b: &B, c: Acc16x8) -> Acc16x8 {
        Acc16x8(ptx::mma_m16n8k8_tf32(
            a.0.map(f32::to_bits),
            b.0.map(f32::to_bits),
            c.0,
        ))
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
))]
mod arch {
    use super::{Acc16x8, A, B};

    #[inline(always)]
    pub(super) fn mma(_: &A, _: &B, _: Acc16x8) -> Acc16x8 {
        unreachable!("require_tensor_cores panicked before")
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::super::host;
    use super::{Acc16x8, A, B};

    pub(super) fn mma(a: &A, b: &B, c: Acc16x8) -> Acc16x8 {
        let words = [a.0[0], a.0[1], a.0[2], a.0[3], b.0[0], b.0[1]];
        let lanes = host::warp_gather(words.map(|v| v.to_bits() as u64), "m16n8k8::mma");
        let (mut ta, mut tb) = ([[0.0f32; 8]; 16], [[0.0f32; 8]; 8]);
        for (lane, w) in lanes.iter().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4 {
                ta[g + 8 * (i % 2)][t + 4 * (i / 2)] = f32::from_bits(w[i] as u32);
            }
            for i in 0..2 {
                tb[t + 4 * i][g] = f32::from_bits(w[4 + i] as u32);
            }
        }
        let mut d = c;
        for (i, d) in d.0.iter_mut().enumerate() {
            let (r, col) = Acc16x8::position(i);
            *d = host::dot_f32(*d, (0..8).map(|k| (ta[r][k], tb[k][col])));
        }
        d
    }
}
