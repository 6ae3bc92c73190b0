//! Reductions as kernel parameters (`#[reduce]`): sums, dot products, extremes, a minimum with
//! its index, several reductions in one kernel and a reduction beside an output.

use offload::prelude::*;

/// `*total += Σ x[i]`.
#[offload::kernel]
pub fn sum_f32(x: &[f32], #[reduce(sum)] total: &mut f32) {
    for_each_mine_wide(x, |_, x| *total += x);
}

/// `*total += Σ x[i]`.
#[offload::kernel]
pub fn sum_f64(x: &[f64], #[reduce(sum)] total: &mut f64) {
    for_each_mine_wide(x, |_, x| *total += x);
}

/// `*total += Σ x[i]`, wrapping on overflow (a plain grid-stride loop).
#[offload::kernel]
pub fn sum_u32(x: &[u32], #[reduce(sum)] total: &mut u32) {
    for i in grid_stride(x.len()) {
        *total = total.wrapping_add(x[i]);
    }
}

/// `*total += Σ x[i]·y[i]` over the shorter of the two.
#[offload::kernel]
pub fn dot_f64(x: &[f64], y: &[f64], #[reduce(sum)] total: &mut f64) {
    for_each_mine_wide((x, y), |_, (x, y)| *total += x * y);
}

/// `*total += Σ x[i]·y[i]` in f32.
#[offload::kernel]
pub fn dot_f32(x: &[f32], y: &[f32], #[reduce(sum)] total: &mut f32) {
    for_each_mine_wide((x, y), |_, (x, y)| *total += x * y);
}

/// The least and the greatest of `x`, folded into `lo` and `hi`, and the product of its
/// elements into `product`: three reductions in one pass.
#[offload::kernel]
pub fn extremes(
    x: &[i64],
    #[reduce(min)] lo: &mut i64,
    #[reduce(max)] hi: &mut i64,
    #[reduce(product)] product: &mut i64,
) {
    for i in grid_stride(x.len()) {
        *lo = (*lo).min(x[i]);
        *hi = (*hi).max(x[i]);
        *product = product.wrapping_mul(x[i]);
    }
}

/// The least and greatest of `x` (NaN ignored).
#[offload::kernel]
pub fn range_f32(x: &[f32], #[reduce(min)] lo: &mut f32, #[reduce(max)] hi: &mut f32) {
    for i in grid_stride(x.len()) {
        *lo = lo.min(x[i]);
        *hi = hi.max(x[i]);
    }
}

/// A value with its index, reduced to the least value (the lower index on ties, NaN ignored).
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct MinLoc {
    pub value: f32,
    pub index: u32,
}

impl Reduce for MinLoc {
    fn identity() -> Self {
        MinLoc {
            value: f32::INFINITY,
            index: u32::MAX,
        }
    }
    fn combine(self, other: Self) -> Self {
        let other_first = other.value < self.value
            || (other.value == self.value && other.index < self.index)
            || (self.value.is_nan() && !other.value.is_nan());
        if other_first {
            other
        } else {
            self
        }
    }
}

/// The least element of `x` and its index (`MinLoc`).
#[offload::kernel]
pub fn argmin(x: &[f32], #[reduce] best: &mut MinLoc) {
    for_each_mine_wide(x, |i, value| {
        *best = best.combine(MinLoc {
            value,
            index: i as u32,
        })
    });
}

/// `y = a·x + y`, and `*norm2 += Σ y[i]²` of the new `y`: a reduction beside an output.
#[offload::kernel]
pub fn axpy_norm2(a: f64, x: &[f64], y: &mut [f64], #[reduce(sum)] norm2: &mut f64) {
    for (i, y) in y.iter_mine() {
        *y += a * x[i];
        *norm2 += *y * *y;
    }
}

/// `*total += Σ x[i]` for `i < n`: panics (out of bounds) when `n > x.len()`.
#[offload::kernel]
pub fn sum_first(x: &[f64], n: usize, #[reduce(sum)] total: &mut f64) {
    for i in grid_stride(n) {
        *total += x[i];
    }
}
