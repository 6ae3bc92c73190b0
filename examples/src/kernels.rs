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
        // Row and column in 32-bit arithmetic: 64-bit division is emulated, and slow, on GPUs.
        let (r, c) = (
            (i as u32 / grid.width) as usize,
            (i as u32 % grid.width) as usize,
        );
        *out = if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
            input[i]
        } else {
            grid.centre * input[i]
                + side * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
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

pub mod atomics;
pub mod streams;
