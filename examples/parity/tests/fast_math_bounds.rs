//! `offload::math::fast` keeps the error bounds its rustdoc states, measured against an `f64`
//! reference on the host backend and on a GPU (which runs the approximate instructions); the
//! fast-math kernels' PTX holds those instructions and flushes to zero, and the other kernels'
//! does not. The GPU half skips visibly without a GPU and fails under `OFFLOAD_REQUIRE_GPU=1`.

use offload::{BackendKind, Device, ImageFormat, Launch};
use offload_parity::cases;
use offload_parity::fast_math::{self, Accel, Body, FUNCTIONS};
use std::io::Write;

/// Inputs per function.
const PER_FUNCTION: usize = 20_000;
/// 2⁻¹²⁵: what flushing a subnormal input or result to zero may cost (the documented allowance).
const FLUSH: f64 = 2.350988701644575e-38;

/// Deterministic uniform numbers in [0, 1) (the benchmarks' generator).
fn units(n: usize, seed: u64) -> Vec<f64> {
    cases::values::<f64>(n, seed, 0.0, 1.0)
}

/// `lo·(hi/lo)^u`: spread over the binades from `lo` to `hi`.
fn log_uniform(u: f64, lo: f64, hi: f64) -> f64 {
    lo * (hi / lo).powf(u)
}

/// The inputs `(x, d)` of function `f` (an index into `FUNCTIONS`), within its domain.
fn inputs(f: usize) -> (Vec<f32>, Vec<f32>) {
    let (u, v) = (
        units(PER_FUNCTION, 2 * f as u64 + 1),
        units(PER_FUNCTION, 2 * f as u64 + 2),
    );
    let pick = |g: &dyn Fn(f64, f64) -> f64| -> Vec<f32> {
        u.iter().zip(&v).map(|(&a, &b)| g(a, b) as f32).collect()
    };
    let signed = |a: f64, b: f64, lo: f64, hi: f64| {
        let m = log_uniform(a, lo, hi);
        if b < 0.5 {
            -m
        } else {
            m
        }
    };
    let x = match FUNCTIONS[f] {
        // Most within one turn, the rest out to 100π.
        "sin" | "cos" => pick(&|a, b| {
            let reach = if b < 0.75 {
                std::f64::consts::PI
            } else {
                100.0 * std::f64::consts::PI
            };
            (2.0 * a - 1.0) * reach
        }),
        // Down to results near and below 2⁻¹²⁶ (flushed to zero).
        "exp" => pick(&|a, _| -88.0 + 176.0 * a),
        "ln" | "sqrt" | "rsqrt" | "offload::math::sqrt" => {
            pick(&|a, _| log_uniform(a, 1e-37, 1e37))
        }
        _ => pick(&|a, b| signed(a, b, 1e-3, 1e3)),
    };
    let d = match FUNCTIONS[f] {
        "div" | "x / d" => pick(&|a, b| signed(b, a, 1e-30, 1e30)),
        _ => vec![1.0; PER_FUNCTION],
    };
    (x, d)
}

/// The exact value of function `f` and the bound the rustdoc of `offload::math::fast` gives for
/// its error (plain `x / d` and the full path `offload::math::sqrt` in a fast-math kernel get
/// the bounds of `div` and `sqrt`).
fn exact_and_bound(f: usize, x: f32, d: f32) -> (f64, f64) {
    let (x, d) = (x as f64, d as f64);
    let p = |e: i32| 2f64.powi(e);
    let (want, bound) = match FUNCTIONS[f] {
        "sin" => (x.sin(), p(-20) + x.abs() * p(-22)),
        "cos" => (x.cos(), p(-20) + x.abs() * p(-22)),
        "exp" => (x.exp(), (3.0 + 1.5 * x.abs()) * p(-23) * x.exp()),
        "ln" => (x.ln(), p(-21) * (1.0 + x.ln().abs())),
        "sqrt" | "offload::math::sqrt" => (x.sqrt(), p(-21) * x.sqrt()),
        "rsqrt" => (1.0 / x.sqrt(), p(-21) / x.sqrt()),
        _ => (x / d, p(-21) * (x / d).abs()),
    };
    (want, bound + FLUSH)
}

