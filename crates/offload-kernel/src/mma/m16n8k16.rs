//! `D (16×8, f32) = A (16×16) · B (16×8) + C (16×8, f32)` with `f16` or `bf16` operands
//! (PTX `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`).

use super::fragment::{pack, Acc16x8, Half};
use super::matrix::MatrixRef;
use super::{group_and_thread, ldmatrix, require_tensor_cores};
use crate::SharedSlice;
use core::marker::PhantomData;

/// The calling lane's part of the 16 × 16 A operand: 8 elements in 4 registers.
///
/// Element `i` (0..8) sits at row `lane / 4 + 8 * ((i / 2) % 2)`, column
/// `2 * (lane % 4) + i % 2 + 8 * (i / 4)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct A<T> {
    regs: [u32; 4],
    _element: PhantomData<T>,
}

/// The calling lane's part of the 16 × 8 B operand (16 rows `k`, 8 columns `n`): 4 elements in
/// 2 registers.
///
/// Element `i` (0..4) sits at row `k = 2 * (lane % 4) + i % 2 + 8 * (i / 2)`, column
/// `n = lane / 4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct B<T> {
    regs: [u32; 2],
    _element: PhantomData<T>,
}

impl<T: Half> A<T> {
    /// Row and column, in the 16 × 16 tile, of this lane's element `i` (0..8).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (g + 8 * ((i / 2) % 2), 2 * t + (i & 1) + 8 * (i / 4))
    }

    /// The fragment whose element at (row, column) is `f(row, column)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> T) -> Self {
        let e = |i| {
            let (r, c) = Self::position(i);
            f(r, c)
        };
        Self::from_regs(core::array::from_fn(|j| pack(e(2 * j), e(2 * j + 1))))
    }

    /// The 16 × 16 tile at `(row0, col0)` of `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, T>, row0: usize, col0: usize) -> Self {
        Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, T::ZERO))
    }

    /// Loads the tile from shared memory with one `ldmatrix.x4`: `row_chunk(row, half)` is the
    /// element offset in `tile` of the 8 elements `(row, 8 * half ..= 8 * half + 7)`, `row` in
    /// 0..16 and `half` in 0..2 (each lane asks for one; any layout whose 16-byte chunks hold 8
    /// consecutive columns works, swizzled ones too). Collective: the whole warp calls it.
    ///
    /// # Safety
    /// The 256 elements were written by the block before its last barrier, and no thread writes
    /// them until the next one (the rule of [`SharedSlice::read`]); all 32 lanes of the warp call
    /// this together (see [Taking part](super#taking-part)).
    ///
    /// # Panics
    /// If a chunk lies outside `tile` or does not start at a 16-byte boundary.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared(
        tile: SharedSlice<T>,
        row_chunk: impl Fn(usize, usize) -> usize,
    ) -> Self {
        let lane = crate::lane_id() as usize;
        // Lanes 0-7 address rows 0-7 of the left half (register 0), 8-15 rows 8-15 (register 1),
        // 16-31 the same rows of the right half (registers 2 and 3).
        let offset = row_chunk(lane % 16, lane / 16);
        // SAFETY: the caller's contract.
        Self::from_regs(unsafe { ldmatrix::x4::<T, false>(tile, offset) })
    }

    /// [`A::load_shared`] without its bounds and alignment checks on the GPU, for inner loops
    /// whose tile layout was checked once (the host backend still checks). Collective.
    ///
    /// # Safety
    /// As for [`A::load_shared`]; moreover every chunk lies inside `tile` and starts at a
    /// 16-byte boundary.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared_unchecked(
        tile: SharedSlice<T>,
        row_chunk: impl Fn(usize, usize) -> usize,
    ) -> Self {
        let lane = crate::lane_id() as usize;
        let offset = row_chunk(lane % 16, lane / 16);
        // SAFETY: the caller's contract.
        Self::from_regs(unsafe { ldmatrix::x4_unchecked::<T, false>(tile, offset) })
    }

    /// Four registers holding elements `(2j, 2j + 1)` in register `j`, low half first.
    #[inline(always)]
    pub const fn from_regs(regs: [u32; 4]) -> Self {
        A {
            regs,
            _element: PhantomData,
        }
    }

    #[inline(always)]
    pub fn regs(&self) -> [u32; 4] {
        self.regs
    }

    /// This lane's elements, in order.
    #[inline(always)]
    pub fn to_array(&self) -> [T; 8] {
        core::array::from_fn(|i| T::from_bits((self.regs[i / 2] >> (16 * (i % 2))) as u16))
    }
}

