//! Plain CPU loops computing what each kernel computes, in the same order of operations, so the
//! host backend (which keeps Rust's separate roundings) matches them bit for bit.

use crate::kernels::{Eos, Value, Weights, P, WINDOW};

pub fn eos<T: Value>(k: Eos<T>, inputs: [&[T]; 5], e_new: &mut [T], p_new: &mut [T]) {
    let [e_old, delv, p_old, q_old, compression] = inputs;
    for i in 0..e_new.len() {
        let mut e = e_old[i] - T::HALF * delv[i] * (p_old[i] + q_old[i]);
        if e < k.emin {
            e = k.emin;
        }
        let mut p = k.c1 * (compression[i] + T::ONE) * e;
        if offload::math::abs(p) < k.pcut {
            p = T::ZERO;
        }
        if p < k.pmin {
            p = k.pmin;
        }
        e_new[i] = e;
        p_new[i] = p;
    }
}

pub fn window_sum<T: Value>(x: &[T], sums: &mut [T]) {
    for (i, s) in sums.iter_mut().enumerate() {
        *s = x[i..i + WINDOW].iter().fold(T::ZERO, |a, &v| a + v);
    }
}

pub fn gather<T: Value>(index: &[u32], x: &[T], out: &mut [T]) {
    for (o, &j) in out.iter_mut().zip(index) {
        *o = x[j as usize];
    }
}

pub fn scatter<T: Value>(index: &[u32], x: &[T], out: &mut [T]) {
    for (&j, &v) in index.iter().zip(x) {
        out[j as usize] = v;
    }
}

pub fn stencil2d<T: Value>(nx: u32, ny: u32, w: Weights<T>, input: &[T], output: &mut [T]) {
    let (nx, ny) = (nx as usize, ny as usize);
    for y in 0..ny {
        for x in 0..nx {
            let i = y * nx + x;
            output[i] = if x == 0 || y == 0 || x == nx - 1 || y == ny - 1 {
                input[i]
            } else {
                w.centre * input[i]
                    + w.face * (input[i - 1] + input[i + 1] + input[i - nx] + input[i + nx])
            };
        }
    }
}

/// The 7-point (`full == false`) or 27-point stencil.
pub fn stencil3d<T: Value>(
    (nx, ny, nz): (u32, u32, u32),
    full: bool,
    w: Weights<T>,
    input: &[T],
    output: &mut [T],
) {
    let (nx, ny, nz) = (nx as isize, ny as isize, nz as isize);
    let at = |x: isize, y: isize, z: isize| input[((z * ny + y) * nx + x) as usize];
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let i = ((z * ny + y) * nx + x) as usize;
                let border =
                    x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1;
                output[i] = if border {
                    input[i]
                } else if !full {
                    w.centre * input[i]
                        + w.face
                            * (at(x - 1, y, z)
                                + at(x + 1, y, z)
                                + at(x, y - 1, z)
                                + at(x, y + 1, z)
                                + at(x, y, z - 1)
                                + at(x, y, z + 1))
                } else {
                    let mut sums = [T::ZERO; 4];
                    for dz in -1..=1isize {
                        for dy in -1..=1isize {
                            for dx in -1..=1isize {
                                let d = (dx.abs() + dy.abs() + dz.abs()) as usize;
                                if d > 0 {
                                    sums[d] = sums[d] + at(x + dx, y + dy, z + dz);
                                }
                            }
                        }
                    }
                    w.centre * input[i] + w.face * sums[1] + w.edge * sums[2] + w.corner * sums[3]
                };
            }
        }
    }
}

pub fn corners<T: Value>((nx, ny, nz): (u32, u32, u32), nodes: &[T], cells: &mut [T]) {
    let (nx, ny, nz) = (nx as usize, ny as usize, nz as usize);
    let at = |x: usize, y: usize, z: usize| nodes[(z * (ny + 1) + y) * (nx + 1) + x];
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let sum = at(x, y, z)
                    + at(x + 1, y, z)
                    + at(x, y + 1, z)
                    + at(x + 1, y + 1, z)
                    + at(x, y, z + 1)
                    + at(x + 1, y, z + 1)
                    + at(x, y + 1, z + 1)
                    + at(x + 1, y + 1, z + 1);
                cells[(z * ny + y) * nx + x] = T::HALF * T::HALF * T::HALF * sum;
            }
        }
    }
}

pub fn contract<T: Value>(d: &[T], u: &[T], w: &mut [T]) {
    const N: usize = P * P * P;
    for (ue, we) in u.chunks_exact(N).zip(w.chunks_exact_mut(N)) {
        for i in 0..P {
            for j in 0..P {
                for k in 0..P {
                    let mut s = T::ZERO;
                    for l in 0..P {
                        s = s
                            + d[i * P + l] * ue[(l * P + j) * P + k]
                            + d[j * P + l] * ue[(i * P + l) * P + k]
                            + d[k * P + l] * ue[(i * P + j) * P + l];
                    }
                    we[(i * P + j) * P + k] = s;
                }
            }
        }
    }
}

pub fn assemble<T: Value>(k: &[T], u: &[T], r: &mut [T]) {
    let n = r.len();
    let flux = |e: usize| {
        if e + 1 < n {
            k[e] * (u[e + 1] - u[e])
        } else {
            T::ZERO
        }
    };
    for (node, out) in r.iter_mut().enumerate() {
        let left = if node == 0 { T::ZERO } else { flux(node - 1) };
        *out = left - flux(node);
    }
}
