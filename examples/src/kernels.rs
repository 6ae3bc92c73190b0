//! Offload kernels: ordinary Rust, compiled for nvptx64 by the build script and for the host.
use offload::prelude::*;

/// `y = a * x + y`.
#[offload::kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        *y += a * x[i];
    }
}

/// Parameters of the 2D stencil, passed by value.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Grid2 {
    pub width: u32,
    pub height: u32,
    /// Weight of the centre point; the four neighbours share the rest.
    pub centre: f32,
}

/// One Jacobi-style sweep of a 5-point stencil over a `width × height` row-major grid. Border
/// points are copied unchanged.
#[offload::kernel]
pub fn stencil5(grid: Grid2, input: &[f32], output: &mut [f32]) {
    let (w, h) = (grid.width as usize, grid.height as usize);
    let side = (1.0 - grid.centre) * 0.25;
    for (i, out) in output.iter_mine() {
        let (r, c) = (i / w, i % w);
        *out = if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
            input[i]
        } else {
            grid.centre * input[i] + side * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
        };
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

/// Writes each thread's global id and the launch's thread count, one element per thread
/// (threads past the end do nothing): shows `mine()` and the index API.
#[offload::kernel]
pub fn thread_ids(ids: &mut [u32], totals: &mut [u32]) {
    if let Some((i, id)) = ids.mine() {
        *id = global_id() as u32;
        let _ = i;
    }
    if let Some((_, t)) = totals.mine() {
        *t = global_threads() as u32;
    }
}