impl<T: Half> B<T> {
    /// Row (`k`) and column (`n`), in the 16 × 8 tile, of this lane's element `i` (0..4).
    #[inline(always)]
    pub fn position(i: usize) -> (usize, usize) {
        let (g, t) = group_and_thread();
        (2 * t + (i & 1) + 8 * (i / 2), g)
    }

    /// The fragment whose element at (k, n) is `f(k, n)`.
    #[inline(always)]
    pub fn from_fn(f: impl Fn(usize, usize) -> T) -> Self {
        let e = |i| {
            let (k, n) = Self::position(i);
            f(k, n)
        };
        Self::from_regs([pack(e(0), e(1)), pack(e(2), e(3))])
    }

    /// The 16 × 8 tile at `(k0, n0)` of a row-major `K × N` matrix `m` (zeros outside it).
    #[inline(always)]
    pub fn load(m: &MatrixRef<'_, T>, k0: usize, n0: usize) -> Self {
        Self::from_fn(|k, n| m.get_or(k0 + k, n0 + n, T::ZERO))
    }

    /// The 16 × 8 tile at `(k0, n0)` of B when `m` holds Bᵀ (`N × K`, row-major: a weight
    /// matrix `W` for `A · Wᵀ`), zeros outside it.
    #[inline(always)]
    pub fn load_transposed(m: &MatrixRef<'_, T>, k0: usize, n0: usize) -> Self {
        Self::from_fn(|k, n| m.get_or(n0 + n, k0 + k, T::ZERO))
    }

    /// Two adjacent tiles (columns `n` 0..8 and 8..16) from shared memory holding Bᵀ, with one
    /// `ldmatrix.x4`: `column_chunk(n, half)` is the element offset of the 8 elements
    /// `k = 8 * half ..= 8 * half + 7` of column `n` (`n` in 0..16, `half` in 0..2), stored
    /// consecutively. Collective.
    ///
    /// # Safety
    /// As for [`A::load_shared`].
    ///
    /// # Panics
    /// As for [`A::load_shared`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared_transposed_pair(
        tile: SharedSlice<T>,
        column_chunk: impl Fn(usize, usize) -> usize,
    ) -> [Self; 2] {
        let lane = crate::lane_id() as usize;
        // Matrices 0 and 1: columns 0-7, k halves 0 and 1 (registers 0 and 1 of the first
        // tile); matrices 2 and 3: columns 8-15.
        let offset = column_chunk(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
        // SAFETY: the caller's contract.
        let r = unsafe { ldmatrix::x4::<T, false>(tile, offset) };
        [Self::from_regs([r[0], r[1]]), Self::from_regs([r[2], r[3]])]
    }

    /// [`B::load_shared_transposed_pair`] without its bounds and alignment checks on the GPU,
    /// as [`A::load_shared_unchecked`]. Collective.
    ///
    /// # Safety
    /// As for [`B::load_shared_transposed_pair`]; moreover every chunk lies inside `tile` and
    /// starts at a 16-byte boundary.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared_transposed_pair_unchecked(
        tile: SharedSlice<T>,
        column_chunk: impl Fn(usize, usize) -> usize,
    ) -> [Self; 2] {
        let lane = crate::lane_id() as usize;
        let offset = column_chunk(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
        // SAFETY: the caller's contract.
        let r = unsafe { ldmatrix::x4_unchecked::<T, false>(tile, offset) };
        [Self::from_regs([r[0], r[1]]), Self::from_regs([r[2], r[3]])]
    }

    /// Two adjacent tiles (columns `n` 0..8 and 8..16) from shared memory holding B row-major,
    /// with one `ldmatrix.x4.trans`: `row_chunk(k, half)` is the element offset of the 8
    /// elements `n = 8 * half ..= 8 * half + 7` of row `k` (`k` in 0..16, `half` in 0..2),
    /// stored consecutively. Collective.
    ///
    /// # Safety
    /// As for [`A::load_shared`].
    ///
    /// # Panics
    /// As for [`A::load_shared`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_shared_pair(
        tile: SharedSlice<T>,
        row_chunk: impl Fn(usize, usize) -> usize,
    ) -> [Self; 2] {
        let lane = crate::lane_id() as usize;
        // Transposed 8×8 blocks: matrices 0 and 1 are k rows 0-7 and 8-15 of columns 0-7,
        // matrices 2 and 3 the same rows of columns 8-15.
        let offset = row_chunk(lane % 16, lane / 16);
        // SAFETY: the caller's contract.
        let r = unsafe { ldmatrix::x4::<T, true>(tile, offset) };
        [Self::from_regs([r[0], r[1]]), Self::from_regs([r[2], r[3]])]
    }

    /// Two registers holding elements `(2j, 2j + 1)` in register `j`, low half first.
    #[inline(always)]
    pub const fn from_regs(regs: [u32; 2]) -> Self {
        B {
            regs,
            _element: PhantomData,
        }
    }

    #[inline(always)]
    pub fn regs(&self) -> [u32; 2] {
        self.regs
    }

    /// This lane's elements, in order.
    #[inline(always)]
    pub fn to_array(&self) -> [T; 4] {
        core::array::from_fn(|i| T::from_bits((self.regs[i / 2] >> (16 * (i % 2))) as u16))
    }
}

