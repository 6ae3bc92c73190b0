//! `+` and `×` for generic kernels, with the GPU's conversion instructions for `f16` and `bf16`.
//!
//! The `half` crate computes `f16` and `bf16` arithmetic in f32: widen both operands, operate,
//! round the result back to nearest-even. It has no nvptx path, so on a GPU its conversions are
//! portable integer code that costs more than the memory traffic of an element-wise kernel. Here
//! the same steps use the hardware on nvptx (`cvt.f32.f16`, `cvt.rn.f16.f32`, `cvt.rn.bf16.f32`;
//! widening bf16 is a shift): widening is exact and narrowing rounds to nearest-even on both
//! sides, so the bits are `half`'s (a NaN stays a NaN; its payload may differ, as for every PTX
//! float operation). amdgcn uses LLVM's `fpext`/`fptrunc`, the same conversions (defined by
//! offload-build's AMD link step). On the host, and on SPIR-V (no conversion instruction for bf16
//! there), these are `half`'s own conversions.

use half::{bf16, f16};

/// A number type generic kernels add and multiply through [`add`] and [`mul`].
pub trait Arith: Copy {
    /// `self + other`, rounded once to the type (through `f32` for `f16` and `bf16`).
    fn add(self, other: Self) -> Self;
    /// `self * other`, rounded once to the type (through `f32` for `f16` and `bf16`).
    fn mul(self, other: Self) -> Self;
}

/// `a + b`, as `a + b` computes it on the host.
#[inline(always)]
pub fn add<T: Arith>(a: T, b: T) -> T {
    a.add(b)
}

/// `a * b`, as `a * b` computes it on the host.
#[inline(always)]
pub fn mul<T: Arith>(a: T, b: T) -> T {
    a.mul(b)
}

macro_rules! native {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
        }
    )*};
}
native!(f32, f64);

/// `x` rounded to the nearest `bf16` (ties to even), the bits `bf16::from_f32` gives: one
/// conversion instruction on NVIDIA and AMD GPUs, where `half`'s integer code costs several.
#[inline(always)]
pub fn to_bf16(x: f32) -> bf16 {
    bf16::narrow(x)
}

/// Half-precision types computed through f32.
trait ThroughF32: Copy {
    fn widen(self) -> f32;
    fn narrow(x: f32) -> Self;
}

macro_rules! through_f32 {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                <$t>::narrow(self.widen() + other.widen())
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                <$t>::narrow(self.widen() * other.widen())
            }
        }
    )*};
}
through_f32!(f16, bf16);

/// Off NVIDIA and AMD GPUs, `half`'s own conversions.
macro_rules! through_f32_by_half {
    ($($t:ty),*) => {$(
        #[cfg(not(any(
            all(target_arch = "nvptx64", not(feature = "spirv")),
            target_arch = "amdgpu"
        )))]
        impl ThroughF32 for $t {
            #[inline(always)]
            fn widen(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn narrow(x: f32) -> Self {
                <$t>::from_f32(x)
            }
        }
    )*};
}
through_f32_by_half!(f16, bf16);

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
impl ThroughF32 for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        let wide: f32;
        // SAFETY: a conversion between registers, defined for every input; touches no memory.
        unsafe {
            core::arch::asm!("cvt.f32.f16 {w}, {h};", w = out(reg32) wide, h = in(reg16) self.to_bits(),
                options(pure, nomem, nostack))
        };
        wide
    }
    #[inline(always)]
    fn narrow(x: f32) -> Self {
        let bits: u16;
        // SAFETY: as above (round to nearest-even; out of range gives ±infinity, as in `half`).
        unsafe {
            core::arch::asm!("cvt.rn.f16.f32 {h}, {x};", h = out(reg16) bits, x = in(reg32) x,
                options(pure, nomem, nostack))
        };
        f16::from_bits(bits)
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
impl ThroughF32 for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        // bf16 is the upper half of an f32.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn narrow(x: f32) -> Self {
        let bits: u16;
        // SAFETY: a conversion between registers (sm_80 and later), defined for every input.
        unsafe {
            core::arch::asm!("cvt.rn.bf16.f32 {h}, {x};", h = out(reg16) bits, x = in(reg32) x,
                options(pure, nomem, nostack))
        };
        bf16::from_bits(bits)
    }
}

#[cfg(target_arch = "amdgpu")]
impl ThroughF32 for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        // SAFETY: a conversion defined for every input, touching no memory.
        unsafe { crate::amdgpu::__offload_amdgpu_f16_to_f32(self.to_bits()) }
    }
    #[inline(always)]
    fn narrow(x: f32) -> Self {
        // SAFETY: as above.
        f16::from_bits(unsafe { crate::amdgpu::__offload_amdgpu_f32_to_f16(x) })
    }
}

#[cfg(target_arch = "amdgpu")]
impl ThroughF32 for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        // bf16 is the upper half of an f32.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn narrow(x: f32) -> Self {
        // SAFETY: a conversion defined for every input, touching no memory.
        bf16::from_bits(unsafe { crate::amdgpu::__offload_amdgpu_f32_to_bf16(x) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same bits, or both NaN (Rust leaves NaN payloads unspecified; Miri varies them).
    fn same<T: Copy>(got: T, want: T, bits: fn(T) -> u16, is_nan: fn(T) -> bool) -> bool {
        bits(got) == bits(want) || (is_nan(got) && is_nan(want))
    }

    /// Every f16 and bf16 value against a spread of others: `half`'s operators' results.
    #[test]
    fn half_arith_equals_the_half_crate() {
        let others = [
            0x0000u16, 0x8001, 0x3c00, 0x3555, 0x7bff, 0xc123, 0x0400, 0x7c00,
        ];
        // Every value natively; a spread under Miri, which is slow.
        let step = if cfg!(miri) { 97 } else { 1 };
        for bits in (0..=u16::MAX).step_by(step) {
            for &o in &others {
                let (a, b) = (f16::from_bits(bits), f16::from_bits(o));
                assert!(
                    same(add(a, b), a + b, f16::to_bits, f16::is_nan),
                    "{a} + {b}"
                );
                assert!(
                    same(mul(a, b), a * b, f16::to_bits, f16::is_nan),
                    "{a} * {b}"
                );
                let (a, b) = (bf16::from_bits(bits), bf16::from_bits(o));
                assert!(
                    same(add(a, b), a + b, bf16::to_bits, bf16::is_nan),
                    "{a} + {b}"
                );
                assert!(
                    same(mul(a, b), a * b, bf16::to_bits, bf16::is_nan),
                    "{a} * {b}"
                );
            }
        }
        assert_eq!(add(1.5f32, 2.25), 3.75);
        assert_eq!(mul(1.5f64, -2.0), -3.0);
    }
}
