//! Conjugate gradient on the 2D Poisson problem, on the default device (offload's kernels for
//! the operator, cuBLAS for dot and axpy, data on the device throughout) and on the CPU,
//! checked against each other and timed.
//!
//! `cg [N] [MAX_ITERATIONS] [TOLERANCE] [--device-only]` (defaults 512, 20000, 1e-8); the
//! residual is read every 25 iterations. Exit code 1 when the device's solution disagrees with
//! the CPU's. `--device-only` skips the CPU solve (for grids too large for it), reporting the
//! device's figures only.

use offload_ecosystem_examples::cg::{self, Problem};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().filter(|a| a != "--device-only").collect();
    let device_only = args.len() < std::env::args().count();
    let arg = |i: usize, default: f64| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("numeric arguments"))
    };
    let problem = Problem {
        n: arg(1, 512.0) as usize,
        max_iterations: arg(2, 20000.0) as usize,
        tolerance: arg(3, 1e-8),
        check_every: 25,
    };
    match run(&problem, device_only) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cg: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(problem: &Problem, device_only: bool) -> offload::Result<bool> {
    let device = offload::default_device()?;
    let n = problem.n;
    let b = cg::right_hand_side(n);
    println!(
        "CG, 2D Poisson {n}x{n} ({} unknowns), tolerance {:e}, on {}",
        n * n,
        problem.tolerance,
        device.name()
    );
    // A short solve first: loading the kernels' image and cuBLAS's set-up are not the solver's.
    let warm_up = Problem {
        max_iterations: problem.check_every,
        ..*problem
    };
    cg::solve_on(&device, &warm_up, &b)?;
    let on_device = cg::solve_on(&device, problem, &b)?;
    if device_only {
        report("device", n, &b, &on_device);
        return Ok(true);
    }
    let on_cpu = cg::solve_cpu(problem, &b);
    for (what, s) in [("device", &on_device), ("CPU", &on_cpu)] {
        report(what, n, &b, s);
    }
    let per_iteration = |s: &cg::Solution| s.solve_time.as_secs_f64() / s.iterations as f64;
    println!(
        "device / CPU: {:.1}x faster per iteration, {:.1}x in total",
        per_iteration(&on_cpu) / per_iteration(&on_device),
        on_cpu.solve_time.as_secs_f64() / on_device.solve_time.as_secs_f64()
    );
    let difference = cg::relative_difference(&on_device.x, &on_cpu.x);
    println!("max |x_device - x_cpu| / max |x_cpu| = {difference:.3e}");
    // The same recurrence with other rounding (cuBLAS sums in another order): the device must
    // converge as the CPU did, to a solution whose recomputed residual meets the tolerance.
    let iterations_apart = on_device.iterations.abs_diff(on_cpu.iterations);
    let agree = on_device.residual < problem.tolerance
        && cg::true_residual(n, &b, &on_device.x) < 10.0 * problem.tolerance
        && iterations_apart <= 2 * problem.check_every
        && difference < 1e-4;
    if !agree {
        eprintln!("cg: the device's solution disagrees with the CPU's (or did not converge)");
    }
    Ok(agree)
}

fn report(what: &str, n: usize, b: &[f64], s: &cg::Solution) {
    println!(
        "{what:>6}: {} iterations, |r|/|b| {:.3e} (recomputed {:.3e}), {:.1} ms, {:.2} us/iteration",
        s.iterations,
        s.residual,
        cg::true_residual(n, b, &s.x),
        s.solve_time.as_secs_f64() * 1e3,
        s.solve_time.as_secs_f64() * 1e6 / s.iterations as f64
    );
}
