//! The tensor-core GEMMs on the default device, checked against the CPU and timed against cuBLAS
//! (through torch, `python3`) in the same run:
//! - `sgemm_tf32x3` at 4096³ against cuBLAS fp32 with TF32 off; torch also measures both
//!   results' errors against an `f64` product of the same inputs on the GPU;
//! - `gemm_bf16` at 8192³ (`bf16` out, `A · Wᵀ`) against cuBLAS `bf16` (`torch.mm(a, w.t())`);
//! - `dgemm` at 4096³ and 4096 × 4096 × 1000 against cuBLAS DGEMM (`torch.mm` on `float64`);
//!   its error against a CPU `f64` product over sampled elements, and torch measures its
//!   normwise difference from cuBLAS's product.
//! - on a GPU, `gemm_bf16_wgmma` (sm_90a, no bias or activation) the same way at 8192³, 4096³
//!   and 4096 × 4096 × 1000.
//!
//! Times are the kernels' own (events around each, `kernel_timing`), the best of 5 launches in a
//! data region; torch's the best of 20 CUDA-event timings. On the host backend the sizes shrink.
//! Arguments: `tensor_bench [SGEMM_SIZE [BF16_SIZE [DGEMM_SIZE]]]`; `TENSOR_BENCH_ONLY=dgemm`
//! or `=wgmma` runs that part alone, `DGEMM_STAGES=4,6` times the DGEMM with those
//! shared-memory stages (default: `DGEMM_SHARED_BYTES`).

use offload::half::bf16;
use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernel_timing::best_kernel_time;
use offload_examples::kernels::dgemm::{self, DGEMM_SHARED_BYTES, DGEMM_STAGE_BYTES};
use offload_examples::kernels::gemm_bf16::{self, ACT_NONE};
use offload_examples::kernels::sgemm_tf32;
use offload_examples::kernels::tensor::MatDims;
use offload_examples::reference_gemm::{
    entry_f64, linear_entry, sgemm_entry, uniform, uniform_bf16, uniform_f64,
};
use offload_examples::reference_torch::{python, BEST_MS};
use offload_examples::tensor_launch;
use std::time::Duration;

const REPEATS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = offload::default_device()?;
    println!(
        "device: {}; dynamic shared memory per block up to {} bytes",
        device.name(),
        device.limits().max_shared_per_block
    );
    let arg = |i: usize, gpu: u32, host: u32| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(if device.is_gpu() { gpu } else { host })
    };
    let only = std::env::var("TENSOR_BENCH_ONLY").ok();
    let runs = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if only.is_none() {
        sgemm(&device, arg(1, 4096, 256))?;
        gemm_bf16(&device, arg(2, 8192, 256))?;
    }
    if runs("dgemm") {
        let size = arg(3, 4096, 256);
        dgemm_bench(&device, size, size)?;
        dgemm_bench(&device, size, (size as u64 * 1000 / 4096) as u32)?;
    }
    // Its tiles need more shared memory than the host backend gives a block.
    if device.is_gpu() && runs("wgmma") {
        for shape in [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 4096, 1000)] {
            gemm_wgmma(&device, shape)?;
        }
    }
    Ok(())
}

fn tflops(size: u32, time: Duration) -> f64 {
    gemm_tflops((size, size, size), time)
}

fn gemm_tflops((m, n, k): (u32, u32, u32), time: Duration) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / time.as_secs_f64() / 1e12
}

