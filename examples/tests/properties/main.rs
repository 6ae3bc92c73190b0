//! Property tests over every example kernel: random sizes (0 and non-multiples of the block
//! included), random values (NaN, infinities and subnormals included) and random launch shapes
//! wherever the kernel accepts any shape. The host backend must equal the plain CPU loop bit for
//! bit, and a GPU, when there is one, must equal the host backend bit for bit. The exemptions are
//! documented where they apply:
//! - a NaN result may carry a different payload on the GPU (PTX arithmetic returns the canonical
//!   NaN where x86 propagates an input's), so any NaN equals any NaN;
//! - floating-point atomics add in an order that varies from run to run: those sums are checked
//!   against the exact sum within the rounding bound of any summation order (`atomics.rs`);
//! - the per-block sums of `block_sum` and the products of `sgemm` are checked against exact
//!   (f64) results within the bound of their summation, and bit for bit between backends.
//!
//! One binary (one file per family of kernels), so the strategies and comparisons they share live
//! here rather than in tests/common, which every test binary compiles. Case counts are set per
//! test (`ProptestConfig`) so that the whole binary stays well within a minute on the host
//! backend of a 2-core machine (about 12 s in release when written): kernels with barriers or
//! warp operations cost the host backend more per thread, so they run fewer cases.

#[path = "../common/mod.rs"]
mod common;

mod atomics;
mod block;
mod elementwise;
mod reductions;
mod warps;

use offload::{Device, Dim3, Launch};
use proptest::prelude::*;
use std::sync::OnceLock;

/// The GPU the properties also run on, looked up (and the skip reported) once per binary.
fn gpu() -> Option<&'static Device> {
    static GPU: OnceLock<Option<Device>> = OnceLock::new();
    GPU.get_or_init(|| common::gpu::gpu("properties on the GPU"))
        .as_ref()
}

/// Floats of every width the kernels use, seen as their bits.
trait Float: Copy {
    fn bits(self) -> u64;
    fn is_nan(self) -> bool;
}

macro_rules! float {
    ($($t:ty),*) => {$(
        impl Float for $t {
            fn bits(self) -> u64 {
                self.to_bits().into()
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    )*};
}
float!(f32, f64, offload::half::f16, offload::half::bf16);

trait SameBits {
    fn same_bits(&self, other: &Self) -> bool;
}

impl<T: Float> SameBits for [T] {
    fn same_bits(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|(a, b)| a.bits() == b.bits() || (a.is_nan() && b.is_nan()))
    }
}

/// The exact bits, NaN payloads included: for kernels that only move values.
fn bits_of(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The unit roundoff of f32: the relative error of one rounding.
const F32_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;

/// Whether `got` is within the rounding bound of a sum of `terms` f32 additions in any order:
/// `terms · u · Σ|x|` (the classic bound γ_n, to first order), plus the smallest subnormal for
/// each term, which is what underflow may cost.
fn within_summation_bound(got: f64, exact: f64, terms: usize, magnitude: f64) -> bool {
    let subnormal = f32::from_bits(1) as f64;
    (got - exact).abs() <= terms as f64 * (F32_ROUNDOFF * 1.0001 * magnitude + subnormal)
}

/// Any f32: mostly ordinary values, with the special ones (NaN, ±inf, ±0, subnormals) mixed in.
fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1.0e3f32..1.0e3,
        1 => proptest::num::f32::ANY,
    ]
}

fn f32s(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(any_f32(), 0..max_len)
}

/// Finite f32 whose sums of a few thousand stay finite: ordinary values, large ones, zeros and
/// subnormals.
fn finite_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1.0e3f32..1.0e3,
        1 => -1.0e30f32..1.0e30,
        1 => proptest::num::f32::SUBNORMAL | proptest::num::f32::ZERO
            | proptest::num::f32::POSITIVE | proptest::num::f32::NEGATIVE,
    ]
}

/// An explicit 3D grid and block of at most 510 threads (85 × 3 × 2), for kernels whose shared
/// memory or contract needs a real block. Not 1024: a kernel needing more than 64 registers per
/// thread runs fewer threads per block on a GPU (math_mix needs 68, sgemm 126, so 512 is what
/// every example kernel fits), and a bigger block is an `InvalidLaunch` there
/// (tests/kernel_limits.rs).
fn grid_and_block() -> impl Strategy<Value = (Dim3, Dim3)> {
    let dim = |max| (1u32..max, 1u32..4, 1u32..3).prop_map(|(x, y, z)| Dim3::new(x, y, z));
    (dim(9), dim(86))
}

/// `None`: the launcher's default shape; otherwise an explicit 3D grid and block.
fn shape() -> impl Strategy<Value = Option<(Dim3, Dim3)>> {
    proptest::option::of(grid_and_block())
}

fn on(device: &Device, shape: Option<(Dim3, Dim3)>) -> Launch<'_> {
    match shape {
        None => Launch::on(device),
        Some((grid, block)) => Launch::on(device).grid(grid).block(block),
    }
}

/// The GPU's result for the same inputs, when there is a GPU.
fn on_gpu<T: Clone>(init: &T, run: impl FnOnce(&Device, &mut T)) -> Option<T> {
    gpu().map(|g| {
        let mut out = init.clone();
        run(g, &mut out);
        out
    })
}
