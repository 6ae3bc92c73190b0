//! The `f32` approximations of `math::fast`, per target: the GPU's instructions through LLVM
//! intrinsics on nvptx and amdgcn, the exact functions elsewhere (the host backend, SPIR-V).

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
use super::exact::for_f32 as target;

pub(crate) use target::*;
