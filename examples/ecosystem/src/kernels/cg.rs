//! The kernels of the reductions-based conjugate-gradient solver (`cg::solve_on`): three launches
//! an iteration, every dot product and norm a `#[reduce(sum)]` fused into the kernel that
//! computes its operands, the scalar steps read from device memory by the kernels that use them.
//! Nothing here needs a vendor library, so the solver runs on every device.
//!
//! One iteration, with `rr`, `pap` and `rr_new` one-element device scalars:
//! 1. [`laplacian_dot`]: `ap = A p`, `pap += p·ap`;
//! 2. [`update_residual`]: `alpha = rr / pap`, `x += alpha p`, `r -= alpha ap`, `rr_new += r·r`;
//! 3. [`next_direction_reset`]: `p = r + (rr_new / rr) p`, and the next iteration's
//!    accumulators (`pap` and the next `rr_new`) back to zero, since a reduction folds its total
//!    into what its target holds.
//!
//! The scalars the kernels read are partial sums, added up in order ([`total`]): one on one
//! device; one per slab of the grid in `examples/mpi`'s CG across MPI ranks, which uses these
//! kernels on each slab.

use offload::prelude::*;

/// `ap = A p` (the 5-point Laplacian of [`super::laplacian_at`]) and `*pap += Σ p[i]·ap[i]`.
#[offload::kernel]
pub fn laplacian_dot(n: u32, p: &[f64], ap: &mut [f64], #[reduce(sum)] pap: &mut f64) {
    for (i, out) in ap.iter_mine() {
        let sum = super::laplacian_at(n as usize, p, i);
        *out = sum;
        *pap += p[i] * sum;
    }
}

/// The sum of `parts` in order, from `0.0` (one part: that part): a dot product from its
/// partial sums (on the host too, where a solver reads a residual).
#[inline]
pub fn total(parts: &[f64]) -> f64 {
    let mut sum = 0.0;
    for part in parts {
        sum += *part;
    }
    sum
}

/// CG's step: `alpha = Σrr / Σpap` ([`total`]), `x += alpha p`, `r += -alpha ap`, and
/// `*rr_new += Σ r[i]²` of the new `r` (the residual update fused with its norm).
#[offload::kernel]
pub fn update_residual(
    rr: &[f64],
    pap: &[f64],
    p: &[f64],
    ap: &[f64],
    x: &mut [f64],
    r: &mut [f64],
    #[reduce(sum)] rr_new: &mut f64,
) {
    let step = total(rr) / total(pap);
    for (i, x, r) in x.iter_mine_with(&mut r) {
        *x += step * p[i];
        *r += -step * ap[i];
        *rr_new += *r * *r;
    }
}

/// `p = r + (Σrr_new / Σrr) p`: CG's next search direction; and every element of `pap` and
/// `rr_next` back to zero, the targets of the next iteration's two reductions.
#[offload::kernel]
pub fn next_direction_reset(
    rr_new: &[f64],
    rr: &[f64],
    r: &[f64],
    p: &mut [f64],
    pap: &mut [f64],
    rr_next: &mut [f64],
) {
    let beta = total(rr_new) / total(rr);
    for (i, p) in p.iter_mine() {
        *p = r[i] + beta * *p;
    }
    for (_, v) in pap.iter_mine() {
        *v = 0.0;
    }
    for (_, v) in rr_next.iter_mine() {
        *v = 0.0;
    }
}

/// `*sum += Σ x[i]²`: `|b|²` (or a slab's part of it), once before the iterations.
#[offload::kernel]
pub fn norm2(x: &[f64], #[reduce(sum)] sum: &mut f64) {
    for_each_mine_wide(x, |_, x| *sum += x * x);
}
