//! Kernels on array views: the host passes ndarray's `ArrayView`/`ArrayViewMut`, the kernel sees
//! `offload::nd` views of the same shape.

use offload::nd::{
    ArrayView1, ArrayView2, ArrayView3, ArrayViewMut1, ArrayViewMut2, ArrayViewMut3,
};

/// `out[[r, c]] = scale * a[[r, c]] + bias[[c]]`: a row-broadcast bias.
#[offload::kernel]
pub fn scale_add_bias(
    scale: f32,
    a: ArrayView2<f32>,
    bias: ArrayView1<f32>,
    mut out: ArrayViewMut2<f32>,
) {
    for (row, col, o) in out.iter_mine() {
        *o = scale * a[[row, col]] + bias[[col]];
    }
}

/// `out = aᵀ` (`out` has `a`'s extents swapped).
#[offload::kernel]
pub fn transpose(a: ArrayView2<f64>, mut out: ArrayViewMut2<f64>) {
    for (row, col, o) in out.iter_mine() {
        *o = a[[col, row]];
    }
}

/// `out[[i, j, k]] = a[[i, j, k]] + 10000 i + 100 j + k`: the coordinates each element gets.
#[offload::kernel]
pub fn add_coordinates(a: ArrayView3<f64>, mut out: ArrayViewMut3<f64>) {
    for (i, j, k, o) in out.iter_mine() {
        *o = a[[i, j, k]] + (10000 * i + 100 * j + k) as f64;
    }
}

/// `out[[i]] = a[[n - 1 - i]]`: a reversed copy.
#[offload::kernel]
pub fn reverse(a: ArrayView1<u32>, mut out: ArrayViewMut1<u32>) {
    let n = a.dim()[0];
    for (i, o) in out.iter_mine() {
        *o = a[[n - 1 - i]];
    }
}
