//! The `f64` shapes that sm_90 adds: `D (16×8) = A (16×K) · B (K×8) + C (16×8)` for K = 4, 8
//! and 16 (PTX `mma.sync.aligned.m16n8k{4,8,16}.row.col.f64.f64.f64.f64`), one module per shape.
//!
//! The three share one fragment layout, written in the lane's group `g = lane / 4` and its index
//! in the group `t = lane % 4`: A's element `i` (0..K/2) sits at row `g + 8 * (i % 2)`, column
//! `t + 4 * (i / 2)`; B's element `i` (0..K/4) at row `k = t + 4 * i`, column `n = g`; C and D
//! are [`Acc16x8F64`]. Each result element is `c` followed by K fused multiply-adds, `k`
//! ascending, rounded to nearest-even: the host backend computes exactly that.

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
use super::fragment::Acc16x8F64;
use super::{group_and_thread, require_tensor_cores};

/// Row and column, in the 16 × K tile, of element `i` of the A fragment of the lane in group
/// `g` with index `t` in it.
#[inline(always)]
const fn a_element(g: usize, t: usize, i: usize) -> (usize, usize) {
    (g + 8 * (i % 2), t + 4 * (i / 2))
}

/// Row (`k`) and column (`n`), in the K × 8 tile, of element `i` of that lane's B fragment.
#[inline(always)]
const fn b_element(g: usize, t: usize, i: usize) -> (usize, usize) {
    (t + 4 * i, g)
}

/// Refuses an `f64` sm_90 shape where there is none: below sm_80 at compile time and on AMD or
/// SPIR-V when it runs (as every tensor-core operation, see `require_tensor_cores`);
/// in an image for sm_80 to sm_89 with a panic when it runs, so that a module holding such a
/// kernel still builds for those GPUs, and launching it fails with this message
/// (`Error::KernelFailed`).
#[inline(always)]
fn require_sm90<T>() {
    require_tensor_cores::<T>();
    #[cfg(all(
        target_arch = "nvptx64",
        not(feature = "spirv"),
        not(target_feature = "sm_90")
    ))]
    panic!(
        "offload::mma: the f64 shapes m16n8k4, m16n8k8 and m16n8k16 need sm_90 or newer: this \
         image is for an older GPU (build for sm_90: OFFLOAD_CUDA_ARCH or Kernels::cuda_arch)"
    );
}

/// The host backend's product, for every shape: the warp's fragments gathered into whole tiles,
/// then each of this lane's result elements as a chain of fused multiply-adds, `k` ascending.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn host_mma<const KA: usize, const KB: usize>(
    a: &[f64; KA],
    b: &[f64; KB],
    c: Acc16x8F64,
    operation: &str,
) -> Acc16x8F64 {
    let mut words = [0u64; 12];
    for (w, v) in words.iter_mut().zip(a.iter().chain(b)) {
        *w = v.to_bits();
    }
    let lanes = super::host::warp_gather(words, operation);
    let (mut ta, mut tb) = ([[0.0f64; 16]; 16], [[0.0f64; 8]; 16]);
    for (lane, w) in lanes.iter().enumerate() {
        let (g, t) = (lane / 4, lane % 4);
        for (i, bits) in w[..KA].iter().enumerate() {
            let (r, col) = a_element(g, t, i);
            ta[r][col] = f64::from_bits(*bits);
        }
        for (i, bits) in w[KA..KA + KB].iter().enumerate() {
            let (k, n) = b_element(g, t, i);
            tb[k][n] = f64::from_bits(*bits);
        }
    }
    let mut d = c;
    for (i, d) in d.0.iter_mut().enumerate() {
        let (r, col) = Acc16x8F64::position(i);
        *d = (0..2 * KA).fold(*d, |acc, k| ta[r][k].mul_add(tb[k][col], acc));
    }
    d
}

