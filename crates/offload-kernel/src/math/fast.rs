//! Fast math: the GPU's approximate `f32` instructions, as CUDA C's `-use_fast_math` gives them.
//!
//! A kernel marked `#[offload::kernel(fast_math)]` sees this module as `math` in its body, and a
//! module built with `offload_build::Kernels::fast_math(true)` gets these functions from
//! [`offload::math`](super) itself in every kernel (helpers included); any kernel may also call
//! them by name, `math::fast::sin(x)`.
//!
//! On nvptx each `f32` function is one PTX instruction (or two): `sin.approx.ftz.f32`,
//! `cos.approx.ftz.f32`, `ex2.approx.ftz.f32` after a multiply by log₂e, `lg2.approx.ftz.f32`
//! before a multiply by ln 2, `sqrt.approx.ftz.f32`, `rsqrt.approx.ftz.f32`, `div.approx.ftz.f32`.
//! On amdgcn they are the hardware's `v_sin_f32`, `v_cos_f32` (which take revolutions: the
//! argument is first multiplied by 1/2π), `v_exp_f32`, `v_log_f32`, `v_sqrt_f32`, `v_rsq_f32` and
//! a multiply by `v_rcp_f32`. SPIR-V images and `f64` (on every target, as with nvcc) keep the
//! exact functions of [`super`], and so does the host backend: exact results are within every
//! bound below.
//!
//! Error bounds for `f32`, with `want` the exact result; inputs and results below 2⁻¹²⁶ (the
//! subnormals) may be flushed to zero, so every bound also allows an absolute error of 2⁻¹²⁶:
//!
//! | function | bound on \|got − want\| |
//! |---|---|
//! | [`sin`], [`cos`] | 2⁻²⁰ + \|x\|·2⁻²² (the argument's own rounding grows with \|x\|) |
//! | [`exp`] | (2 + 1.2·\|x\|)·2⁻²³·\|want\| |
//! | [`ln`] (x > 0) | 2⁻²¹·(1 + \|want\|) |
//! | [`sqrt`], [`rsqrt`] (x ≥ 0) | 2⁻²¹·\|want\| |
//! | [`div`] (2⁻¹²⁵ ≤ \|d\| ≤ 2¹²⁵) | 2⁻²¹·\|want\| |
//!
//! NaN in gives NaN out; `exp` of a large argument, `sqrt` and `rsqrt` of 0 and infinities give
//! what the exact functions give. The parity suite's `fast_math` tests check these bounds
//! against an `f64` reference on the GPU and on the host backend.

pub use super::{abs, add, mul, mul_add, powf, tanh, Arith, Real};

macro_rules! fast_functions {
    ($($name:ident($($arg:ident),*) => $method:ident: $what:literal),* $(,)?) => {
        $(
            #[doc = concat!($what, " (see the module's table for its error bound).")]
            #[inline(always)]
            pub fn $name<T: Real>(x: T $(, $arg: T)*) -> T {
                Real::$method(x $(, $arg)*)
            }
        )*
    };
}

fast_functions!(
    sin() => sin_fast: "Sine (radians), approximate on the GPU",
    cos() => cos_fast: "Cosine (radians), approximate on the GPU",
    exp() => exp_fast: "`e^x`, approximate on the GPU",
    ln() => ln_fast: "Natural logarithm, approximate on the GPU",
    sqrt() => sqrt_fast: "Square root, approximate on the GPU",
    rsqrt() => rsqrt_fast: "`1 / sqrt(x)`, approximate on the GPU",
    div(d) => div_fast: "`x / d`, approximate on the GPU",
);

/// The `f32` approximations, per target: what `Real`'s `*_fast` methods call for `f32`.
pub(crate) mod f32_approx {
    #[cfg(any(
        all(target_arch = "nvptx64", not(feature = "spirv")),
        target_arch = "amdgpu"
    ))]
    use core::f32::consts::{LN_2, LOG2_E};

    /// `pub fn NAME(args: f32) -> f32` for each `NAME(args) = body;`, whose body calls intrinsics.
    #[cfg(any(
        all(target_arch = "nvptx64", not(feature = "spirv")),
        target_arch = "amdgpu"
    ))]
    macro_rules! instructions {
        ($($name:ident($($arg:ident),*) = $body:expr;)*) => {$(
            #[inline(always)]
            pub fn $name($($arg: f32),*) -> f32 {
                // SAFETY: these intrinsics are plain arithmetic, defined for every input.
                unsafe { $body }
            }
        )*};
    }

    /// The PTX instructions, as LLVM's NVVM intrinsics (which LLVM knows have no side effects).
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    mod target {
        use super::*;
        #[allow(improper_ctypes)]
        extern "C" {
            #[link_name = "llvm.nvvm.sin.approx.ftz.f"]
            fn sin_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.cos.approx.ftz.f"]
            fn cos_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.ex2.approx.ftz.f"]
            fn ex2_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.lg2.approx.ftz.f"]
            fn lg2_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.sqrt.approx.ftz.f"]
            fn sqrt_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.rsqrt.approx.ftz.f"]
            fn rsqrt_approx(x: f32) -> f32;
            #[link_name = "llvm.nvvm.div.approx.ftz.f"]
            fn div_approx(x: f32, d: f32) -> f32;
        }
        instructions! {
            sin(x) = sin_approx(x);
            cos(x) = cos_approx(x);
            exp(x) = ex2_approx(x * LOG2_E);
            ln(x) = lg2_approx(x) * LN_2;
            sqrt(x) = sqrt_approx(x);
            rsqrt(x) = rsqrt_approx(x);
            div(x, d) = div_approx(x, d);
        }
    }

    /// The AMD instructions, as LLVM's AMDGPU intrinsics. `v_sin_f32` and `v_cos_f32` take the
    /// angle in revolutions.
    #[cfg(target_arch = "amdgpu")]
    mod target {
        use super::*;
        use core::f32::consts::FRAC_1_PI;
        #[allow(improper_ctypes)]
        extern "C" {
            #[link_name = "llvm.amdgcn.sin.f32"]
            fn sin_revolutions(revolutions: f32) -> f32;
            #[link_name = "llvm.amdgcn.cos.f32"]
            fn cos_revolutions(revolutions: f32) -> f32;
            #[link_name = "llvm.amdgcn.exp2.f32"]
            fn exp2(x: f32) -> f32;
            #[link_name = "llvm.amdgcn.log.f32"]
            fn log2(x: f32) -> f32;
            #[link_name = "llvm.amdgcn.sqrt.f32"]
            fn sqrt_approx(x: f32) -> f32;
            #[link_name = "llvm.amdgcn.rsq.f32"]
            fn rsq(x: f32) -> f32;
            #[link_name = "llvm.amdgcn.rcp.f32"]
            fn rcp(x: f32) -> f32;
        }
        instructions! {
            sin(x) = sin_revolutions(x * (0.5 * FRAC_1_PI));
            cos(x) = cos_revolutions(x * (0.5 * FRAC_1_PI));
            exp(x) = exp2(x * LOG2_E);
            ln(x) = log2(x) * LN_2;
            sqrt(x) = sqrt_approx(x);
            rsqrt(x) = rsq(x);
            div(x, d) = x * rcp(d);
        }
    }

    /// The host backend and SPIR-V: the exact functions, within every bound.
    #[cfg(not(any(
        all(target_arch = "nvptx64", not(feature = "spirv")),
        target_arch = "amdgpu"
    )))]
    use crate::math::exact_f32 as target;

    pub(crate) use target::*;
}
