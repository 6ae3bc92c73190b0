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
//! Error bounds for `f32`, with `want` the exact result. Subnormal inputs and results (below
//! 2⁻¹²⁶) may be flushed to zero, and so may a result that the approximation rounds into them,
//! so every bound also allows an absolute error of 2⁻¹²⁵:
//!
//! | function | bound on \|got − want\| |
//! |---|---|
//! | [`sin`], [`cos`] | 2⁻²⁰ + \|x\|·2⁻²² (the argument's own rounding grows with \|x\|) |
//! | [`exp`] | (3 + 1.5·\|x\|)·2⁻²³·\|want\| (the rounding of x·log₂e grows with \|x\|) |
//! | [`ln`] (x > 0) | 2⁻²¹·(1 + \|want\|) |
//! | [`sqrt`], [`rsqrt`] (x ≥ 0) | 2⁻²¹·\|want\| |
//! | [`div`] (2⁻¹²⁵ ≤ \|d\| ≤ 2¹²⁵) | 2⁻²¹·\|want\| |
//!
//! The bounds are for finite arguments in the ranges given; what the instructions return for NaN,
//! infinities and zero divisors is the PTX ISA's (or AMD's ISA's) business, untested here. The
//! parity suite's `fast_math` tests check the bounds against an `f64` reference on an NVIDIA GPU
//! (H200) and on the host backend; the AMD instructions are built but not yet measured.

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
