//! The offload side of the benchmarks: each kernel as a user would write it, with the safe views
//! (`iter_mine`, `grid_stride`, sub-slices, `Grid2`/`Grid3` windows). `cuda/parity.cu` holds the
//! same algorithms in CUDA C, one thread per element. Built with FMA contraction on (build.rs),
//! as nvcc builds by default.
use core::ops::{Add, Mul, Sub};
use offload::prelude::*;

/// The element types of the benchmarks: f32 and f64.
pub trait Value:
    math::Real + DeviceCopy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    const ZERO: Self;
    const HALF: Self;
    const ONE: Self;
}
impl Value for f32 {
    const ZERO: Self = 0.0;
    const HALF: Self = 0.5;
    const ONE: Self = 1.0;
}
impl Value for f64 {
    const ZERO: Self = 0.0;
    const HALF: Self = 0.5;
    const ONE: Self = 1.0;
}

/// Constants of the equation-of-state update.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Eos<T: DeviceCopy> {
    pub emin: T,
    pub pmin: T,
    pub pcut: T,
    pub c1: T,
}

/// Multi-array element-wise physics update (the shape of LULESH's energy and pressure
/// evaluation): five inputs, two outputs, walked in 16-byte chunks (`#[wide]`): one vector load
/// per input and one vector store per output for every four f32 or two f64.
#[offload::kernel(instances(T = f32 | f64))]
pub fn eos<T: Value + WideElement>(
    k: Eos<T>,
    e_old: &[T],
    delv: &[T],
    p_old: &[T],
    q_old: &[T],
    compression: &[T],
    #[wide] e_new: &mut [T],
    #[wide] p_new: &mut [T],
) {
    e_new.map_mine_wide_with(
        &mut p_new,
        (e_old, delv, p_old, q_old, compression),
        |(e_old, delv, p_old, q_old, compression)| {
            let mut e = e_old - T::HALF * delv * (p_old + q_old);
            if e < k.emin {
                e = k.emin;
            }
            let mut p = k.c1 * (compression + T::ONE) * e;
            if math::abs(p) < k.pcut {
                p = T::ZERO;
            }
            if p < k.pmin {
                p = k.pmin;
            }
            (e, p)
        },
    );
}

/// Width of the windowed sum.
pub const WINDOW: usize = 8;

/// Windowed sum: `sums[i] = x[i] + … + x[i + WINDOW - 1]`, through a sub-slice (one bounds
/// check for the window).
///
/// `max_registers = 24`: uncapped, ptxas issues all eight loads of a window back to back in
/// every thread, and warps that each walk several elements fill the load queue (f64 ran 4 % over
/// nvcc's time on the H200); at 24 registers it issues six, starts adding, then issues the rest
/// (docs/PERFORMANCE.md, "Why the defaults are what they are").
#[offload::kernel(instances(T = f32 | f64), max_registers = 24)]
pub fn window_sum<T: Value>(x: &[T], sums: &mut [T]) {
    for (i, s) in sums.iter_mine() {
        *s = x[i..i + WINDOW].iter().fold(T::ZERO, |acc, &v| acc + v);
    }
}

/// Indirect gather: `out[i] = x[index[i]]`.
#[offload::kernel(instances(T = f32 | f64))]
pub fn gather<T: Value>(index: &[u32], x: &[T], out: &mut [T]) {
    for (i, o) in out.iter_mine() {
        *o = x[index[i] as usize];
    }
}

/// Indirect scatter: `out[index[i]] = x[i]`. `index` must hold no value twice (the benchmark's is
/// a permutation of `0..out.len()`): the launchers are `unsafe` with that contract.
#[offload::kernel(instances(T = f32 | f64))]
pub fn scatter<T: Value>(index: &[u32], x: &[T], #[scatter(index)] out: &mut [T]) {
    for (i, o) in out.iter_mine() {
        *o = x[i];
    }
}

/// Weights of the stencils: the centre, then the points at distance 1, √2 and √3.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Weights<T: DeviceCopy> {
    pub centre: T,
    pub face: T,
    pub edge: T,
    pub corner: T,
}

/// 5-point 2D stencil over an `nx × ny` grid; border points are copied.
#[offload::kernel(instances(T = f32 | f64))]
pub fn stencil2d<T: Value>(nx: u32, ny: u32, w: Weights<T>, input: &[T], output: &mut [T]) {
    let grid = Grid2::new(input, nx, ny);
    for (i, out) in output.iter_mine() {
        let interior = grid.around(i, |p| {
            w.centre * p.at(0, 0) + w.face * (p.at(-1, 0) + p.at(1, 0) + p.at(0, -1) + p.at(0, 1))
        });
        *out = interior.unwrap_or_else(|| grid.get(i));
    }
}

/// 7-point 3D stencil over an `nx × ny × nz` grid; border points are copied.
#[offload::kernel(instances(T = f32 | f64))]
pub fn stencil7<T: Value>(nx: u32, ny: u32, nz: u32, w: Weights<T>, input: &[T], output: &mut [T]) {
    let grid = Grid3::new(input, nx, ny, nz);
    for (i, out) in output.iter_mine() {
        let interior = grid.around(i, |p| {
            w.centre * p.at(0, 0, 0)
                + w.face
                    * (p.at(-1, 0, 0)
                        + p.at(1, 0, 0)
                        + p.at(0, -1, 0)
                        + p.at(0, 1, 0)
                        + p.at(0, 0, -1)
                        + p.at(0, 0, 1))
        });
        *out = interior.unwrap_or_else(|| grid.get(i));
    }
}

