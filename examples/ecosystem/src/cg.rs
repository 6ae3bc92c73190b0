//! Conjugate gradient for the 2D Poisson problem `A x = b` (A the 5-point Laplacian on an
//! `n × n` grid, zero boundary), three ways:
//! - [`solve_on`]: on any device (a GPU through CUDA, liboffload or OpenCL, or the host
//!   backend), with offload's kernels alone: the dot products and norms are `#[reduce(sum)]`
//!   parameters fused into the kernels that compute their operands (`kernels::cg`), three
//!   launches an iteration queued on one stream, the vectors and scalars in device memory, the
//!   step lengths divided out on the device. The host reads one residual every `check_every`
//!   iterations and nothing else.
//! - `solve_cublas` (feature `cublas`, on by default; libcublas is loaded at run time): offload's
//!   kernels apply A and compute the scalar steps while cuBLAS does the dot products and axpys,
//!   on the same stream and device data; on a GPU only through the CUDA plugin (and on the host
//!   backend through `offload::blas`'s host loops).
//! - [`solve_cpu`]: the same algorithm in plain loops, the reference.

use crate::kernels;
#[cfg(feature = "cublas")]
use offload::blas::Blas;
use offload::{BackendKind, Device, DeviceSlice, Launch, Stream};
use std::convert::Infallible;
use std::time::{Duration, Instant};

/// What to solve and when to stop.
#[derive(Clone, Copy, Debug)]
pub struct Problem {
    /// Unknowns per grid side (`n * n` in all).
    pub n: usize,
    /// Stop once `|r| / |b|` is below this.
    pub tolerance: f64,
    /// Stop after this many iterations at the latest.
    pub max_iterations: usize,
    /// Read the residual every this many iterations (each read waits for the device).
    pub check_every: usize,
}

/// A solve's outcome.
#[derive(Clone, Debug)]
pub struct Solution {
    pub x: Vec<f64>,
    pub iterations: usize,
    /// `|r| / |b|` as the solver's recurrence computed it at the last check.
    pub residual: f64,
    /// The iterations' time (after the setup: uploads, `|b|`, the cuBLAS handle), up to and
    /// including the last residual read.
    pub solve_time: Duration,
}

/// The right-hand side used by the example: a point source off centre plus a constant load.
pub fn right_hand_side(n: usize) -> Vec<f64> {
    let mut b = vec![1.0 / (n * n) as f64; n * n];
    b[(n / 3) * n + n / 4] += 1.0;
    b
}

/// `out = A p` on the CPU, with the kernels' arithmetic ([`kernels::laplacian_at`]).
pub fn apply(n: usize, p: &[f64], out: &mut [f64]) {
    for (i, out) in out.iter_mut().enumerate() {
        *out = kernels::laplacian_at(n, p, i);
    }
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// `|b - A x| / |b|`, computed from scratch on the CPU.
pub fn true_residual(n: usize, b: &[f64], x: &[f64]) -> f64 {
    let mut ax = vec![0.0; n * n];
    apply(n, x, &mut ax);
    let r: Vec<f64> = b.iter().zip(&ax).map(|(b, ax)| b - ax).collect();
    (dot(&r, &r) / dot(b, b)).sqrt()
}

/// CG on `device` with `#[reduce]` kernels (see the module docs): in default launches on a GPU;
/// on the host backend in one single-thread block per worker ([`host_shape`]).
pub fn solve_on(device: &Device, problem: &Problem, b: &[f64]) -> offload::Result<Solution> {
    let shape = if device.kind() == BackendKind::Host {
        host_shape(device)
    } else {
        Launch::auto()
    };
    solve_with(device, shape, problem, b)
}

/// The launch shape of [`solve_on`]'s kernels on the host backend: one block of one thread per
/// worker. The default shapes run many GPU threads per worker there (a reduction's blocks
/// combine their threads' values, the element-wise default runs a thread per element). On a
/// shared machine of 2 workers at 128² (50 iterations, 2026-12-01) the defaults took 0.35–0.6 ms
/// an iteration, this shape 0.16–0.19 ms, other grids of 2–16 blocks of 4–32 threads 0.16–0.29
/// ms.
pub fn host_shape(device: &Device) -> Launch<'static> {
    Launch::auto()
        .grid(device.limits().multiprocessors.max(1))
        .block(1)
}

