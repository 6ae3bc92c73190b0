//! Conjugate gradient on the 2D Poisson problem on the default device, two ways in one run: with
//! offload's `#[reduce]` kernels alone (any device), and with cuBLAS for the dot products and
//! axpys (feature `cublas`; a GPU through the CUDA plugin, or the host backend's loops). Both
//! solve to the same tolerance, their residuals are recomputed on the CPU, their solutions
//! compared with each other (and with a CPU solve on small grids), and their iteration rates
//! printed with a `ratio` line (reductions / cuBLAS, goal at least 1).
//!
//! `cg [N] [MAX_ITERATIONS] [TOLERANCE] [--device-only] [--shape=GRID,BLOCK]` (defaults: N 2048
//! on a GPU, 128 on the host backend; 20000; 1e-8); the residual is read every 25 iterations.
//! `--shape` launches the reductions variant's kernels in that grid and block instead of
//! `cg::solve_on`'s shapes (for tuning). Each variant is timed
//! twice after a short warm-up, the better of the two counting. The CPU solve (one thread) runs
//! for N up to 512 unless `--device-only`. Exit code 1 when a solve does not converge, its
//! recomputed residual misses the tolerance, or the solutions disagree.

use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_ecosystem_examples::cg::{self, Problem, Solution};
use std::process::ExitCode;

/// Above this N the single-threaded CPU solve takes minutes: left out.
const CPU_MAX_N: usize = 512;

fn main() -> ExitCode {
    let all: Vec<String> = std::env::args().collect();
    let device_only = all.iter().any(|a| a == "--device-only");
    let shape = all
        .iter()
        .find_map(|a| a.strip_prefix("--shape="))
        .map(|s| {
            let (grid, block) = s
                .split_once(',')
                .and_then(|(g, b)| Some((g.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
                .expect("--shape=GRID,BLOCK");
            println!("the reductions variant's kernels in {grid} blocks of {block} threads");
            Launch::auto().grid(grid).block(block)
        });
    let args: Vec<&String> = all.iter().filter(|a| !a.starts_with("--")).collect();
    let device = match offload::default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cg: {e}");
            return ExitCode::FAILURE;
        }
    };
    let arg = |i: usize, default: f64| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("numeric arguments"))
    };
    let default_n = if device.is_gpu() { 2048.0 } else { 128.0 };
    let problem = Problem {
        n: arg(1, default_n) as usize,
        max_iterations: arg(2, 20000.0) as usize,
        tolerance: arg(3, 1e-8),
        check_every: 25,
    };
    match run(&device, &problem, device_only, shape) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cg: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The better (shorter) of two timed solves, after a warm-up of one check's iterations (loading
/// the kernels' image, cuBLAS's set-up and the first allocations are not the solver's).
fn timed(
    solve: impl Fn(&Problem) -> offload::Result<Solution>,
    problem: &Problem,
) -> offload::Result<Solution> {
    let warm_up = Problem {
        max_iterations: problem.check_every,
        ..*problem
    };
    solve(&warm_up)?;
    let first = solve(problem)?;
    let second = solve(problem)?;
    Ok(if rate(&second) > rate(&first) {
        second
    } else {
        first
    })
}

/// Iterations per second.
fn rate(s: &Solution) -> f64 {
    s.iterations as f64 / s.solve_time.as_secs_f64()
}

