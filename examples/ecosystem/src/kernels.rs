//! The kernels of the conjugate-gradient solvers: with `#[reduce]` dot products and norms
//! (`cg`), and the operator and scalar steps between the cuBLAS variant's calls (here); and
//! kernels on ndarray views (`arrays`). Compiled for the GPU too (`no_std`-compatible).

pub mod arrays;
pub mod cg;

/// `(A p)[i]`, A the 5-point Laplacian (4 on the diagonal, -1 for each neighbour) on an `n × n`
/// grid of unknowns, row-major, with zero values outside the grid (Dirichlet boundary): the one
/// definition of A, for the kernels that apply it and for the CPU reference (`cg::apply`). The
/// row and column are divided out in 32 bits (a GPU divides 64-bit integers slowly), so
/// `n * n` is at most 2^32.
#[inline]
pub fn laplacian_at(n: usize, p: &[f64], i: usize) -> f64 {
    let (row, col) = (
        (i as u32 / n as u32) as usize,
        (i as u32 % n as u32) as usize,
    );
    let mut sum = 4.0 * p[i];
    if col > 0 {
        sum -= p[i - 1];
    }
    if col + 1 < n {
        sum -= p[i + 1];
    }
    if row > 0 {
        sum -= p[i - n];
    }
    if row + 1 < n {
        sum -= p[i + n];
    }
    sum
}

/// `ap = A p` ([`laplacian_at`] for every element).
#[offload::kernel]
pub fn laplacian(n: u32, p: &[f64], ap: &mut [f64]) {
    for (i, out) in ap.iter_mine() {
        *out = laplacian_at(n as usize, p, i);
    }
}

/// `alpha = [rr / pap, -(rr / pap)]`: CG's step length and its negative, for two cuBLAS axpys.
#[offload::kernel]
pub fn step_length(rr: &[f64], pap: &[f64], alpha: &mut [f64]) {
    for (i, a) in alpha.iter_mine() {
        let step = rr[0] / pap[0];
        *a = if i == 0 { step } else { -step };
    }
}

/// `p = r + (rr_new / rr) p`: CG's next search direction.
#[offload::kernel]
pub fn next_direction(rr_new: &[f64], rr: &[f64], r: &[f64], p: &mut [f64]) {
    let beta = rr_new[0] / rr[0];
    for (i, p) in p.iter_mine() {
        *p = r[i] + beta * *p;
    }
}
