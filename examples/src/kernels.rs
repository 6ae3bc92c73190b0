//! Offload kernels: ordinary Rust, compiled for nvptx64 by the build script and for the host.
use core::ops::{Add, Mul};
use num_traits::Zero;
use offload::half::{bf16, f16};
use offload::prelude::*;

pub mod block;
pub mod box_round_trip;
pub mod dgemm;
pub mod gemm_bf16;
mod gemm_tiles;
pub mod gemm_wgmma;
pub mod outputs;
pub mod reductions;
pub mod scans;
pub mod sgemm_tf32;
pub mod tensor;

// In a file of its own: examples/unreported builds it alone, with panic reporting off.
mod demo_saxpy;
pub use demo_saxpy::*;

/// Parameters of the 2D stencil, passed by value.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Grid2 {
    pub width: u32,
    pub height: u32,
    /// Weight of the centre point; the four neighbours share the rest.
    pub centre: f32,
}

impl Grid2 {
    /// The 5-point stencil's new value at element `i` of the row-major `input`: the border is
    /// copied unchanged.
    #[inline]
    pub fn point(&self, input: &[f32], i: usize) -> f32 {
        let (w, h) = (self.width as usize, self.height as usize);
        let side = (1.0 - self.centre) * 0.25;
        // Row and column in 32-bit arithmetic: 64-bit division is emulated, and slow, on GPUs.
        let (r, c) = (
            (i as u32 / self.width) as usize,
            (i as u32 % self.width) as usize,
        );
        if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
            input[i]
        } else {
            self.centre * input[i]
                + side * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
        }
    }
}

/// One Jacobi-style sweep of a 5-point stencil over a `width × height` row-major grid, one
/// element per iteration. Border points are copied unchanged.
#[offload::kernel]
pub fn stencil5(grid: Grid2, input: &[f32], output: &mut [f32]) {
    for (i, out) in output.iter_mine() {
        *out = grid.point(input, i);
    }
}

/// Element-wise integer kernel with a bool and several outputs: `sum = a + b`, `diff = a - b`
/// (wrapping), and `b` negated where `negate` is set.
#[offload::kernel]
pub fn add_sub(negate: bool, a: &[i64], b: &[i64], sum: &mut [i64], diff: &mut [i64]) {
    for (i, s) in sum.iter_mine() {
        let bi = if negate { b[i].wrapping_neg() } else { b[i] };
        *s = a[i].wrapping_add(bi);
    }
    for (i, d) in diff.iter_mine() {
        let bi = if negate { b[i].wrapping_neg() } else { b[i] };
        *d = a[i].wrapping_sub(bi);
    }
}

/// 64-bit products checked for overflow (`checked_mul`), unsigned and signed (the same bits read
/// as `i64`): each product where it fits, else 0, and in `overflows` bit 0 set where the unsigned
/// product overflows, bit 1 where the signed one does.
#[offload::kernel]
pub fn checked_products(
    a: &[u64],
    b: &[u64],
    unsigned: &mut [u64],
    signed: &mut [i64],
    overflows: &mut [u8],
) {
    for (i, p) in unsigned.iter_mine() {
        *p = a[i].checked_mul(b[i]).unwrap_or(0);
    }
    for (i, p) in signed.iter_mine() {
        *p = (a[i] as i64).checked_mul(b[i] as i64).unwrap_or(0);
    }
    for (i, o) in overflows.iter_mine() {
        let unsigned = a[i].checked_mul(b[i]).is_none();
        let signed = (a[i] as i64).checked_mul(b[i] as i64).is_none();
        *o = u8::from(unsigned) | u8::from(signed) << 1;
    }
}

/// Writes, for every element, the global id of the thread that owns it and the launch's thread
/// count: shows the index API and the grid-stride ownership of `iter_mine`.
#[offload::kernel]
pub fn thread_ids(ids: &mut [u32], totals: &mut [u32]) {
    for (_, id) in ids.iter_mine() {
        *id = global_id() as u32;
    }
    for (_, t) in totals.iter_mine() {
        *t = global_threads() as u32;
    }
}

/// Adds one to every element of `counts` in place, then writes into `ids` the global id of the
/// thread that owns each element: a thread id read after an output was updated.
#[offload::kernel]
pub fn bump_then_ids(counts: &mut [u32], ids: &mut [u32]) {
    for (_, c) in counts.iter_mine() {
        *c += 1;
    }
    let id = global_id() as u32;
    for (_, i) in ids.iter_mine() {
        *i = id;
    }
}