fn sgemm(device: &Device, size: u32) -> Result<(), Box<dyn std::error::Error>> {
    let n = size as usize;
    let dims = MatDims {
        m: size,
        n: size,
        k: size,
    };
    let (a, b) = (uniform(n * n, 1), uniform(n * n, 2));
    let mut c = vec![f32::NAN; n * n];
    let launch: Launch<'_> = tensor_launch::sgemm_tf32x3(device, dims, None);
    let time = offload::region_on(device, |r| {
        let (a, b) = (r.to(&a)?, r.to(&b)?);
        let mut c = r.from(&mut c)?;
        best_kernel_time(REPEATS, || {
            sgemm_tf32::sgemm_tf32x3::launch(launch, dims, &a, &b, &mut c)
        })
    })?;
    let worst = sampled_error(n, |i, j| {
        (c[i * n + j] as f64, sgemm_entry(&a, &b, n, n, i, j))
    });
    let ok = worst <= 2f64.powi(-19);
    let ours = tflops(size, time);
    println!(
        "sgemm_tf32x3 {size}^3: {:.3} ms, {ours:.2} TFLOP/s; 512 sampled elements vs CPU f64: \
         worst |error| / sum|a*b| = {worst:.2e}: {}",
        time.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISMATCH" }
    );
    if device.is_gpu() {
        match cublas_sgemm(&a, &b, &c, n) {
            Ok((cublas, errors)) => {
                println!(
                    "cuBLAS fp32 (torch.mm, TF32 off) {size}^3: {cublas:.2} TFLOP/s; sgemm_tf32x3 / cuBLAS = {:.2}\n{errors}",
                    ours / cublas
                );
                Ratio::print(
                    "tensor_bench",
                    &format!("sgemm_tf32x3 {size}^3"),
                    "cuBLAS fp32 (TF32 off)",
                    Measure::Speed,
                    ours / cublas,
                    Goal::None,
                );
            }
            Err(e) => println!("cuBLAS reference unavailable: {e}"),
        }
    }
    if !ok {
        return Err("sgemm_tf32x3 does not match the CPU".into());
    }
    Ok(())
}

/// Largest `|got - want| / Σ|a·b|` over 512 sampled elements; `at(i, j)` gives the kernel's
/// value and the reference `(value, Σ|a·b|)`.
fn sampled_error(n: usize, at: impl Fn(usize, usize) -> (f64, (f64, f64))) -> f64 {
    (0..512)
        .map(|s| {
            let (got, (want, scale)) = at(s * 7919 % n, s * 104_729 % n);
            (got - want).abs() / scale
        })
        .fold(0.0, f64::max)
}

/// cuBLAS fp32 (TF32 off) in TFLOP/s, and the normwise and elementwise errors of our `c` and of
/// cuBLAS's product against an `f64` product of the same `a` and `b` (all on the GPU).
fn cublas_sgemm(a: &[f32], b: &[f32], c: &[f32], n: usize) -> Result<(f64, String), String> {
    let dir = std::env::temp_dir();
    let file = |name: &str, data: &[f32]| -> Result<String, String> {
        let path = dir.join(format!("tensor_bench_{}_{name}.f32", std::process::id()));
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    };
    let (pa, pb, pc) = (file("a", a)?, file("b", b)?, file("c", c)?);
    let script = format!(
        "{BEST_MS}\
         import numpy as np\n\
         torch.backends.cuda.matmul.allow_tf32 = False\n\
         n = {n}\n\
         load = lambda p: torch.from_numpy(np.fromfile(p, dtype=np.float32).reshape(n, n)).cuda()\n\
         a, b, ours = load('{pa}'), load('{pb}'), load('{pc}')\n\
         t = 2 * n ** 3 / (best_ms(lambda: torch.mm(a, b)) * 1e-3) / 1e12\n\
         ref = torch.mm(a.double(), b.double())\n\
         scale = torch.mm(a.double().abs(), b.double().abs())\n\
         def err(x):\n\
         \x20   d = x.double() - ref\n\
         \x20   return (d.norm() / ref.norm()).item(), (d.abs() / scale).max().item()\n\
         mine, theirs = err(ours), err(torch.mm(a, b))\n\
         print(t)\n\
         print('errors against an f64 product of the same inputs (normwise ||C - C64|| / ||C64||, \
         elementwise max |C - C64| / (|A| |B|)): sgemm_tf32x3 %.2e, %.2e; cuBLAS fp32 %.2e, %.2e' \
         % (mine + theirs))\n"
    );
    let out = python(&script);
    for p in [&pa, &pb, &pc] {
        let _ = std::fs::remove_file(p);
    }
    let out = out?;
    let mut lines = out.lines();
    let t = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| format!("unexpected torch output: {out}"))?;
    Ok((t, lines.collect::<Vec<_>>().join("\n")))
}