/// One module per shape: PTX shape `$shape`, `$k` deep, `$a` A elements and `$b` B elements per
/// lane, `$ptx` the instruction's function in `ptx.rs`.
macro_rules! f64_shape {
    ($module:ident, $shape:literal, $k:literal, $a:literal, $b:literal, $ptx:ident, $doc:literal) => {
        #[doc = concat!(
            "`D (16×8) = A (16×", stringify!($k), ") · B (", stringify!($k), "×8) + C (16×8)` in `f64` (PTX `mma.sync.aligned.",
            $shape, ".row.col.f64.f64.f64.f64`), sm_90 and newer. ", $doc, "\n\n",
            "Fragments: see *The f64 shapes of sm_90* in the `mma` module. Each result element is `c` followed by ",
            stringify!($k), " fused multiply-adds, `k` ascending, rounded to nearest-even."
        )]
        pub mod $module {
            use super::super::fragment::Acc16x8F64;
            use super::super::matrix::MatrixRef;
            use super::{a_element, b_element, group_and_thread, require_sm90};

            /// Depth of the product (columns of A, rows of B).
            pub const K: usize = $k;

            #[doc = concat!(
                "The calling lane's part of the 16 × ", stringify!($k), " A operand: ", stringify!($a),
                " values.\n\nElement `i` sits at row `lane / 4 + 8 * (i % 2)`, column `lane % 4 + 4 * (i / 2)`."
            )]
            #[derive(Clone, Copy, Debug, PartialEq)]
            #[repr(transparent)]
            pub struct A(pub [f64; $a]);

            #[doc = concat!(
                "The calling lane's part of the ", stringify!($k), " × 8 B operand (rows `k`, columns `n`): ",
                stringify!($b), " values.\n\nElement `i` sits at row `k = lane % 4 + 4 * i`, column `n = lane / 4`."
            )]
            #[derive(Clone, Copy, Debug, PartialEq)]
            #[repr(transparent)]
            pub struct B(pub [f64; $b]);

            impl A {
                /// All zeros.
                pub const ZERO: A = A([0.0; $a]);

                /// Row and column, in the tile, of this lane's element `i`.
                #[inline(always)]
                pub fn position(i: usize) -> (usize, usize) {
                    let (g, t) = group_and_thread();
                    a_element(g, t, i)
                }

                /// The fragment whose element at (row, column) is `f(row, column)`.
                #[inline(always)]
                pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
                    A(core::array::from_fn(|i| {
                        let (r, c) = Self::position(i);
                        f(r, c)
                    }))
                }

                /// The tile at `(row0, col0)` of `m` (zeros outside it).
                #[inline(always)]
                pub fn load(m: &MatrixRef<'_, f64>, row0: usize, col0: usize) -> Self {
                    Self::from_fn(|r, c| m.get_or(row0 + r, col0 + c, 0.0))
                }
            }

            impl B {
                /// All zeros.
                pub const ZERO: B = B([0.0; $b]);

                /// Row (`k`) and column (`n`), in the tile, of this lane's element `i`.
                #[inline(always)]
                pub fn position(i: usize) -> (usize, usize) {
                    let (g, t) = group_and_thread();
                    b_element(g, t, i)
                }

                /// The fragment whose element at (k, n) is `f(k, n)`.
                #[inline(always)]
                pub fn from_fn(f: impl Fn(usize, usize) -> f64) -> Self {
                    B(core::array::from_fn(|i| {
                        let (k, n) = Self::position(i);
                        f(k, n)
                    }))
                }

                /// The tile at `(k0, n0)` of a row-major `K × N` matrix `m` (zeros outside it).
                #[inline(always)]
                pub fn load(m: &MatrixRef<'_, f64>, k0: usize, n0: usize) -> Self {
                    Self::from_fn(|k, n| m.get_or(k0 + k, n0 + n, 0.0))
                }
            }

            /// `a · b + c` over the warp, in `f64`. Collective: all 32 lanes call it together
            /// (see *Taking part* in the `mma` module).
            #[inline(always)]
            pub fn mma(a: &A, b: &B, c: Acc16x8F64) -> Acc16x8F64 {
                require_sm90::<A>();
                arch::mma(a, b, c)
            }

            #[cfg(all(target_arch = "nvptx64", not(feature = "spirv"), target_feature = "sm_90"))]
            mod arch {
                use super::{Acc16x8F64, A, B};

                #[inline(always)]
                pub(super) fn mma(a: &A, b: &B, c: Acc16x8F64) -> Acc16x8F64 {
                    Acc16x8F64(super::super::super::ptx::$ptx(a.0, b.0, c.0))
                }
            }

            #[cfg(any(
                target_arch = "amdgpu",
                all(target_arch = "nvptx64", any(feature = "spirv", not(target_feature = "sm_90")))
            ))]
            mod arch {
                use super::{Acc16x8F64, A, B};

                #[inline(always)]
                pub(super) fn mma(_: &A, _: &B, _: Acc16x8F64) -> Acc16x8F64 {
                    unreachable!("require_sm90 panicked before")
                }
            }

            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            mod arch {
                use super::{Acc16x8F64, A, B};

                pub(super) fn mma(a: &A, b: &B, c: Acc16x8F64) -> Acc16x8F64 {
                    super::super::host_mma(&a.0, &b.0, c, concat!(stringify!($module), "::mma"))
                }
            }
        }
    };
}

f64_shape!(
    m16n8k4_f64,
    "m16n8k4",
    4,
    2,
    1,
    mma_m16n8k4_f64,
    "The smallest: 2 A values and 1 B value per lane."
);
f64_shape!(
    m16n8k8_f64,
    "m16n8k8",
    8,
    4,
    2,
    mma_m16n8k8_f64,
    "4 A values and 2 B values per lane."
);
f64_shape!(
    m16n8k16_f64,
    "m16n8k16",
    16,
    8,
    4,
    mma_m16n8k16_f64,
    "The deepest: 8 A values and 4 B values per lane (fewer instructions per product, more \
     registers)."
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (row, column) of each operand is held by exactly one (lane, element).
    #[test]
    fn layouts_cover_the_tiles_once() {
        for k in [4usize, 8, 16] {
            let mut a = [[0u32; 16]; 16];
            let mut b = [[0u32; 8]; 16];
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for i in 0..k / 2 {
                    let (r, c) = a_element(g, t, i);
                    a[r][c] += 1;
                }
                for i in 0..k / 4 {
                    let (kk, n) = b_element(g, t, i);
                    b[kk][n] += 1;
                }
            }
            assert!(
                a.iter().all(|r| r[..k].iter().all(|&n| n == 1)),
                "A, K = {k}"
            );
            assert!(
                b[..k].iter().all(|r| r.iter().all(|&n| n == 1)),
                "B, K = {k}"
            );
        }
    }
}