/// Runs `approximations` on `device` and checks every output against its bound; returns, per
/// function, the largest error as a fraction of its bound.
fn check_bounds(device: &Device) -> Vec<(&'static str, f64)> {
    let (mut xs, mut ds) = (Vec::new(), Vec::new());
    for f in 0..FUNCTIONS.len() {
        let (x, d) = inputs(f);
        xs.extend(x);
        ds.extend(d);
    }
    let mut out = vec![0.0f32; xs.len()];
    fast_math::approximations::launch(Launch::on(device), &xs, &ds, &mut out).unwrap();
    let mut worst = vec![0.0f64; FUNCTIONS.len()];
    for (k, &got) in out.iter().enumerate() {
        let f = k / PER_FUNCTION;
        let (want, bound) = exact_and_bound(f, xs[k], ds[k]);
        let error = (got as f64 - want).abs();
        assert!(
            error <= bound,
            "{} on {}: {}({:e}, {:e}) = {got:e}, exact {want:e}: error {error:e} over the bound {bound:e}",
            FUNCTIONS[f],
            device.name(),
            FUNCTIONS[f],
            xs[k],
            ds[k]
        );
        worst[f] = worst[f].max(error / bound);
    }
    FUNCTIONS.iter().copied().zip(worst).collect()
}

fn gpu(test: &str) -> Option<Device> {
    let gpu = offload::devices()
        .iter()
        .find(|d| d.kind() == BackendKind::Cuda)
        .cloned();
    let found = gpu.filter(|_| !offload_parity::__OFFLOAD_IMAGES.images.is_empty());
    if found.is_none() {
        if std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!("OFFLOAD_REQUIRE_GPU=1 but there is no CUDA GPU with device images");
        }
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no CUDA GPU");
    }
    found
}

#[test]
fn host_backend_keeps_the_documented_bounds() {
    check_bounds(&Device::host());
}

#[test]
fn gpu_keeps_the_documented_bounds() {
    let Some(gpu) = gpu("gpu_keeps_the_documented_bounds") else {
        return;
    };
    for (function, worst) in check_bounds(&gpu) {
        // The measured margin, for the report (run with --nocapture).
        println!(
            "{function}: largest error {worst:.3} of its bound on {}",
            gpu.name()
        );
    }
}

/// Bodies on a small lattice, with masses 1 and 2.
fn lattice(n: usize) -> Vec<Body> {
    (0..n)
        .map(|i| Body {
            x: (i % 7) as f32 * 0.13,
            y: (i % 11) as f32 * 0.07,
            z: (i % 5) as f32 * 0.21,
            m: 1.0 + (i % 2) as f32,
        })
        .collect()
}