/// [`solve_on`] with every kernel launched in `shape` (`Launch::auto()` and its `grid` and
/// `block`): the reductions combine in an order fixed by the shape, so the same shape gives the
/// same bits on every device that computes the element-wise arithmetic alike (the host backend
/// and a GPU, say).
pub fn solve_with(
    device: &Device,
    shape: Launch<'static>,
    problem: &Problem,
    b: &[f64],
) -> offload::Result<Solution> {
    let n = problem.n;
    assert_eq!(b.len(), n * n, "b holds one value per unknown");
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let Vectors { x, r, p, ap } = Vectors::upload(&stream, b)?;
        // rr of three iterations in turn (this one's, the next's, and the one after, which this
        // iteration zeroes for its reduction), and p·Ap: one-element device scalars, zeroed.
        let scalars = stream.alloc_zeroed::<f64>(4)?;
        let rr = [
            scalars.slice(0..1)?,
            scalars.slice(1..2)?,
            scalars.slice(2..3)?,
        ];
        let pap = scalars.slice(3..4)?;
        let n32 = u32::try_from(n).expect("at most 2^32 - 1 unknowns per side");
        kernels::cg::norm2::enqueue(&stream, shape, r, rr[0])?;
        let b_norm = stream.to_vec(rr[0])?[0].sqrt();
        let done = iterate(
            problem,
            b_norm,
            |k| {
                let (old, new, next) = (rr[k % 3], rr[(k + 1) % 3], rr[(k + 2) % 3]);
                kernels::cg::laplacian_dot::enqueue(&stream, shape, n32, p, ap, pap)?;
                kernels::cg::update_residual::enqueue(&stream, shape, old, pap, p, ap, x, r, new)?;
                kernels::cg::next_direction_reset::enqueue(
                    &stream, shape, new, old, r, p, pap, next,
                )?;
                Ok(new)
            },
            |new| Ok(stream.to_vec(new)?[0]),
        )?;
        Ok(done.with_x(stream.to_vec(x)?))
    })
}

/// CG on `device` with cuBLAS's dot and axpy between offload's kernels (see the module docs).
/// `Err(NoDevice)` on a GPU that cuBLAS cannot drive (not through the CUDA plugin, or libcublas
/// missing).
#[cfg(feature = "cublas")]
pub fn solve_cublas(device: &Device, problem: &Problem, b: &[f64]) -> offload::Result<Solution> {
    let n = problem.n;
    assert_eq!(b.len(), n * n, "b holds one value per unknown");
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let blas = Blas::new(&stream)?;
        let Vectors { x, r, p, ap } = Vectors::upload(&stream, b)?;
        // rr (two, alternating: this iteration's and the next), p·Ap, the step and its negative.
        let scalars = stream.alloc_zeroed::<f64>(5)?;
        let rr = [scalars.slice(0..1)?, scalars.slice(1..2)?];
        let pap = scalars.slice(2..3)?;
        let steps = scalars.slice(3..5)?;
        let (step, minus_step) = (scalars.slice(3..4)?, scalars.slice(4..5)?);
        blas.dot(r, r, rr[0])?;
        let b_norm = stream.to_vec(rr[0])?[0].sqrt();
        let done = iterate(
            problem,
            b_norm,
            |k| {
                let (old, new) = (rr[k % 2], rr[(k + 1) % 2]);
                kernels::laplacian::enqueue(&stream, Launch::auto(), n as u32, p, ap)?;
                blas.dot(p, ap, pap)?;
                kernels::step_length::enqueue(&stream, Launch::auto(), old, pap, steps)?;
                blas.axpy(step, p, x)?;
                blas.axpy(minus_step, ap, r)?;
                blas.dot(r, r, new)?;
                kernels::next_direction::enqueue(&stream, Launch::auto(), new, old, r, p)?;
                Ok(new)
            },
            |new| Ok(stream.to_vec(new)?[0]),
        )?;
        Ok(done.with_x(stream.to_vec(x)?))
    })
}

