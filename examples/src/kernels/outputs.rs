//! Loops over several outputs and inputs: ownership loops over a tuple of outputs
//! (`(&mut a, &mut b, …).iter_mine()`), and 16-byte walks with several inputs
//! (`y.update_mine_wide((a, b, c), …)`) and several outputs (`(&mut a, &mut b, …).map_mine_wide`).
//! Each thread owns index `i` of every output by one rule, `iter_mine`'s (or, for `#[wide]`
//! outputs, the first output's chunks and ends), below the shortest output's length.
use offload::prelude::*;

/// Three outputs of different element types, one element at a time:
/// `a[i] = x[i] + 1`, `b[i] = x[i] * 3` (as u64), `c[i] = i` (as u8), below the shortest length.
#[offload::kernel]
pub fn three_outputs(x: &[u32], a: &mut [u32], b: &mut [u64], c: &mut [u8]) {
    for (i, (a, b, c)) in (&mut a, &mut b, &mut c).iter_mine() {
        *a = x[i].wrapping_add(1);
        *b = x[i] as u64 * 3;
        *c = i as u8;
    }
}

/// Four outputs read and written, through views of one offset:
/// `(a, b, c, d)[i] = (a + b, b - c, c ^ d, d + i)` on `start..` of each.
#[offload::kernel]
pub fn four_outputs(start: u32, a: &mut [i32], b: &mut [i32], c: &mut [i32], d: &mut [i32]) {
    let s = start as usize;
    let views = (
        &mut a.slice(s..),
        &mut b.slice(s..),
        &mut c.slice(s..),
        &mut d.slice(s..),
    );
    for (i, (a, b, c, d)) in views.iter_mine() {
        (*a, *b, *c, *d) = (
            a.wrapping_add(*b),
            b.wrapping_sub(*c),
            *c ^ *d,
            d.wrapping_add(i as i32),
        );
    }
}

/// `y[i] += b[i] + s * c[i] - d[i]`: a 16-byte update with three inputs.
#[offload::kernel]
pub fn update_three_inputs(s: f32, b: &[f32], c: &[f32], d: &[f32], #[wide] y: &mut [f32]) {
    y.update_mine_wide((b, c, d), |y, (b, c, d)| y + b + s * c - d);
}

/// Three `#[wide]` byte outputs from two inputs in one walk (bytes: the finest cut, 16 per
/// chunk): `p = x + y`, `q = x ^ y`, `r = x - y`, wrapping (no
/// multiply, as below).
#[offload::kernel]
pub fn map_three_outputs(
    x: &[u8],
    y: &[u8],
    #[wide] p: &mut [u8],
    #[wide] q: &mut [u8],
    #[wide] r: &mut [u8],
) {
    (&mut p, &mut q, &mut r).map_mine_wide((x, y), |(x, y)| {
        (x.wrapping_add(y), x ^ y, x.wrapping_sub(y))
    });
}

/// Two `#[wide]` outputs updated from three inputs: `p += x ^ y`, `q = (q ^ z) + 1`, wrapping
/// (bytes: no multiply, whose widened vectors LLVM 22's SPIR-V backend cannot lower).
#[offload::kernel]
pub fn update_two_outputs(
    x: &[u8],
    y: &[u8],
    z: &[u8],
    #[wide] p: &mut [u8],
    #[wide] q: &mut [u8],
) {
    (&mut p, &mut q).update_mine_wide((x, y, z), |(p, q), (x, y, z)| {
        (p.wrapping_add(x ^ y), (q ^ z).wrapping_add(1))
    });
}