/// 27-point 3D stencil over an `nx × ny × nz` grid; border points are copied.
#[offload::kernel(instances(T = f32 | f64))]
pub fn stencil27<T: Value>(
    nx: u32,
    ny: u32,
    nz: u32,
    w: Weights<T>,
    input: &[T],
    output: &mut [T],
) {
    let grid = Grid3::new(input, nx, ny, nz);
    for (i, out) in output.iter_mine() {
        let interior = grid.around(i, |p| {
            let (mut face, mut edge, mut corner) = (T::ZERO, T::ZERO, T::ZERO);
            // Exclusive ranges: an inclusive one's extra state keeps LLVM from unrolling
            // the loops (the kernel ran 8-9x slower than CUDA C that way).
            for dz in -1..2isize {
                for dy in -1..2isize {
                    for dx in -1..2isize {
                        let v = p.at(dx, dy, dz);
                        match dx.abs() + dy.abs() + dz.abs() {
                            1 => face = face + v,
                            2 => edge = edge + v,
                            3 => corner = corner + v,
                            _ => {}
                        }
                    }
                }
            }
            w.centre * p.at(0, 0, 0) + w.face * face + w.edge * edge + w.corner * corner
        });
        *out = interior.unwrap_or_else(|| grid.get(i));
    }
}

/// 3D 8-corner gather: each of the `nx × ny × nz` cells gets the mean of its 8 corner nodes,
/// which form an `(nx + 1) × (ny + 1) × (nz + 1)` grid.
#[offload::kernel(instances(T = f32 | f64))]
pub fn corners<T: Value>(nx: u32, ny: u32, nz: u32, nodes: &[T], cells: &mut [T]) {
    let nodes = Grid3::new(nodes, nx + 1, ny + 1, nz + 1);
    for (c, out) in cells.iter_mine() {
        let c = c as u32;
        let (x, y, z) = (c % nx, c / nx % ny, c / (nx * ny));
        let corner = (x as usize, y as usize, z as usize);
        let mean = nodes.window_at(corner, 0, 1, |p| {
            let sum = p.at(0, 0, 0)
                + p.at(1, 0, 0)
                + p.at(0, 1, 0)
                + p.at(1, 1, 0)
                + p.at(0, 0, 1)
                + p.at(1, 0, 1)
                + p.at(0, 1, 1)
                + p.at(1, 1, 1);
            T::HALF * T::HALF * T::HALF * sum
        });
        // Every cell's corners are nodes: the window exists.
        if let Some(mean) = mean {
            *out = mean;
        }
    }
}

/// Points per direction of a spectral element.
pub const P: usize = 8;

/// Small tensor contraction with 3D blocks (the shape of Nekbone's operator): for each element
/// of `P³` points, `w = (D ⊗ I ⊗ I + I ⊗ D ⊗ I + I ⊗ I ⊗ D) u`, one thread per point, a block of
/// `P × P × P` threads per element.
#[offload::kernel(instances(T = f32 | f64))]
pub fn contract<T: Value>(d: &[T], u: &[T], w: &mut [T]) {
    let d: &[T; P * P] = d[..P * P].try_into().unwrap();
    for (g, out) in w.iter_mine() {
        let (e, ijk) = (g / (P * P * P), g % (P * P * P));
        let (i, j, k) = (ijk / (P * P), ijk / P % P, ijk % P);
        let ue: &[T; P * P * P] = u[e * P * P * P..][..P * P * P].try_into().unwrap();
        let mut s = T::ZERO;
        for l in 0..P {
            s = s
                + d[i * P + l] * ue[(l * P + j) * P + k]
                + d[j * P + l] * ue[(i * P + l) * P + k]
                + d[k * P + l] * ue[(i * P + j) * P + l];
        }
        *out = s;
    }
}

/// Shared-memory element assembly on a chain of 1D elements: element `e` joins nodes `e` and
/// `e + 1` with stiffness `k[e]`; node `n` gets `f[n - 1] - f[n]` with the element fluxes
/// `f[e] = k[e] (u[e + 1] - u[e])`. Each block computes the fluxes of its tile of nodes once,
/// into shared memory (tile + 1 values: `Launch::dynamic_shared`), then assembles. Tile starts
/// and nodes count in 32 bits, as CUDA C's `int`s (`tile_starts` checks once that they fit).
#[offload::kernel(instances(T = f32 | f64))]
pub fn assemble<T: Value>(k: &[T], u: &[T], r: &mut [T]) {
    // Slot 0 of a thread's window holds the flux of the element before its node, slot 1 the
    // next one's (the next thread's slot, or for the last thread the extra slot).
    let flux = dynamic_shared::<T>().thread_window::<1>();
    let n = r.len().min(u.len());
    let f = |e: usize| {
        // Element e lies between nodes e and e + 1; elements outside the chain carry nothing.
        if e + 1 < n && e < k.len() {
            k[e] * (u[e + 1] - u[e])
        } else {
            T::ZERO
        }
    };
    let last = block_dim().x - 1;
    let t = thread_idx().x;
    for first in tile_starts(n) {
        let node = first + t;
        flux.write_mine(if node == 0 {
            T::ZERO
        } else {
            f(node as usize - 1)
        });
        if t == last {
            // SAFETY: the slot after the last thread's is written by this thread alone before
            // the barrier.
            unsafe { flux.write(1, f(node as usize)) };
        }
        sync_threads();
        if (node as usize) < n {
            // SAFETY: node belongs to this block's tile and thread alone; the slots read were
            // written before the barrier and are not written until the next one.
            unsafe { *r.at(node as usize) = flux.read(0) - flux.read(1) };
        }
        sync_threads();
    }
}
