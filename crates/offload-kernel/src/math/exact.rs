//! The exact functions of each float type: what `Real` calls, and what `math::fast` falls back
//! to where a target has no approximation (correctly rounded square roots and divisions, libm
//! for the rest).

macro_rules! exact {
    ($module:ident, $t:ty, $sqrt:ident, $exp:ident, $ln:ident, $sin:ident, $cos:ident) => {
        #[cfg_attr(offload_fast_math, allow(dead_code))]
        pub(crate) mod $module {
            #[inline(always)]
            pub fn sqrt(x: $t) -> $t {
                #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
                {
                    // SAFETY: sqrt is defined for every input (NaN for negatives). (A safe
                    // intrinsic in newer rustc versions, hence the allow.)
                    #[allow(unused_unsafe)]
                    unsafe {
                        core::intrinsics::$sqrt(x)
                    }
                }
                #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
                {
                    <$t>::sqrt(x)
                }
            }
            #[inline(always)]
            pub fn rsqrt(x: $t) -> $t {
                1.0 / sqrt(x)
            }
            #[inline(always)]
            pub fn div(x: $t, d: $t) -> $t {
                x / d
            }
            #[inline(always)]
            pub fn exp(x: $t) -> $t {
                libm::$exp(x)
            }
            #[inline(always)]
            pub fn ln(x: $t) -> $t {
                libm::$ln(x)
            }
            #[inline(always)]
            pub fn sin(x: $t) -> $t {
                libm::$sin(x)
            }
            #[inline(always)]
            pub fn cos(x: $t) -> $t {
                libm::$cos(x)
            }
        }
    };
}

exact!(for_f32, f32, sqrtf32, expf, logf, sinf, cosf);
exact!(for_f64, f64, sqrtf64, exp, log, sin, cos);