/// The device vectors of a CG solve: `x = 0`, `r = p = b` (the residual and search direction of
/// `x = 0`), and `ap` for `A p`.
struct Vectors<'s> {
    x: DeviceSlice<'s, f64>,
    r: DeviceSlice<'s, f64>,
    p: DeviceSlice<'s, f64>,
    ap: DeviceSlice<'s, f64>,
}

impl<'s> Vectors<'s> {
    fn upload(stream: &Stream<'s>, b: &'s [f64]) -> offload::Result<Self> {
        Ok(Vectors {
            x: stream.alloc_zeroed(b.len())?,
            r: stream.upload(b)?,
            p: stream.upload(b)?,
            ap: stream.alloc_zeroed(b.len())?,
        })
    }
}

/// What [`iterate`] ends with: a [`Solution`] but for `x`.
struct Iterated {
    iterations: usize,
    residual: f64,
    solve_time: Duration,
}

impl Iterated {
    fn with_x(self, x: Vec<f64>) -> Solution {
        Solution {
            x,
            iterations: self.iterations,
            residual: self.residual,
            solve_time: self.solve_time,
        }
    }
}

/// The iterations every solver shares, timed: `iteration(k)` runs iteration `k` (from 0) and
/// returns a handle to its new `|r|²`, which `rr(handle)` reads, after every `check_every`th
/// iteration and the last one; the loop stops once `|r| / b_norm` is below the tolerance, or
/// after `max_iterations`. Only the reads wait for a device.
fn iterate<T, E>(
    problem: &Problem,
    b_norm: f64,
    mut iteration: impl FnMut(usize) -> Result<T, E>,
    mut rr: impl FnMut(T) -> Result<f64, E>,
) -> Result<Iterated, E> {
    let check_every = problem.check_every.max(1);
    let start = Instant::now();
    let (mut iterations, mut residual) = (0, 1.0);
    while iterations < problem.max_iterations {
        let new = iteration(iterations)?;
        iterations += 1;
        if iterations % check_every == 0 || iterations == problem.max_iterations {
            residual = rr(new)?.sqrt() / b_norm;
            if residual < problem.tolerance {
                break;
            }
        }
    }
    Ok(Iterated {
        iterations,
        residual,
        solve_time: start.elapsed(),
    })
}

/// The same CG on the CPU, one thread, checking the residual at the same iterations.
pub fn solve_cpu(problem: &Problem, b: &[f64]) -> Solution {
    let n = problem.n;
    let mut x = vec![0.0; n * n];
    let mut r = b.to_vec();
    let mut p = b.to_vec();
    let mut ap = vec![0.0; n * n];
    let mut rr = dot(&r, &r);
    let b_norm = rr.sqrt();
    let Ok(done) = iterate::<_, Infallible>(
        problem,
        b_norm,
        |_| {
            apply(n, &p, &mut ap);
            let step = rr / dot(&p, &ap);
            x.iter_mut().zip(&p).for_each(|(x, p)| *x += step * p);
            r.iter_mut().zip(&ap).for_each(|(r, ap)| *r += -step * ap);
            let rr_new = dot(&r, &r);
            let beta = rr_new / rr;
            p.iter_mut().zip(&r).for_each(|(p, r)| *p = r + beta * *p);
            rr = rr_new;
            Ok(rr)
        },
        Ok,
    );
    done.with_x(x)
}

/// `max |a - b| / max |b|`.
pub fn relative_difference(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}