fn gemm_bf16(device: &Device, size: u32) -> Result<(), Box<dyn std::error::Error>> {
    let n = size as usize;
    let dims = MatDims {
        m: size,
        n: size,
        k: size,
    };
    let (a, w) = (uniform_bf16(n * n, 3, 1.0), uniform_bf16(n * n, 4, 1.0));
    let mut out = vec![bf16::NAN; n * n];
    let launch = tensor_launch::gemm_bf16(device, dims, None);
    let time = offload::region_on(device, |r| {
        let (a, w) = (r.to(&a)?, r.to(&w)?);
        let mut out = r.from(&mut out)?;
        best_kernel_time(REPEATS, || {
            gemm_bf16::gemm_bf16::launch::<bf16>(launch, dims, ACT_NONE, &a, &w, &[], &mut out)
        })
    })?;
    // f32 sums, then the rounding to bf16 (half an ulp, 2^-9 relative to the value, which is at
    // most the scale).
    let worst = sampled_error(n, |i, j| {
        (out[i * n + j].to_f64(), linear_entry(&a, &w, &[], n, i, j))
    });
    let ok = worst <= 2f64.powi(-8);
    let ours = tflops(size, time);
    println!(
        "gemm_bf16 {size}^3 (bf16 out): {:.3} ms, {ours:.1} TFLOP/s; 512 sampled elements vs CPU \
         f64: worst |error| / sum|a*w| = {worst:.2e}: {}",
        time.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISMATCH" }
    );
    if device.is_gpu() {
        let script = format!(
            "{BEST_MS}\
             n = {size}\n\
             a = torch.randn(n, n, device='cuda', dtype=torch.bfloat16)\n\
             w = torch.randn(n, n, device='cuda', dtype=torch.bfloat16)\n\
             print(2 * n ** 3 / (best_ms(lambda: torch.mm(a, w.t())) * 1e-3) / 1e12)\n"
        );
        match python(&script).and_then(|s| s.parse::<f64>().map_err(|e| e.to_string())) {
            Ok(cublas) => {
                println!(
                    "cuBLAS bf16 (torch.mm(a, w.t())) {size}^3: {cublas:.1} TFLOP/s; gemm_bf16 / cuBLAS = {:.2}",
                    ours / cublas
                );
                Ratio::print(
                    "tensor_bench",
                    &format!("gemm_bf16 {size}^3"),
                    "cuBLAS bf16",
                    Measure::Speed,
                    ours / cublas,
                    Goal::None,
                );
            }
            Err(e) => println!("cuBLAS reference unavailable: {e}"),
        }
    }
    if !ok {
        return Err("gemm_bf16 does not match the CPU".into());
    }
    Ok(())
}

/// `dgemm` on `dims` with `stages` shared-memory stages (fewer where the device gives a block
/// less): its best kernel time and its product.
fn time_dgemm(
    device: &Device,
    dims: MatDims,
    stages: u32,
    a: &[f64],
    b: &[f64],
) -> Result<(Duration, Vec<f64>), Box<dyn std::error::Error>> {
    let mut c = vec![f64::NAN; (dims.m * dims.n) as usize];
    let max_shared = device.limits().max_shared_per_block;
    let launch = tensor_launch::dgemm(device, dims, None)
        .dynamic_shared((stages * DGEMM_STAGE_BYTES).min(max_shared));
    let time = offload::region_on(device, |r| {
        let (a, b) = (r.to(a)?, r.to(b)?);
        let mut c = r.from(&mut c)?;
        best_kernel_time(REPEATS, || {
            dgemm::dgemm::launch(launch, dims, &a, &b, &mut c)
        })
    })?;
    Ok((time, c))
}

