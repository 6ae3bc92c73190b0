//! CPU references for the tensor-core kernels (`kernels::tensor`, `gemm_bf16`, `sgemm_tf32`,
//! `dgemm`).
use offload::half::bf16;

/// `c + Σ_k a_k·b_k` in the order `offload::mma` documents for the host backend: `k` ascending,
/// one fused multiply-add rounded to nearest-even per term.
pub fn mma_chain_f32(c: f32, terms: impl Iterator<Item = (f32, f32)>) -> f32 {
    terms.fold(c, |acc, (a, b)| a.mul_add(b, acc))
}

/// The same in `f64`.
pub fn mma_chain_f64(c: f64, terms: impl Iterator<Item = (f64, f64)>) -> f64 {
    terms.fold(c, |acc, (a, b)| a.mul_add(b, acc))
}

/// Entry `(i, j)` of `A · B` (`A` row-major `m × k` read through `a(i, k)`, `B` through
/// `b(k, j)`) in `f64`, and `Σ_k |a·b|`, the scale its rounding errors are measured against.
pub fn entry_f64(k: usize, a: impl Fn(usize) -> f64, b: impl Fn(usize) -> f64) -> (f64, f64) {
    (0..k).fold((0.0, 0.0), |(sum, scale), d| {
        let p = a(d) * b(d);
        (sum + p, scale + p.abs())
    })
}

/// Entry `(i, j)` of `A · B` for row-major `f32` matrices `a` (`m × k`) and `b` (`k × n`).
pub fn sgemm_entry(a: &[f32], b: &[f32], n: usize, k: usize, i: usize, j: usize) -> (f64, f64) {
    entry_f64(k, |d| a[i * k + d] as f64, |d| b[d * n + j] as f64)
}

/// Entry `(i, j)` of `A · Wᵀ + bias` for row-major `a` (`m × k`) and `w` (`n × k`), before the
/// activation.
pub fn linear_entry(
    a: &[bf16],
    w: &[bf16],
    bias: &[f32],
    k: usize,
    i: usize,
    j: usize,
) -> (f64, f64) {
    let (sum, scale) = entry_f64(k, |d| a[i * k + d].to_f64(), |d| w[j * k + d].to_f64());
    let b = bias.get(j).map_or(0.0, |&b| b as f64);
    (sum + b, scale + b.abs())
}

/// The `f64` GELU (tanh approximation) that `gemm_bf16`'s `ACT_GELU` computes in `f32`.
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh())
}

/// Deterministic pseudo-random values in `[-1, 1)`, different for every seed (xorshift).
pub fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// [`uniform`] times `scale`, rounded to `bf16`.
pub fn uniform_bf16(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    uniform(n, seed)
        .into_iter()
        .map(|v| bf16::from_f32(v * scale))
        .collect()
}

/// Deterministic pseudo-random `f64` values in `[-1, 1)` with all 53 significant bits in use:
/// two [`uniform`] streams, the second scaled below the first's last bit.
pub fn uniform_f64(n: usize, seed: u64) -> Vec<f64> {
    let (hi, lo) = (uniform(n, seed), uniform(n, seed ^ 0x5DEE_CE66));
    hi.iter()
        .zip(lo)
        .map(|(&h, l)| h as f64 + l as f64 * 2f64.powi(-24))
        .collect()
}

/// `C = A · B` for row-major `f64` matrices `a` (`m × k`) and `b` (`k × n`), by plain loops in
/// `f64` (one rounding per product and per sum).
pub fn dgemm_cpu(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for d in 0..k {
            let x = a[i * k + d];
            for (cj, bj) in row.iter_mut().zip(&b[d * n..(d + 1) * n]) {
                *cj += x * bj;
            }
        }
    }
    c
}

/// `‖got − want‖ / ‖want‖` in the Frobenius norm (0 when both are zero).
pub fn normwise_error(got: &[f64], want: &[f64]) -> f64 {
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}
