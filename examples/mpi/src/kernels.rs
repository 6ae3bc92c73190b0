//! The kernels of one rank's block of rows (compiled for the GPU too). A block is row-major,
//! `width` columns, and holds one row above and one below its own rows (the halos, or the
//! fixed boundary at the grid's edges).
//!
//! - [`jacobi_rows`]: a Jacobi sweep of some of a block's rows, so that the rows next to the
//!   halos are swept apart from the others (which run while the halos move).
//! - The conjugate-gradient solver's (`cg_mpi`): the grid's rows are cut into a fixed number of
//!   slabs, whatever the number of ranks; each dot product is one `#[reduce(sum)]` per slab
//!   into the slab's own element of a vector of partial sums, which the ranks all-reduce and
//!   every kernel sums in slab order ([`total`]): the same bits on any number of ranks.

use offload::prelude::*;

/// `output` = rows `first..` of the Jacobi sweep of `input`, a block of `width` columns: each
/// point the mean of its four neighbours, the first and last columns kept (as
/// `offload_examples`' `jacobi2d`, with its arithmetic). `output` is a view of whole rows, none
/// of them the block's first or last.
#[offload::kernel]
pub fn jacobi_rows(width: u32, first: u32, input: &[f32], output: &mut [f32]) {
    let w = width as usize;
    for (i, out) in output.iter_mine() {
        // 32-bit row and column: 64-bit division is emulated on GPUs.
        let (row, col) = (i as u32 / width + first, i as u32 % width);
        let j = row as usize * w + col as usize;
        *out = if col == 0 || col + 1 == width {
            input[j]
        } else {
            0.25 * (input[j - 1] + input[j + 1] + input[j - w] + input[j + w])
        };
    }
}

/// The sum of `parts` in order, from `0.0`: a dot product from its slabs' partial sums (on the
/// host too, where a rank reads a residual).
#[inline]
pub fn total(parts: &[f64]) -> f64 {
    let mut sum = 0.0;
    for part in parts {
        sum += *part;
    }
    sum
}

/// `ap = A p` on one slab (A the 5-point Laplacian of an `n`-wide grid, zero outside it) and
/// `*pap += p·ap` over it. `p` is the slab's rows with the row above and the row below (zeros
/// beyond the grid); `ap` the slab's rows.
#[offload::kernel]
pub fn laplacian_dot(n: u32, p: &[f64], ap: &mut [f64], #[reduce(sum)] pap: &mut f64) {
    let w = n as usize;
    for (i, out) in ap.iter_mine() {
        let (j, col) = (i + w, i as u32 % n);
        let mut sum = 4.0 * p[j] - p[j - w] - p[j + w];
        if col > 0 {
            sum -= p[j - 1];
        }
        if col + 1 < n {
            sum -= p[j + 1];
        }
        *out = sum;
        *pap += p[j] * sum;
    }
}

/// CG's step on one slab: `alpha = Σrr / Σpap` (the partial sums of every slab), `x += alpha p`,
/// `r -= alpha ap`, and `*rr_new += r·r` of the new `r`.
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

/// `p = r + (Σrr_new / Σrr) p` over a rank's rows, and every partial sum of `pap` and
/// `rr_next` back to zero: the next iteration's reduction targets (a reduction adds to what
/// its target holds, and the all-reduce adds the ranks' vectors).
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

/// `*sum += Σ x[i]²` over one slab: `|b|²`'s partial sum.
#[offload::kernel]
pub fn norm2(x: &[f64], #[reduce(sum)] sum: &mut f64) {
    for_each_mine_wide(x, |_, x| *sum += x * x);
}