/// `dgemm` at `size × size × k` against cuBLAS DGEMM (torch.mm on float64) in the same run, with
/// each stage count of `DGEMM_STAGES`; the error of each against a CPU `f64` product over 512
/// sampled elements (`sqrt(Σ diff² / Σ want²)` over them, the normwise error's estimate) must
/// stay within 1e-13.
fn dgemm_bench(device: &Device, size: u32, k: u32) -> Result<(), Box<dyn std::error::Error>> {
    let (n, kk) = (size as usize, k as usize);
    let dims = MatDims {
        m: size,
        n: size,
        k,
    };
    let shape = if k == size {
        format!("{size}^3")
    } else {
        format!("{size}x{size}x{k}")
    };
    let (a, b) = (uniform_f64(n * kk, 5), uniform_f64(kk * n, 6));
    let stages: Vec<u32> = match std::env::var("DGEMM_STAGES") {
        Ok(list) => list
            .split(',')
            .map(|s| s.trim().parse())
            .collect::<Result<_, _>>()?,
        Err(_) => vec![DGEMM_SHARED_BYTES / DGEMM_STAGE_BYTES],
    };
    let mut ok = true;
    let mut results = vec![];
    let mut first = None;
    for v in stages {
        let (time, c) = time_dgemm(device, dims, v, &a, &b)?;
        let (mut diff, mut norm) = (0.0, 0.0);
        for s in 0..512 {
            let (i, j) = (s * 7919 % n, s * 104_729 % n);
            let (want, _) = entry_f64(kk, |d| a[i * kk + d], |d| b[d * n + j]);
            diff += (c[i * n + j] - want).powi(2);
            norm += want * want;
        }
        let err = (diff / norm).sqrt();
        ok &= err <= 1e-13;
        let ours = gemm_tflops((size, size, k), time);
        let name = format!("dgemm ({v} stages)");
        println!(
            "{name} {shape}: {:.3} ms, {ours:.2} TFLOP/s; 512 sampled elements vs CPU f64: \
             normwise error {err:.2e}: {}",
            time.as_secs_f64() * 1e3,
            if err <= 1e-13 { "ok" } else { "MISMATCH" }
        );
        results.push((name, ours));
        first.get_or_insert(c);
    }
    if device.is_gpu() {
        match cublas_dgemm(&a, &b, first.as_deref().unwrap_or_default(), (n, kk)) {
            Ok((cublas, difference)) => {
                println!(
                    "cuBLAS fp64 (torch.mm float64) {shape}: {cublas:.2} TFLOP/s; normwise \
                     difference of dgemm from cuBLAS's product: {difference:.2e}"
                );
                for (i, (name, ours)) in results.into_iter().enumerate() {
                    println!("{name} / cuBLAS fp64 {shape} = {:.3}", ours / cublas);
                    Ratio::print(
                        "tensor_bench",
                        &format!("{name} {shape}"),
                        "cuBLAS fp64 (torch.mm float64)",
                        Measure::Speed,
                        ours / cublas,
                        if i == 0 && k == size {
                            Goal::AtLeast(0.9)
                        } else {
                            Goal::None
                        },
                    );
                }
            }
            Err(e) => println!("cuBLAS reference unavailable: {e}"),
        }
    }
    if !ok {
        return Err("dgemm does not match the CPU".into());
    }
    Ok(())
}

/// cuBLAS DGEMM (torch.mm on float64) of `a` (`n × k`) and `b` (`k × n`) in TFLOP/s, and the
/// normwise difference `‖c − C_cuBLAS‖ / ‖C_cuBLAS‖` of our product `c` from cuBLAS's.
fn cublas_dgemm(
    a: &[f64],
    b: &[f64],
    c: &[f64],
    (n, k): (usize, usize),
) -> Result<(f64, f64), String> {
    let dir = std::env::temp_dir();
    let file = |name: &str, data: &[f64]| -> Result<String, String> {
        let path = dir.join(format!("tensor_bench_{}_{name}.f64", std::process::id()));
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    };
    let (pa, pb, pc) = (file("a", a)?, file("b", b)?, file("c", c)?);
    let script = format!(
        "{BEST_MS}\
         import numpy as np\n\
         n, k = {n}, {k}\n\
         load = lambda p, r, c: torch.from_numpy(np.fromfile(p, dtype=np.float64).reshape(r, c)).cuda()\n\
         a, b, ours = load('{pa}', n, k), load('{pb}', k, n), load('{pc}', n, n)\n\
         print(2 * n * n * k / (best_ms(lambda: torch.mm(a, b)) * 1e-3) / 1e12)\n\
         ref = torch.mm(a, b)\n\
         print(((ours - ref).norm() / ref.norm()).item())\n"
    );
    let out = python(&script);
    for p in [&pa, &pb, &pc] {
        let _ = std::fs::remove_file(p);
    }
    let out = out?;
    let mut values = out.lines().map(|l| l.parse::<f64>());
    match (values.next(), values.next()) {
        (Some(Ok(t)), Some(Ok(d))) => Ok((t, d)),
        _ => Err(format!("unexpected torch output: {out}")),
    }
}