#[cfg(feature = "cublas")]
fn cublas_variant(device: &Device, problem: &Problem, b: &[f64]) -> Result<Solution, String> {
    timed(|p| cg::solve_cublas(device, p, b), problem).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cublas"))]
fn cublas_variant(_: &Device, _: &Problem, _: &[f64]) -> Result<Solution, String> {
    Err("not built (the ecosystem example's `cublas` feature is off)".to_string())
}

fn run(
    device: &Device,
    problem: &Problem,
    device_only: bool,
    shape: Option<Launch<'static>>,
) -> offload::Result<bool> {
    let n = problem.n;
    let b = cg::right_hand_side(n);
    println!(
        "CG, 2D Poisson {n}x{n} ({} unknowns), tolerance {:e}, on {}",
        n * n,
        problem.tolerance,
        device.name()
    );
    let reductions = match shape {
        Some(shape) => timed(|p| cg::solve_with(device, shape, p, &b), problem)?,
        None => timed(|p| cg::solve_on(device, p, &b), problem)?,
    };
    let cublas = cublas_variant(device, problem, &b);
    let mut ok = report("reductions", problem, &b, &reductions);
    if cublas.is_ok() && !device.is_gpu() {
        println!(
            "(on the host backend, the cuBLAS variant's calls are offload::blas's host loops)"
        );
    }
    match &cublas {
        Err(e) => println!("{:>10}: unavailable: {e}", "cuBLAS"),
        Ok(c) => {
            let converged = report("cuBLAS", problem, &b, c);
            let alike = agree("reductions", &reductions, "cuBLAS", c, problem, 1e-4);
            let ratio = rate(&reductions) / rate(c);
            println!(
                "reductions / cuBLAS: {ratio:.3}x the iteration rate ({:.0} against {:.0} \
                 iterations/s)",
                rate(&reductions),
                rate(c)
            );
            // Only for two solves that met the same tolerance and agree.
            if ok && converged && alike {
                Ratio::print(
                    "cg",
                    &format!("CG iteration rate, #[reduce] kernels, 2D Poisson {n}^2"),
                    "CG with cuBLAS dot and axpy",
                    Measure::Speed,
                    ratio,
                    Goal::AtLeast(1.0),
                );
            } else {
                println!("no ratio line: a solve did not converge, or the two disagree");
            }
            ok &= converged && alike;
        }
    }
    if device_only || n > CPU_MAX_N {
        println!(
            "{:>10}: left out ({}); the residuals above are recomputed on the CPU",
            "CPU",
            if device_only {
                "--device-only".to_string()
            } else {
                format!("N > {CPU_MAX_N}")
            }
        );
    } else {
        let on_cpu = cg::solve_cpu(problem, &b);
        ok &= report("CPU", problem, &b, &on_cpu);
        ok &= agree("reductions", &reductions, "CPU", &on_cpu, problem, 1e-4);
        if let Ok(c) = &cublas {
            ok &= agree("cuBLAS", c, "CPU", &on_cpu, problem, 1e-4);
        }
        println!(
            "reductions / CPU: {:.3}x the iteration rate",
            rate(&reductions) / rate(&on_cpu)
        );
    }
    if !ok {
        eprintln!("cg: a solve did not converge, or the solutions disagree");
    }
    Ok(ok)
}

/// Prints a solve's figures; whether it converged, its recomputed residual within 10× the
/// tolerance.
fn report(what: &str, problem: &Problem, b: &[f64], s: &Solution) -> bool {
    let recomputed = cg::true_residual(problem.n, b, &s.x);
    let converged = s.residual < problem.tolerance && recomputed < 10.0 * problem.tolerance;
    println!(
        "{what:>10}: {} iterations, |r|/|b| {:.3e} (recomputed {:.3e}), {:.1} ms, {:.2} us/iteration, \
         {:.0} iterations/s{}",
        s.iterations,
        s.residual,
        recomputed,
        s.solve_time.as_secs_f64() * 1e3,
        s.solve_time.as_secs_f64() * 1e6 / s.iterations as f64,
        rate(s),
        if converged { "" } else { ": DID NOT CONVERGE" }
    );
    converged
}

/// The same recurrence with other rounding (sums in another order): both converge within two
/// checks of each other, to solutions within `bound` (relative, max norm).
fn agree(a: &str, sa: &Solution, b: &str, sb: &Solution, problem: &Problem, bound: f64) -> bool {
    let difference = cg::relative_difference(&sa.x, &sb.x);
    let apart = sa.iterations.abs_diff(sb.iterations);
    let ok = difference < bound && apart <= 2 * problem.check_every;
    println!(
        "max |x_{a} - x_{b}| / max |x_{b}| = {difference:.3e}, {apart} iterations apart{}",
        if ok { "" } else { ": DISAGREE" }
    );
    ok
}
