//! The problem sizes and inputs of the benchmarks, the same for offload, CUDA C and the CPU
//! references.

use crate::kernels::{Eos, Value, Weights, P};

/// Sizes of one run of every benchmark.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Elements of the 1D kernels (eos, window_sum, gather, scatter, assemble).
    pub n: usize,
    /// The 2D grid.
    pub grid2: (u32, u32),
    /// The 3D grid (cells of `corners`).
    pub grid3: (u32, u32, u32),
    /// Spectral elements of `contract`, `P³` points each.
    pub elements: usize,
}

impl Sizes {
    /// Large enough to stream from device memory (each array far beyond the 50 MB L2 of an H200).
    pub const GPU: Sizes = Sizes {
        n: 1 << 25,
        grid2: (8192, 4096),
        grid3: (320, 320, 320),
        elements: (1 << 25) / (P * P * P),
    };

    /// For the tests.
    pub const SMALL: Sizes = Sizes {
        n: 3000,
        grid2: (61, 37),
        grid3: (13, 11, 9),
        elements: 5,
    };
}

/// Deterministic pseudo-random numbers in `[lo, hi)` (a 64-bit linear congruential generator:
/// fast enough for hundreds of millions of values, and no dependency).
pub fn values<T: Value + From<f32>>(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (s >> 40) as f32 / (1u64 << 24) as f32;
            T::from(lo + (hi - lo) * unit)
        })
        .collect()
}

/// A permutation of `0..n` that shuffles within consecutive blocks of `block` indices: the
/// locality of an unstructured mesh's numbering, not a uniformly random one.
pub fn local_permutation(n: usize, block: usize, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n as u32).collect();
    let mut s = seed | 1;
    for chunk in p.chunks_mut(block) {
        for i in (1..chunk.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            chunk.swap(i, (s % (i as u64 + 1)) as usize);
        }
    }
    p
}

/// The equation-of-state constants: clamps that some of the random inputs hit.
pub fn eos_constants<T: Value + From<f32>>() -> Eos<T> {
    Eos {
        emin: T::from(-0.5),
        pmin: T::from(-0.25),
        pcut: T::from(1e-3),
        c1: T::from(0.75),
    }
}

/// Stencil weights.
pub fn weights<T: Value + From<f32>>() -> Weights<T> {
    Weights {
        centre: T::from(0.5),
        face: T::from(0.0625),
        edge: T::from(0.03125),
        corner: T::from(0.015625),
    }
}