/// `gemm_bf16_wgmma` (warpgroup tensor cores fed by the copy engine, sm_90a) at `m × n × k`
/// (`bf16` out, `A · Wᵀ`) against cuBLAS `bf16` (`torch.mm(a, w.t())`) of the same shape: on
/// one block per multiprocessor (one fits), each streaming its tiles' slices without a break,
/// and on one block per tile, for comparison.
fn gemm_wgmma(
    device: &Device,
    (m, n, k): (u32, u32, u32),
) -> Result<(), Box<dyn std::error::Error>> {
    use offload_examples::kernels::gemm_wgmma::gemm_wgmma_blocks;
    let dims = MatDims { m, n, k };
    let script = format!(
        "{BEST_MS}\
         a = torch.randn({m}, {k}, device='cuda', dtype=torch.bfloat16)\n\
         w = torch.randn({n}, {k}, device='cuda', dtype=torch.bfloat16)\n\
         print(2 * {m} * {n} * {k} / (best_ms(lambda: torch.mm(a, w.t())) * 1e-3) / 1e12)\n"
    );
    let cublas = python(&script).and_then(|s| s.parse::<f64>().map_err(|e| e.to_string()));
    let persistent = gemm_wgmma_blocks(dims).min(device.limits().multiprocessors);
    let grids = [
        (persistent, String::new()),
        (gemm_wgmma_blocks(dims), ", one block per tile".to_string()),
    ];
    for (grid, label) in grids {
        let ours = gemm_wgmma_on(device, dims, grid)?;
        let shape = format!("{m}x{n}x{k}{label}");
        match &cublas {
            Ok(cublas) => {
                println!(
                    "gemm_bf16_wgmma {shape}: {ours:.1} TFLOP/s; cuBLAS bf16 (torch.mm(a, w.t())) \
                     {cublas:.1} TFLOP/s; gemm_bf16_wgmma / cuBLAS = {:.2}",
                    ours / cublas
                );
                Ratio::print(
                    "tensor_bench",
                    &format!("gemm_bf16_wgmma {shape}"),
                    "cuBLAS bf16",
                    Measure::Speed,
                    ours / cublas,
                    Goal::None,
                );
            }
            Err(e) => println!("cuBLAS reference unavailable: {e}"),
        }
    }
    Ok(())
}

/// `gemm_bf16_wgmma` of `dims` on `grid` blocks, checked against the CPU on 512 sampled
/// elements: its TFLOP/s.
fn gemm_wgmma_on(
    device: &Device,
    dims: MatDims,
    grid: u32,
) -> Result<f64, Box<dyn std::error::Error>> {
    use offload_examples::kernels::gemm_wgmma::gemm_bf16_wgmma;
    let MatDims { m, n, k } = dims;
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let (a, w) = (uniform_bf16(mu * ku, 5, 1.0), uniform_bf16(nu * ku, 6, 1.0));
    let mut out = vec![bf16::NAN; mu * nu];
    let launch = tensor_launch::gemm_bf16_wgmma(device, dims, Some(grid));
    let time = offload::region_on(device, |r| {
        let (a, w) = (r.to(&a)?, r.to(&w)?);
        let mut out = r.from(&mut out)?;
        let at = (a.device_ptr(), w.device_ptr(), out.device_ptr());
        let maps = tensor_launch::gemm_wgmma_maps(device, dims, at)?;
        best_kernel_time(REPEATS, || {
            // SAFETY: the maps (copied to the device by the launch) describe `a`, `w` and `out`
            // on this device, mapped for the whole region.
            unsafe { gemm_bf16_wgmma::launch(launch, dims, ACT_NONE, &maps, &[], &mut out) }
        })
    })?;
    let worst = (0..512)
        .map(|s| {
            let (i, j) = (s * 7919 % mu, s * 104_729 % nu);
            let (want, scale) = linear_entry(&a, &w, &[], ku, i, j);
            (out[i * nu + j].to_f64() - want).abs() / scale
        })
        .fold(0.0, f64::max);
    let ok = worst <= 2f64.powi(-8);
    let ours = 2.0 * m as f64 * n as f64 * k as f64 / time.as_secs_f64() / 1e12;
    println!(
        "gemm_bf16_wgmma {m}x{n}x{k} (bf16 out), {grid} blocks: {:.3} ms, {ours:.1} TFLOP/s; 512 \
         sampled elements vs CPU f64: worst |error| / sum|a*w| = {worst:.2e}: {}",
        time.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISMATCH" }
    );
    if !ok {
        return Err("gemm_bf16_wgmma does not match the CPU".into());
    }
    Ok(ours)
}