/// A mix of math functions in f32 and f64; the same bits on every backend (see `offload::math`).
#[offload::kernel]
pub fn math_mix(x: &[f32], out32: &mut [f32], out64: &mut [f64]) {
    for (i, o) in out32.iter_mine() {
        let v = x[i];
        *o = math::sqrt(math::abs(v)) + math::exp(v) * math::sin(v) - math::ln(1.0 + math::abs(v))
            + math::tanh(v) * math::cos(v)
            + math::powf(math::abs(v), 1.5)
            + math::mul_add(v, 3.0, 0.5);
    }
    for (i, o) in out64.iter_mine() {
        let v = x[i] as f64;
        *o = math::sqrt(math::abs(v)) + math::exp(v) * math::sin(v) - math::ln(1.0 + math::abs(v))
            + math::tanh(v) * math::cos(v)
            + math::powf(math::abs(v), 1.5)
            + math::mul_add(v, 3.0, 0.5);
    }
}

/// One Jacobi sweep for Laplace's equation on a `width × height` row-major grid: each interior
/// point becomes the mean of its four neighbours; border points are the fixed boundary values.
#[offload::kernel]
pub fn jacobi2d(width: u32, height: u32, input: &[f32], output: &mut [f32]) {
    let (w, h) = (width as usize, height as usize);
    for (i, out) in output.iter_mine() {
        // 32-bit row and column: 64-bit division is emulated on GPUs.
        let (r, c) = ((i as u32 / width) as usize, (i as u32 % width) as usize);
        *out = if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
            input[i]
        } else {
            0.25 * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
        };
    }
}

pub mod atomics;
pub mod register_cap;
pub mod stencil_tma;
pub mod stencils;
pub mod streams;
pub mod views;
pub mod warps;
pub mod wgmma_tile;

/// `y = a * x + y` in any precision: one generic kernel, one device entry per declared element
/// type (`axpy__f32`, `axpy__f64`, `axpy__f16`, `axpy__bf16`). Half precision computes through
/// f32 like the `half` crate's operators, with the GPU's conversion instructions
/// (`math::add`/`math::mul`), so the bits are those of `a * x + y` on the host. Reads and writes
/// 16 bytes at a time where `x` and `y` are aligned alike.
#[offload::kernel(instances(T = f32 | f64 | f16 | bf16))]
pub fn axpy<T: WideElement + math::Arith>(a: T, x: &[T], #[wide] y: &mut [T]) {
    y.update_mine_wide(x, |y, x| math::add(math::mul(a, x), y));
}

/// Element types of the small-matrix kernel. `num_traits` (a `no_std` crate from crates.io,
/// declared to the device pass in build.rs) gives the zero; the method is ordinary trait code
/// that runs on the device.
pub trait Scalar: Copy + Zero + Add<Output = Self> + Mul<Output = Self> {
    /// `self + a * b`, rounded twice (no fused multiply-add), as the CPU reference does.
    #[inline(always)]
    fn add_product(self, a: Self, b: Self) -> Self {
        self + a * b
    }
}
impl Scalar for f32 {}
impl Scalar for f64 {}

/// `c[k] = a[k] · b[k]` for a batch of `N × N` row-major matrices, one matrix per element: the
/// size is a const generic, so each instance is fully unrolled for its `N`.
#[offload::kernel(instances(T = f32 | f64, N = 2 | 3 | 4))]
pub fn batched_matmul<T: Scalar, const N: usize>(
    a: &[[[T; N]; N]],
    b: &[[[T; N]; N]],
    c: &mut [[[T; N]; N]],
) {
    for (k, c) in c.iter_mine() {
        *c = matmul(&a[k], &b[k]);
    }
}

/// A plain generic function (not a kernel), compiled into the device image with its caller;
/// closures included.
#[inline(always)]
fn matmul<T: Scalar, const N: usize>(a: &[[T; N]; N], b: &[[T; N]; N]) -> [[T; N]; N] {
    core::array::from_fn(|i| {
        core::array::from_fn(|j| (0..N).fold(T::zero(), |acc, k| acc.add_product(a[i][k], b[k][j])))
    })
}

/// std::offload's raw-pointer style: `x` points to one fixed-size array, copied to the device
/// and back whole; `step` (a `&f64`) is copied to the device. Each thread writes the elements
/// congruent to its global id, so no two threads write one element.
#[offload::kernel]
pub fn iota_fixed(x: *mut [f64; 256], offset: f64, step: &f64) {
    let mut k = global_id();
    while k < 256 {
        // SAFETY: `x` is the launch's device copy of one `[f64; 256]`; element k belongs to this
        // thread alone (k ≡ global_id mod global_threads).
        unsafe { (*x)[k] = offset + *step * k as f64 };
        k += global_threads();
    }
}

/// `y += x` on bytes, wrapping. With sixteen bytes per wide access it has the finest cut into
/// chunks and ends, which the tests use to see every element updated exactly once.
#[offload::kernel]
pub fn add_bytes(x: &[u8], #[wide] y: &mut [u8]) {
    y.update_mine_wide(x, |y, x| y.wrapping_add(x));
}
