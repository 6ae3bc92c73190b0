//! The CG solver with `#[reduce]` kernels (`cg::solve_on`, no cuBLAS): it converges, and to the
//! CPU solve's solution, on the host backend and on the first GPU of any plugin (skipped visibly
//! without one; a failure with `OFFLOAD_REQUIRE_GPU=1`); the same bits on a GPU and the host
//! backend at one launch shape; and, on a GPU, no copies per iteration.
//!
//! The tolerance against the CPU: the device's reductions sum in a tree where the CPU sums in
//! order, so the two recurrences round differently. Both must reach `|r|/|b| < 1e-9` within one
//! residual check (`check_every` iterations) of each other, the device's solution's recomputed
//! residual must be below 10× the tolerance, and the two solutions must agree to
//! `max |x - x_cpu| / max |x_cpu| < 1e-7`.

use offload::{Device, Launch};
use offload_ecosystem_examples::cg::{self, Problem};

mod common;

fn gpu(test: &str) -> Option<Device> {
    common::gpu_or_skip(
        test,
        offload::devices().iter().find(|d| d.is_gpu()),
        "no GPU",
    )
}

fn problem(n: usize) -> Problem {
    Problem {
        n,
        tolerance: 1e-9,
        max_iterations: 10 * n,
        check_every: 5,
    }
}

/// Launch shapes with the side of the grid of unknowns to solve at: the default, partial blocks,
/// more blocks than threads, and a single thread (on a small grid: it walks every element).
fn shapes() -> Vec<(Launch<'static>, usize)> {
    vec![
        (Launch::auto(), 128),
        (Launch::auto().grid(3).block(100), 128),
        (Launch::auto().grid(300).block(32), 128),
        (Launch::auto().grid(1).block(1), 24),
    ]
}

/// The solve in `shape` on `device` converges to the CPU's solution (see the module docs), and
/// gives the same bits when run again.
fn converges_to_the_cpu_solution(device: &Device, shape: Launch<'static>, n: usize) {
    let problem = problem(n);
    let b = cg::right_hand_side(n);
    let on_device = cg::solve_with(device, shape, &problem, &b).unwrap();
    let on_cpu = cg::solve_cpu(&problem, &b);
    let name = device.name();
    assert!(
        on_device.residual < problem.tolerance,
        "{name}: {on_device:?}"
    );
    let recomputed = cg::true_residual(n, &b, &on_device.x);
    assert!(
        recomputed < 10.0 * problem.tolerance,
        "{name}: recomputed residual {recomputed:e}"
    );
    assert!(
        on_device.iterations.abs_diff(on_cpu.iterations) <= problem.check_every,
        "{name}: {} iterations against the CPU's {}",
        on_device.iterations,
        on_cpu.iterations
    );
    let difference = cg::relative_difference(&on_device.x, &on_cpu.x);
    assert!(difference < 1e-7, "{difference:e} on {name}");
    let again = cg::solve_with(device, shape, &problem, &b).unwrap();
    assert_eq!(again.iterations, on_device.iterations, "{name}: run again");
    assert!(
        again
            .x
            .iter()
            .zip(&on_device.x)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "{name}: the same solve twice gave different bits"
    );
}

/// A fixed number of iterations (no early stop) at one launch shape: the iterates, residuals
/// and all, as bits.
fn fixed_iterations(device: &Device, n: usize) -> (Vec<u64>, u64) {
    let problem = Problem {
        n,
        tolerance: 0.0,
        max_iterations: 60,
        check_every: 20,
    };
    let b = cg::right_hand_side(n);
    let shape = Launch::auto().grid(40).block(128);
    let s = cg::solve_with(device, shape, &problem, &b).unwrap();
    assert_eq!(s.iterations, 60);
    (
        s.x.iter().map(|v| v.to_bits()).collect(),
        s.residual.to_bits(),
    )
}