/// `a · b + c` over the warp. Collective: all 32 lanes call it together (see
/// [Taking part](super#taking-part)); each gets its part of the result.
#[inline(always)]
pub fn mma<T: Half>(a: &A<T>, b: &B<T>, c: Acc16x8) -> Acc16x8 {
    require_tensor_cores::<T>();
    arch::mma(a, b, c)
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::super::ptx;
    use super::{Acc16x8, Half, A, B};

    #[inline(always)]
    pub(super) fn mma<T: Half>(a: &A<T>, b: &B<T>, c: Acc16x8) -> Acc16x8 {
        Acc16x8(if T::BF16 {
            ptx::mma_m16n8k16_bf16(a.regs, b.regs, c.0)
        } else {
            ptx::mma_m16n8k16_f16(a.regs, b.regs, c.0)
        })
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
))]
mod arch {
    use super::{Acc16x8, Half, A, B};

    #[inline(always)]
    pub(super) fn mma<T: Half>(_: &A<T>, _: &B<T>, _: Acc16x8) -> Acc16x8 {
        unreachable!("require_tensor_cores panicked before")
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::super::host;
    use super::{Acc16x8, Half, A, B};
    use half::{bf16, f16};

    fn widen<T: Half>(bits: u16) -> f32 {
        if T::BF16 {
            bf16::from_bits(bits).to_f32()
        } else {
            f16::from_bits(bits).to_f32()
        }
    }

    pub(super) fn mma<T: Half>(a: &A<T>, b: &B<T>, c: Acc16x8) -> Acc16x8 {
        let words = [
            a.regs[0], a.regs[1], a.regs[2], a.regs[3], b.regs[0], b.regs[1],
        ];
        let lanes = host::warp_gather(words.map(u64::from), "m16n8k16::mma");
        // The whole tiles, from every lane's registers.
        let (mut ta, mut tb) = ([[0.0f32; 16]; 16], [[0.0f32; 8]; 16]);
        for (lane, w) in lanes.iter().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..8 {
                let bits = (w[i / 2] >> (16 * (i % 2))) as u16;
                ta[g + 8 * ((i / 2) % 2)][2 * t + (i & 1) + 8 * (i / 4)] = widen::<T>(bits);
            }
            for i in 0..4 {
                let bits = (w[4 + i / 2] >> (16 * (i % 2))) as u16;
                tb[2 * t + (i & 1) + 8 * (i / 2)][g] = widen::<T>(bits);
            }
        }
        let mut d = c;
        for (i, d) in d.0.iter_mut().enumerate() {
            let (r, col) = Acc16x8::position(i);
            *d = host::dot_f32(*d, (0..16).map(|k| (ta[r][k], tb[k][col])));
        }
        d
    }
}
