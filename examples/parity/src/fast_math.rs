//! Compute-bound kernels built with fast math (`#[offload::kernel(fast_math)]`), as CUDA C codes
//! of this kind are built with `nvcc -use_fast_math`: an n-body force sum (a reciprocal square
//! root per pair) and a pair energy (a square root, a sine, a cosine and a division per pair).
//! `cuda/fast_math.cu` holds the same algorithms in CUDA C; `approximations` runs each function
//! of `offload::math::fast` for the tests of its error bounds.
//!
//! Each kernel checks once, before its loop, that every body has an output: the bounds check
//! of `bodies[i]` then goes, and with it the panic call inside the grid-stride loop, around
//! which ptxas keeps the memory descriptor in general registers and moves it back before every
//! load (`R2UR`; docs/PERFORMANCE.md, fast math).
use offload::prelude::*;

/// A body: position and mass (a CUDA `float4`, aligned alike: one 16-byte load).
#[derive(Clone, Copy, Debug, Default, DeviceCopy, PartialEq)]
#[repr(C, align(16))]
pub struct Body {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub m: f32,
}

/// An acceleration (a CUDA `float4`, the last lane unused).
#[derive(Clone, Copy, Debug, Default, DeviceCopy, PartialEq)]
#[repr(C, align(16))]
pub struct Accel {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub w: f32,
}

/// Gravitational acceleration of every body from all bodies, softened:
/// `a_i = Σ_j m_j (p_j − p_i) / (|p_j − p_i|² + ε²)^{3/2}`.
#[offload::kernel(fast_math)]
pub fn nbody_forces(softening2: f32, bodies: &[Body], accel: &mut [Accel]) {
    assert_eq!(bodies.len(), accel.len());
    for (i, a) in accel.iter_mine() {
        let p = bodies[i];
        let (mut ax, mut ay, mut az) = (0.0f32, 0.0f32, 0.0f32);
        for q in bodies {
            let (dx, dy, dz) = (q.x - p.x, q.y - p.y, q.z - p.z);
            let inv = math::rsqrt(dx * dx + dy * dy + dz * dz + softening2);
            let s = q.m * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        *a = Accel {
            x: ax,
            y: ay,
            z: az,
            w: 0.0,
        };
    }
}

/// An oscillating pair energy of every body:
/// `e_i = m_i Σ_j m_j (cos κr + ½ sin κr) / r`, `r = (|p_j − p_i|² + ε²)^{1/2}`.
///
/// The bodies go in groups of four, each group's four loads before its arithmetic, as nvcc's
/// unrolled loop has them: over the plain slice, LLVM unrolls by two and ptxas by four more,
/// with the loads spread among the arithmetic (docs/PERFORMANCE.md, fast math).
#[offload::kernel(fast_math)]
pub fn pair_energy(softening2: f32, kappa: f32, bodies: &[Body], energy: &mut [f32]) {
    assert_eq!(bodies.len(), energy.len());
    for (i, e) in energy.iter_mine() {
        let p = bodies[i];
        let term = |q: &Body| {
            let (dx, dy, dz) = (q.x - p.x, q.y - p.y, q.z - p.z);
            let r = math::sqrt(dx * dx + dy * dy + dz * dz + softening2);
            let phase = kappa * r;
            q.m * (math::cos(phase) + 0.5 * math::sin(phase)) / r
        };
        let (groups, rest) = bodies.as_chunks::<4>();
        let mut sum = 0.0f32;
        for group in groups {
            let [a, b, c, d] = *group;
            sum += term(&a);
            sum += term(&b);
            sum += term(&c);
            sum += term(&d);
        }
        for q in rest {
            sum += term(q);
        }
        *e = p.m * sum;
    }
}

/// `pair_energy`'s sum without `fast_math`, over the plain slice: libm's sine and cosine, IEEE
/// square root and division, no flush to zero (the benchmark reports its registers, stack and
/// occupancy beside the fast one's).
#[offload::kernel]
pub fn pair_energy_exact(softening2: f32, kappa: f32, bodies: &[Body], energy: &mut [f32]) {
    assert_eq!(bodies.len(), energy.len());
    for (i, e) in energy.iter_mine() {
        let p = bodies[i];
        let mut sum = 0.0f32;
        for q in bodies {
            let (dx, dy, dz) = (q.x - p.x, q.y - p.y, q.z - p.z);
            let r = math::sqrt(dx * dx + dy * dy + dz * dz + softening2);
            let phase = kappa * r;
            sum += q.m * (math::cos(phase) + 0.5 * math::sin(phase)) / r;
        }
        *e = p.m * sum;
    }
}

/// The functions `approximations` runs, in the order of its output blocks.
pub const FUNCTIONS: [&str; 9] = [
    "sin",
    "cos",
    "exp",
    "ln",
    "sqrt",
    "rsqrt",
    "div",
    "x / d",
    "offload::math::sqrt",
];

/// `out[k] = F(x[k], d[k])` with `F = FUNCTIONS[k / n]` (`n = out.len() / FUNCTIONS.len()`):
/// `math` here is `offload::math::fast`; `x / d` and the full path `offload::math::sqrt` (not
/// shadowed) are approximated by the device build's fast-math flags.
#[offload::kernel(fast_math)]
pub fn approximations(x: &[f32], d: &[f32], out: &mut [f32]) {
    let n = out.len() / FUNCTIONS.len();
    for (k, o) in out.iter_mine() {
        let (x, d) = (x[k], d[k]);
        *o = match k / n {
            0 => math::sin(x),
            1 => math::cos(x),
            2 => math::exp(x),
            3 => math::ln(x),
            4 => math::sqrt(x),
            5 => math::rsqrt(x),
            6 => math::div(x, d),
            7 => x / d,
            _ => offload::math::sqrt(x),
        };
    }
}
