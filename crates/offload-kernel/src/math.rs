//! Floating-point math for kernels, giving the same bits on the GPU and on the host backend.
//!
//! `f32::sqrt`, `exp`, `sin`… are `std` methods, which kernels (built on `core`) cannot call.
//! These functions stand in for them. Correctly rounded operations (`sqrt`, `mul_add`, `abs`)
//! use the hardware on every side (PTX `sqrt.rn`, `fma.rn`; LLVM's correctly rounded `sqrt` and
//! `fma` on amdgcn; the host's IEEE instructions).
//! Transcendental functions run the same code on both sides, the `libm` crate (a port of musl's
//! libm; errors under 1 ulp for `exp`, `ln`, `sin`, `cos`, `tanh`, a few ulp for `pow` near
//! overflow), so a kernel's results do not depend on the backend.
//!
//! [`fast`] holds the GPU's approximate `f32` instructions instead, with documented error bounds,
//! for kernels marked `#[offload::kernel(fast_math)]` and modules built with
//! `Kernels::fast_math(true)` (which makes these functions [`fast`]'s on the GPU).

mod exact;
mod f32_approx;
pub mod fast;

// (f32's exact functions go unused on a GPU when the whole module is fast math.)
#[cfg_attr(offload_fast_math, allow(unused_imports))]
use exact::{for_f32, for_f64};

pub use crate::arith::{add, mul, to_bf16, Arith};

/// A float type kernels compute with: `f32` or `f64`. Call these as `math::exp(x)` (below), not
/// as methods: on the host a method call `x.exp()` would pick `std`'s own, whose bits can differ.
///
/// The `*_fast` methods are [`fast`]'s functions, within the error bounds its table gives.
pub trait Real: Copy {
    /// Square root, correctly rounded.
    fn sqrt(self) -> Self;
    /// `1 / sqrt(self)`: the square root and the division each correctly rounded.
    fn rsqrt(self) -> Self;
    /// `self / d`, correctly rounded.
    fn div(self, d: Self) -> Self;
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
    /// [`fast::sqrt`].
    fn sqrt_fast(self) -> Self;
    /// [`fast::rsqrt`].
    fn rsqrt_fast(self) -> Self;
    /// [`fast::div`].
    fn div_fast(self, d: Self) -> Self;
    /// [`fast::exp`].
    fn exp_fast(self) -> Self;
    /// [`fast::ln`].
    fn ln_fast(self) -> Self;
    /// [`fast::sin`].
    fn sin_fast(self) -> Self;
    /// [`fast::cos`].
    fn cos_fast(self) -> Self;
}

/// The functions that `Kernels::fast_math(true)` (offload-build's `--cfg offload_fast_math`)
/// turns into [`fast`]'s on the GPU targets that have approximations; `$fast` names them.
macro_rules! real {
    ($t:ty, $exact:ident, $fast:ident, $fma:ident, $tanh:ident, $pow:ident,
     $($name:ident($($arg:ident),*) => $fast_name:ident),*) => {
        impl Real for $t {
            $(
                #[inline(always)]
                fn $name(self $(, $arg: Self)*) -> Self {
                    #[cfg(all(
                        offload_fast_math,
                        any(all(target_arch = "nvptx64", not(feature = "spirv")), target_arch = "amdgpu")
                    ))]
                    {
                        $fast::$name(self $(, $arg)*)
                    }
                    #[cfg(not(all(
                        offload_fast_math,
                        any(all(target_arch = "nvptx64", not(feature = "spirv")), target_arch = "amdgpu")
                    )))]
                    {
                        $exact::$name(self $(, $arg)*)
                    }
                }
                #[inline(always)]
                fn $fast_name(self $(, $arg: Self)*) -> Self {
                    $fast::$name(self $(, $arg)*)
                }
            )*
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

real!(f32, for_f32, f32_approx, fmaf32, tanhf, powf,
    sqrt() => sqrt_fast, rsqrt() => rsqrt_fast, div(d) => div_fast, exp() => exp_fast,
    ln() => ln_fast, sin() => sin_fast, cos() => cos_fast);
// f64 has no fast flavour (nvcc's -use_fast_math leaves double alone too).
real!(f64, for_f64, for_f64, fmaf64, tanh, pow,
    sqrt() => sqrt_fast, rsqrt() => rsqrt_fast, div(d) => div_fast, exp() => exp_fast,
    ln() => ln_fast, sin() => sin_fast, cos() => cos_fast);

macro_rules! free_functions {
    ($($name:ident($($arg:ident),*)),* $(,)?) => {
        $(
            #[doc = concat!("[`Real::", stringify!($name), "`], the same bits on every backend (in a module \
                             built with `Kernels::fast_math(true)`, [`fast`]'s on the GPU).")]
            #[inline(always)]
            pub fn $name<T: Real>(x: T $(, $arg: T)*) -> T {
                Real::$name(x $(, $arg)*)
            }
        )*
    };
}

free_functions!(
    sqrt(),
    rsqrt(),
    div(d),
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
            assert_eq!(rsqrt(x.abs()), 1.0 / x.abs().sqrt());
            assert_eq!(div(x, 3.0), x / 3.0);
            // On the host the fast functions are the exact ones.
            assert_eq!(fast::sin(x as f32), sin(x as f32));
            assert_eq!(fast::rsqrt(x.abs() as f32), rsqrt(x.abs() as f32));
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
