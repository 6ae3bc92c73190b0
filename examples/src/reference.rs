//! Plain CPU loops computing what the kernels compute, to check them against.
use crate::kernels::stencils::Params3;
use crate::kernels::{Grid2, Scalar};
use core::ops::{Add, Mul};

pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

pub fn stencil5(grid: Grid2, input: &[f32], output: &mut [f32]) {
    let (w, h) = (grid.width as usize, grid.height as usize);
    let side = (1.0 - grid.centre) * 0.25;
    for r in 0..h {
        for c in 0..w {
            let i = r * w + c;
            output[i] = if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
                input[i]
            } else {
                grid.centre * input[i]
                    + side * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
            };
        }
    }
}

/// `stencils::stencil7_tiles` as a plain loop: a 7-point sweep, border points copied.
pub fn stencil7(grid: Params3, input: &[f32], output: &mut [f32]) {
    let (nx, ny, nz) = (grid.nx as usize, grid.ny as usize, grid.nz as usize);
    let side = (1.0 - grid.centre) / 6.0;
    let plane = nx * ny;
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let i = z * plane + y * nx + x;
                let border =
                    x == 0 || y == 0 || z == 0 || x + 1 == nx || y + 1 == ny || z + 1 == nz;
                output[i] = if border {
                    input[i]
                } else {
                    grid.centre * input[i]
                        + side
                            * (input[i - 1]
                                + input[i + 1]
                                + input[i - nx]
                                + input[i + nx]
                                + input[i - plane]
                                + input[i + plane])
                };
            }
        }
    }
}

pub fn relax(steps: u32, x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        let mut v = x;
        for _ in 0..steps {
            v = v * 0.999 + 0.001;
        }
        *y += v;
    }
}

/// `y = a * x + y` element by element in `T`'s own arithmetic (for `f16`/`bf16`: through f32).
pub fn axpy<T: Copy + Add<Output = T> + Mul<Output = T>>(a: T, x: &[T], y: &mut [T]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = a * x + *y;
    }
}

/// `c[k] = a[k] · b[k]` for `N × N` matrices, summing over the inner index in order.
pub fn batched_matmul<T: Scalar, const N: usize>(
    a: &[[[T; N]; N]],
    b: &[[[T; N]; N]],
    c: &mut [[[T; N]; N]],
) {
    for k in 0..c.len() {
        for i in 0..N {
            for j in 0..N {
                let mut sum = T::zero();
                for m in 0..N {
                    sum = sum + a[k][i][m] * b[k][m][j];
                }
                c[k][i][j] = sum;
            }
        }
    }
}

/// `C = A · B` for row-major `A` (m × k) and `B` (k × n), accumulated in f64.
pub fn sgemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|d| a[i * k + d] as f64 * b[d * n + j] as f64)
                .sum();
            c[i * n + j] = dot as f32;
        }
    }
}

/// `out` is `x` with every `chunk`-long piece reversed in place (the last piece may be shorter).
pub fn reverse_chunks(chunk: usize, x: &[f32], out: &mut [f32]) {
    for (out, x) in out.chunks_mut(chunk).zip(x.chunks(chunk)) {
        for (o, v) in out.iter_mut().zip(x.iter().rev()) {
            *o = *v;
        }
    }
}

/// Adds each value of `values` to its bin of `bins` as `atomics::histogram` sorts them: `[0, 1)`
/// in equal-width bins, values out of range (NaN included) in the first or last bin.
pub fn histogram(values: &[f32], bins: &mut [u32]) {
    let last = bins.len() - 1;
    for v in values {
        bins[((v * bins.len() as f32) as usize).min(last)] += 1;
    }
}

pub fn jacobi2d(width: u32, height: u32, input: &[f32], output: &mut [f32]) {
    let (w, h) = (width as usize, height as usize);
    for r in 0..h {
        for c in 0..w {
            let i = r * w + c;
            output[i] = if r == 0 || c == 0 || r + 1 == h || c + 1 == w {
                input[i]
            } else {
                0.25 * (input[i - 1] + input[i + 1] + input[i - w] + input[i + w])
            };
        }
    }
}
