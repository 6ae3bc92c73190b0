//! What the fragment types of every shape share: the 16-bit element types and the accumulators.

use super::group_and_thread;
use super::matrix::{MatrixMut, MatrixRef};
use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
}

/// A 16-bit float the tensor cores multiply: `f16` or `bf16`. Two of them share one 32-bit
/// register of a fragment, the one with the lower index in the low half.
pub trait Half: Copy + sealed::Sealed {
    /// `bf16` (else `f16`): picks the PTX instruction.
    #[doc(hidden)]
    const BF16: bool;
    #[doc(hidden)]
    fn bits(self) -> u16;
    #[doc(hidden)]
    fn from_bits(bits: u16) -> Self;
    /// Zero, for the elements of a fragment outside a matrix.
    #[doc(hidden)]
    const ZERO: Self;
}

impl sealed::Sealed for f16 {}
impl Half for f16 {
    const BF16: bool = false;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        f16::from_bits(bits)
    }
    const ZERO: Self = f16::ZERO;
}

impl sealed::Sealed for bf16 {}
impl Half for bf16 {
    const BF16: bool = true;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        bf16::from_bits(bits)
    }
    const ZERO: Self = bf16::ZERO;
}

/// Two 16-bit values in one register, `lo` in the low half.
#[inline(always)]
pub(super) fn pack<T: Half>(lo: T, hi: T) -> u32 {
    lo.bits() as u32 | (hi.bits() as u32) << 16
}

/// The calling lane's part of a 16 × 8 `f32` tile: the C and D operands of
/// [`m16n8k16::mma`](super::m16n8k16::mma) and [`m16n8k8::mma`](super::m16n8k8::mma).
///
/// Element `i` (0..4) sits at row `lane / 4 + 8 * (i / 2)`, column `2 * (lane % 4) + i % 2`:
/// each lane holds two horizontally adjacent pairs, eight rows apart.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Acc16x8(pub [f32; 4]);

impl Acc16x8 {
    /// All zeros.
    pub const ZERO: Acc16x8 = Acc16x8([0.0; 4]);

    /// Row and column, in the 16 × 8 tile, of this lane's element `i` (0..4).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (g + 8 * (i / 2), 2 * t + (i & 1))
    }

    /// The fragment whose element at (row, column) is `f(row, column)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f32) -> Self {
        Acc16x8(core::array::from_fn(|i| {
            let (r, c) = Self::position(i);
            f(r, c)
        }))
    }

    /// The tile at `(row0, col0)` of `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f32>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
    }

    /// Calls `f(row, column, value)` for this lane's elements.
    #[inline(always)]
    pub fn for_each(&self, mut f: impl FnMut(usize, usize, f32)) {
        for (i, v) in self.0.iter().enumerate() {
            let (r, c) = Self::position(i);
            f(r, c, *v);
        }
    }

    /// Element-wise `self + other`, in `f32`.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, other: Acc16x8) -> Acc16x8 {
        Acc16x8(core::array::from_fn(|i| self.0[i] + other.0[i]))
    }

    /// Element-wise `f(value)`.
    #[inline(always)]
    pub fn map(self, f: impl Fn(f32) -> f32) -> Acc16x8 {
        Acc16x8(self.0.map(f))
    }

    /// Stores the tile at `(row0, col0)` of `out`, each element converted by `convert`; elements
    /// outside `out` are skipped.
    ///
    /// # Safety
    /// No other thread of the launch reads or writes these elements of `out` during the launch
    /// (as for [`ThreadSlice::at`](crate::ThreadSlice::at)).
    #[inline(always)]
    pub unsafe fn store<T>(
        &self,
        out: &mut MatrixMut<'_, '_, T>,
        row0: usize,
        col0: usize,
        convert: impl Fn(f32) -> T,
    ) {
        self.for_each(|r, c, v| {
            // SAFETY: the caller's contract covers this element.
            unsafe { out.set(row0 + r, col0 + c, convert(v)) }
        });
    }
}

/// The calling lane's part of a 16 × 8 `f64` tile: the C and D operands of the `f64` shapes of
/// sm_90 ([`m16n8k4_f64`](super::m16n8k4_f64), [`m16n8k8_f64`](super::m16n8k8_f64),
/// [`m16n8k16_f64`](super::m16n8k16_f64)).
///
/// Element `i` (0..4) sits where it sits in [`Acc16x8`]: row `lane / 4 + 8 * (i / 2)`, column
/// `2 * (lane % 4) + i % 2`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Acc16x8F64(pub [f64; 4]);

impl Acc16x8F64 {
    /// All zeros.
    pub const ZERO: Acc16x8F64 = Acc16x8F64([0.0; 4]);

    /// Row and column, in the 16 × 8 tile, of this lane's element `i` (0..4).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        Acc16x8::position(i)
    }

    /// The fragment whose element at (row, column) is `f(row, column)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
        Acc16x8F64(core::array::from_fn(|i| {
            let (r, c) = Self::position(i);
            f(r, c)
        }))
    }

    /// The tile at `(row0, col0)` of `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f64>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
    }

    /// Stores the tile at `(row0, col0)` of `out`, two adjacent elements per access; elements
    /// outside `out` are skipped.
    ///
    /// # Safety
    /// As for [`Acc16x8::store`].
    #[inline(always)]
    pub unsafe fn store(&self, out: &mut MatrixMut<'_, '_, f64>, row0: usize, col0: usize) {
        for half in 0..2 {
            let (r, c) = Self::position(2 * half);
            // SAFETY: the caller's contract covers both elements.
            unsafe { out.set_pair(row0 + r, col0 + c, self.0[2 * half], self.0[2 * half + 1]) }
        }
    }
}

/// The calling lane's part of an 8 × 8 `f64` tile: the C and D operands of
/// [`m8n8k4::mma`](super::m8n8k4::mma).
///
/// Element `i` (0..2) sits at row `lane / 4`, column `2 * (lane % 4) + i`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Acc8x8(pub [f64; 2]);

impl Acc8x8 {
    /// All zeros.
    pub const ZERO: Acc8x8 = Acc8x8([0.0; 2]);

    /// Row and column, in the 8 × 8 tile, of this lane's element `i` (0..2).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (g, 2 * t + i)
    }

    /// The fragment whose element at (row, column) is `f(row, column)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
        Acc8x8(core::array::from_fn(|i| {
            let (r, c) = Self::position(i);
            f(r, c)
        }))
    }

    /// The tile at `(row0, col0)` of `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, f64>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
    }

    /// Calls `f(row, column, value)` for this lane's elements.
    #[inline(always)]
    pub fn for_each(&self, mut f: impl FnMut(usize, usize, f64)) {
        for (i, v) in self.0.iter().enumerate() {
            let (r, c) = Self::position(i);
            f(r, c, *v);
        }
    }

    /// Stores the tile at `(row0, col0)` of `out`; elements outside `out` are skipped.
    ///
    /// # Safety
    /// As for [`Acc16x8::store`].
    #[inline(always)]
    pub unsafe fn store(&self, out: &mut MatrixMut<'_, '_, f64>, row0: usize, col0: usize) {
        self.for_each(|r, c, v| {
            // SAFETY: the caller's contract covers this element.
            unsafe { out.set(row0 + r, col0 + c, v) }
        });
    }
}