#[test]
fn reductions_cg_on_the_host_backend() {
    let host = Device::host();
    for (shape, n) in shapes() {
        converges_to_the_cpu_solution(&host, shape, n.min(40));
    }
    // A side that is no multiple of a block or of 16 bytes.
    converges_to_the_cpu_solution(&host, Launch::auto(), 37);
    // `solve_on`'s own shape there.
    converges_to_the_cpu_solution(&host, cg::host_shape(&host), 64);
    let b = cg::right_hand_side(64);
    let via_solve_on = cg::solve_on(&host, &problem(64), &b).unwrap();
    let via_shape = cg::solve_with(&host, cg::host_shape(&host), &problem(64), &b).unwrap();
    assert_eq!(via_solve_on.x, via_shape.x);
}

#[test]
fn reductions_cg_on_a_gpu() {
    let Some(gpu) = gpu("reductions_cg_on_a_gpu") else {
        return;
    };
    for (shape, n) in shapes() {
        converges_to_the_cpu_solution(&gpu, shape, n);
    }
    converges_to_the_cpu_solution(&gpu, Launch::auto(), 301);
    // What the cg binary runs, at a size where the launches fill the GPU.
    let (n, problem) = (512, problem(512));
    let b = cg::right_hand_side(n);
    let s = cg::solve_on(&gpu, &problem, &b).unwrap();
    assert!(s.residual < problem.tolerance, "{s:?}");
    assert!(cg::true_residual(n, &b, &s.x) < 10.0 * problem.tolerance);
}

/// The reductions combine in an order fixed by the launch shape, and the element-wise steps are
/// the same IEEE operations on both: 60 iterations at one shape give the same bits on a GPU as
/// on the host backend.
#[test]
fn reductions_cg_same_bits_on_a_gpu_and_the_host() {
    let Some(gpu) = gpu("reductions_cg_same_bits_on_a_gpu_and_the_host") else {
        return;
    };
    let (on_gpu, on_host) = (
        fixed_iterations(&gpu, 64),
        fixed_iterations(&Device::host(), 64),
    );
    assert_eq!(
        on_gpu.1,
        on_host.1,
        "|r|/|b| after 60 iterations, {} against the host",
        gpu.name()
    );
    let differing = on_gpu
        .0
        .iter()
        .zip(&on_host.0)
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(
        differing,
        0,
        "elements of x differing between {} and the host",
        gpu.name()
    );
}

/// The iterations stay on the device: 100 iterations with a residual check every 25 copy `b` in
/// twice (r and p) and nothing else to the device, and read back at most `|b|²`, the four checked
/// `rr` and `x` (`Stream::to_vec`, which the transfer trace does not count today); the launches
/// themselves copy nothing. Three launches an iteration, one before them. (On the host backend
/// nothing is copied at all, so only a GPU counts.)
#[test]
fn reductions_cg_reads_back_only_the_checks() {
    let Some(gpu) = gpu("reductions_cg_reads_back_only_the_checks") else {
        return;
    };
    let n = 96;
    let problem = Problem {
        n,
        tolerance: 0.0,
        max_iterations: 100,
        check_every: 25,
    };
    let b = cg::right_hand_side(n);
    cg::solve_on(&gpu, &problem, &b).unwrap(); // loads the image
    let before = offload::trace::thread_counters();
    let s = cg::solve_on(&gpu, &problem, &b).unwrap();
    let moved = offload::trace::thread_counters() - before;
    assert_eq!(s.iterations, 100);
    let unknowns = (n * n * 8) as u64;
    assert_eq!(
        (moved.copies_to_device, moved.bytes_to_device),
        (2, 2 * unknowns),
        "{moved:?}"
    );
    assert!(
        moved.copies_from_device <= 6 && moved.bytes_from_device <= 5 * 8 + unknowns,
        "{moved:?}"
    );
    assert_eq!(moved.launches, 1 + 3 * 100, "{moved:?}");
}
