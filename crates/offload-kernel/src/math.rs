//! Floating-point math for kernels, giving the same bits on the GPU and on the host backend.
//!
//! `f32::sqrt`, `exp`, `sin`… are `std` methods, which kernels (built on `core`) cannot call.
//! These functions stand in for them. Correctly rounded operations (`sqrt`, `mul_add`, `abs`)
//! use the hardware on every side (PTX `sqrt.rn`, `fma.rn`; LLVM's correctly rounded `sqrt` and
//! `fma` on amdgcn; the host's IEEE instructions).
//! Transcendental functions run the same code on both sides, the `libm` crate (a port of musl's
//! libm; errors under 1 ulp for `exp`, `ln`, `sin`, `cos`, `tanh`, a few ulp for `pow` near
//! overflow), so a kernel's results do not depend on the backend.

pub use crate::arith::{add, mul, Arith};

/// A float type kernels compute with: `f32` or `f64`. Call these as `math::exp(x)` (below), not
/// as methods: on the host a method call `x.exp()` would pick `std`'s own, whose bits can differ.
pub trait Real: Copy {
    /// Square root, correctly rounded.
    fn sqrt(self) -> Self;
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Sine (radians).
    fn sin(self) -> Self;
    /// Cosine (radians).
    fn cos(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `self^exponent`.
    fn powf(self, exponent: Self) -> Self;
}

macro_rules! real {
    ($t:ty, $sqrt:ident, $fma:ident, $exp:ident, $ln:ident, $sin:ident, $cos:ident, $tanh:ident, $pow:ident) => {
        impl Real for $t {
            #[inline(always)]
            fn sqrt(self) -> Self {
                #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
                {
                    // SAFETY: sqrt is defined for every input (NaN for negatives). (A safe
                    // intrinsic in newer rustc versions, hence the allow.)
                    #[allow(unused_unsafe)]
                    unsafe {
                        core::intrinsics::$sqrt(self)
                    }
                }
                #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
                {
                    <$t>::sqrt(self)
                }
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
                {
                    // SAFETY: fma is defined for every input. (Safe in newer rustc versions.)
                    #[allow(unused_unsafe)]
                    unsafe {
                        core::intrinsics::$fma(self, a, b)
                    }
                }
                #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
                {
                    <$t>::mul_add(self, a, b)
                }
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::from_bits(self.to_bits() & !(-0.0 as $t).to_bits())
            }
            #[inline(always)]
            fn exp(self) -> Self {
                libm::$exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                libm::$ln(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                libm::$sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                libm::$cos(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                libm::$tanh(self)
            }
            #[inline(always)]
            fn powf(self, exponent: Self) -> Self {
                libm::$pow(self, exponent)
            }
        }
    };
}

real!(f32, sqrtf32, fmaf32, expf, logf, sinf, cosf, tanhf, powf);
real!(f64, sqrtf64, fmaf64, exp, log, sin, cos, tanh, pow);

macro_rules! free_functions {
    ($($name:ident($($arg:ident),*)),* $(,)?) => {
        $(
            #[doc = concat!("[`Real::", stringify!($name), "`], the same bits on every backend.")]
            #[inline(always)]
            pub fn $name<T: Real>(x: T $(, $arg: T)*) -> T {
                Real::$name(x $(, $arg)*)
            }
        )*
    };
}

free_functions!(
    sqrt(),
    mul_add(a, b),
    abs(),
    exp(),
    ln(),
    sin(),
    cos(),
    tanh(),
    powf(exponent)
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_std_within_documented_error() {
        for i in 1..2000 {
            let x = i as f64 * 0.00731 - 5.0;
            let close = |got: f64, want: f64| (got - want).abs() <= 2e-15 * want.abs().max(1e-300);
            assert!(close(exp(x), x.exp()), "exp({x})");
            assert!(close(sin(x), x.sin()), "sin({x})");
            assert!(close(cos(x), x.cos()), "cos({x})");
            assert!(close(tanh(x), x.tanh()), "tanh({x})");
            assert_eq!(sqrt(x.abs()), x.abs().sqrt());
            assert_eq!(abs(x), x.abs());
            assert_eq!(mul_add(x, 3.0, 1.0), x.mul_add(3.0, 1.0));
            let xf = x as f32;
            let closef =
                |got: f32, want: f64| ((got as f64) - want).abs() <= 2.5e-7 * want.abs().max(1e-30);
            assert!(closef(exp(xf), (xf as f64).exp()), "expf({xf})");
            assert!(closef(sin(xf), (xf as f64).sin()), "sinf({xf})");
            assert!(
                closef(powf(xf.abs(), 1.5f32), (xf.abs() as f64).powf(1.5)),
                "powf({xf})"
            );
            if x > 0.0 {
                assert!(close(ln(x), x.ln()), "ln({x})");
            }
        }
    }
}
