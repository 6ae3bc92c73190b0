//! The kernels of one rank's block of rows (compiled for the GPU too). A block is row-major,
//! `width` columns, and holds one row above and one below its own rows (the halos, or the
//! fixed boundary at the grid's edges).
//!
//! - [`jacobi_rows`]: a Jacobi sweep of some of a block's rows, so that the rows next to the
//!   halos are swept apart from the others (which run while the halos move).
//! - [`laplacian_dot`], the operator of the conjugate-gradient solver (`cg_mpi`) on one slab of
//!   a block, halo rows included; its other kernels are `examples/ecosystem`'s, launched on each
//!   slab (`offload_ecosystem_examples::kernels::cg`).

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