/// The benchmark kernels on `device` are within a fraction of the largest value of an `f64`
/// reference (fast math errs by about 2⁻²⁰ per term; sums of 502 terms: `pair_energy`'s groups
/// of four leave two).
fn kernels_match_the_reference(device: &Device) {
    let (softening2, kappa) = (1e-2f32, 3.0f32);
    let bodies = lattice(502);
    let mut accel = vec![Accel::default(); bodies.len()];
    let mut energy = vec![0.0f32; bodies.len()];
    let mut exact = vec![0.0f32; bodies.len()];
    fast_math::nbody_forces::launch(Launch::on(device), softening2, &bodies, &mut accel).unwrap();
    fast_math::pair_energy::launch(Launch::on(device), softening2, kappa, &bodies, &mut energy)
        .unwrap();
    fast_math::pair_energy_exact::launch(
        Launch::on(device),
        softening2,
        kappa,
        &bodies,
        &mut exact,
    )
    .unwrap();
    let (mut want_a, mut want_e) = (Vec::new(), Vec::new());
    for p in &bodies {
        let (mut a, mut e) = ([0.0f64; 3], 0.0f64);
        for q in &bodies {
            let d = [(q.x - p.x) as f64, (q.y - p.y) as f64, (q.z - p.z) as f64];
            let d2 = d.iter().map(|v| v * v).sum::<f64>() + softening2 as f64;
            let r = d2.sqrt();
            for k in 0..3 {
                a[k] += d[k] * q.m as f64 / (d2 * r);
            }
            let phase = kappa as f64 * r;
            e += q.m as f64 * (phase.cos() + 0.5 * phase.sin()) / r;
        }
        want_a.extend(a);
        want_e.push(p.m as f64 * e);
    }
    let got_a: Vec<f64> = accel
        .iter()
        .flat_map(|a| [a.x as f64, a.y as f64, a.z as f64])
        .collect();
    let relative = |got: &[f64], want: &[f64]| {
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        got.iter()
            .zip(want)
            .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()))
            / scale
    };
    let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let errors = [
        ("nbody_forces", relative(&got_a, &want_a)),
        ("pair_energy", relative(&as_f64(&energy), &want_e)),
        ("pair_energy_exact", relative(&as_f64(&exact), &want_e)),
    ];
    for (kernel, error) in errors {
        assert!(
            error < 1e-4,
            "{kernel} on {}: {error:e} from the f64 reference",
            device.name()
        );
    }
}

#[test]
fn host_backend_kernels_match_the_reference() {
    kernels_match_the_reference(&Device::host());
}

#[test]
fn gpu_kernels_match_the_reference() {
    if let Some(gpu) = gpu("gpu_kernels_match_the_reference") {
        kernels_match_the_reference(&gpu);
    }
}

/// The PTX of entry `name`.
fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no entry {name} in the PTX"));
    let end = ptx[start..].find("\n}\n").expect("the entry ends") + start;
    &ptx[start..end]
}

#[test]
fn fast_math_kernels_hold_the_approximate_instructions() {
    let images = &offload_parity::__OFFLOAD_IMAGES;
    let Some(ptx) = images
        .images
        .iter()
        .find(|i| i.format == ImageFormat::Ptx && i.target == "sm_90")
    else {
        if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
            panic!("OFFLOAD_REQUIRE_DEVICE_BUILD=1 but there is no sm_90 PTX");
        }
        let _ = writeln!(std::io::stderr(), "SKIPPED: no device images");
        return;
    };
    let ptx = std::str::from_utf8(ptx.bytes).unwrap();
    let fast = entry(ptx, "approximations");
    for instruction in [
        "sin.approx.ftz.f32",
        "cos.approx.ftz.f32",
        "ex2.approx.ftz.f32",
        "lg2.approx.ftz.f32",
        "sqrt.approx.ftz.f32",
        "rsqrt.approx.ftz.f32",
        "div.approx.ftz.f32",
    ] {
        assert!(
            fast.contains(instruction),
            "approximations lacks {instruction}"
        );
    }
    for exact in ["div.rn.f32", "sqrt.rn.f32", "mul.rn.f32", "add.rn.f32"] {
        assert!(!fast.contains(exact), "approximations holds {exact}");
    }
    assert!(entry(ptx, "nbody_forces").contains("rsqrt.approx.ftz.f32"));
    let energy = entry(ptx, "pair_energy");
    assert!(energy.contains("sin.approx.ftz.f32") && energy.contains("fma.rn.ftz.f32"));
    // Without fast_math: no approximation, no flush to zero.
    for exact_kernel in ["pair_energy_exact", "eos__f32"] {
        let body = entry(ptx, exact_kernel);
        assert!(
            !body.contains(".approx") && !body.contains(".ftz"),
            "{exact_kernel} is not exact"
        );
    }
}
