//! The benchmark kernels compute what their CPU references compute: on the host backend bit for
//! bit, on a GPU (where they are built with FMA contraction, as nvcc builds by default) within a
//! few roundings. The GPU half skips visibly without a GPU and fails under
//! `OFFLOAD_REQUIRE_GPU=1`.

use offload::{BackendKind, Device, Launch};
use offload_parity::cases::{self, Sizes};
use offload_parity::kernels::{self, Value, P, WINDOW};
use offload_parity::reference;
use std::io::Write;

/// Every kernel's output on `device` and from the CPU reference, in one element type.
macro_rules! outputs {
    ($device:expr, $t:ty) => {{
        type T = $t;
        let device: &Device = $device;
        let s = Sizes::SMALL;
        let n = s.n;
        let on = || Launch::on(device);
        let mut results: Vec<(&str, Vec<T>, Vec<T>)> = Vec::new();

        let k = cases::eos_constants::<T>();
        let ins: Vec<Vec<T>> = (0..5).map(|j| cases::values(n, j, -1.0, 1.0)).collect();
        let (mut e, mut p) = (vec![0.0; n], vec![0.0; n]);
        kernels::eos::launch(
            on(),
            k,
            &ins[0],
            &ins[1],
            &ins[2],
            &ins[3],
            &ins[4],
            &mut e,
            &mut p,
        )
        .unwrap();
        let (mut re, mut rp) = (vec![0.0; n], vec![0.0; n]);
        reference::eos(
            k,
            [&ins[0], &ins[1], &ins[2], &ins[3], &ins[4]],
            &mut re,
            &mut rp,
        );
        results.push(("eos e", e, re));
        results.push(("eos p", p, rp));

        let x = cases::values::<T>(n + WINDOW - 1, 7, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
        kernels::window_sum::launch(on(), &x, &mut got).unwrap();
        reference::window_sum(&x, &mut want);
        results.push(("window_sum", got, want));

        let index = cases::local_permutation(n, 64, 8);
        let x = cases::values::<T>(n, 9, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
        kernels::gather::launch(on(), &index, &x, &mut got).unwrap();
        reference::gather(&index, &x, &mut want);
        results.push(("gather", got, want));
        let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
        // SAFETY: index is a permutation of 0..n.
        unsafe { kernels::scatter::launch(on(), &index, &x, &mut got) }.unwrap();
        reference::scatter(&index, &x, &mut want);
        results.push(("scatter", got, want));

        let w = cases::weights::<T>();
        let (nx, ny) = s.grid2;
        let m = (nx * ny) as usize;
        let x = cases::values::<T>(m, 10, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; m], vec![0.0; m]);
        kernels::stencil2d::launch(on(), nx, ny, w, &x, &mut got).unwrap();
        reference::stencil2d(nx, ny, w, &x, &mut want);
        results.push(("stencil2d", got, want));

        let (nx, ny, nz) = s.grid3;
        let m = (nx * ny * nz) as usize;
        let x = cases::values::<T>(m, 11, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; m], vec![0.0; m]);
        kernels::stencil7::launch(on(), nx, ny, nz, w, &x, &mut got).unwrap();
        reference::stencil3d(s.grid3, false, w, &x, &mut want);
        results.push(("stencil7", got, want));
        let (mut got, mut want) = (vec![0.0; m], vec![0.0; m]);
        kernels::stencil27::launch(on(), nx, ny, nz, w, &x, &mut got).unwrap();
        reference::stencil3d(s.grid3, true, w, &x, &mut want);
        results.push(("stencil27", got, want));

        let nodes = cases::values::<T>(((nx + 1) * (ny + 1) * (nz + 1)) as usize, 12, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; m], vec![0.0; m]);
        kernels::corners::launch(on(), nx, ny, nz, &nodes, &mut got).unwrap();
        reference::corners(s.grid3, &nodes, &mut want);
        results.push(("corners", got, want));

        let points = s.elements * P * P * P;
        let d = cases::values::<T>(P * P, 13, -1.0, 1.0);
        let u = cases::values::<T>(points, 14, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; points], vec![0.0; points]);
        let block = (P as u32, P as u32, P as u32);
        kernels::contract::launch(on().block(block), &d, &u, &mut got).unwrap();
        reference::contract(&d, &u, &mut want);
        results.push(("contract", got, want));

        let kk = cases::values::<T>(n - 1, 15, 0.5, 1.5);
        let u = cases::values::<T>(n, 16, -1.0, 1.0);
        let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
        let shared = 129 * std::mem::size_of::<T>() as u32;
        kernels::assemble::launch(on().block(128).dynamic_shared(shared), &kk, &u, &mut got)
            .unwrap();
        reference::assemble(&kk, &u, &mut want);
        results.push(("assemble", got, want));
        results
    }};
}

fn check<T: Value + Into<f64>>(results: &[(&str, Vec<T>, Vec<T>)], tolerance: f64) {
    for (name, got, want) in results {
        assert_eq!(got.len(), want.len(), "{name}");
        let scale = want.iter().map(|&v| v.into().abs()).fold(1e-30, f64::max);
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let (g, w): (f64, f64) = (g.into(), w.into());
            let ok = if tolerance == 0.0 {
                g.to_bits() == w.to_bits()
            } else {
                (g - w).abs() <= tolerance * scale
            };
            assert!(ok, "{name}[{i}]: {g} against {w}");
        }
    }
}

#[test]
fn host_backend_equals_the_cpu_loops_bit_for_bit() {
    let host = Device::host();
    check(&outputs!(&host, f32), 0.0);
    check(&outputs!(&host, f64), 0.0);
}

#[test]
fn gpu_equals_the_cpu_loops_within_fma_rounding() {
    let gpu = offload::devices()
        .iter()
        .find(|d| d.kind() == BackendKind::Cuda)
        .cloned();
    let Some(gpu) = gpu.filter(|_| !offload_parity::__OFFLOAD_IMAGES.images.is_empty()) else {
        if std::env::var("OFFLOAD_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!("OFFLOAD_REQUIRE_GPU=1 but there is no CUDA GPU with device images");
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED gpu_equals_the_cpu_loops: no CUDA GPU"
        );
        return;
    };
    // A fused multiply-add rounds once where the CPU loop rounds twice: a few units in the last
    // place of the largest value.
    check(&outputs!(&gpu, f32), 1e-5);
    check(&outputs!(&gpu, f64), 1e-13);
}

#[test]
fn assemble_without_the_extra_shared_slot_fails_with_a_clear_error() {
    let host = Device::host();
    let n = Sizes::SMALL.n;
    let (k, u) = (vec![1.0f32; n - 1], vec![0.0f32; n]);
    let mut r = vec![0.0f32; n];
    // A slot per thread but not the one after the last thread's.
    let shared = 128 * std::mem::size_of::<f32>() as u32;
    let launch = Launch::on(&host).block(128).dynamic_shared(shared);
    let err = kernels::assemble::launch(launch, &k, &u, &mut r).unwrap_err();
    assert!(
        err.to_string()
            .contains("shared array too short for a slot per thread and the slots ahead"),
        "{err}"
    );
}
