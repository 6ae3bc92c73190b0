//! Benchmarks of the block model on the default device, each checked against the CPU and printed
//! next to a reference measured in the same run:
//! - `block_sum` of 2^28 f32 (read bandwidth) against a device-to-device memcpy (read + write);
//! - tiled `sgemm` at 4096³ (GFLOP/s) against cuBLAS fp32 without TF32, through torch (`python3`)
//!   when it is installed.
//!
//! Times are the kernel's alone (events around it, `kernel_timing`), the best of several
//! launches. On the host backend the sizes shrink so that it finishes.

use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernel_timing::best_kernel_time;
use offload_examples::kernels::block::{self, GemmDims, SGEMM_THREADS, SGEMM_TILE};
use offload_examples::reference_bandwidth;
use offload_examples::reference_torch::{python, BEST_MS};

const REPEATS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = offload::default_device()?;
    println!("device: {}", device.name());
    let (sum_n, gemm_n) = if device.is_gpu() {
        (1usize << 28, 4096u32)
    } else {
        (1 << 22, 512)
    };
    reduction(&device, sum_n)?;
    sgemm(&device, gemm_n)?;
    Ok(())
}

fn reduction(device: &Device, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let x: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 1e-3 - 0.4).collect();
    let limits = device.limits();
    let block = 256u32;
    // Enough blocks to fill every multiprocessor; each thread then reads many 16-byte chunks.
    let blocks = limits.multiprocessors * (limits.threads_per_multiprocessor / block).max(1);
    let mut partial = vec![0.0f32; blocks as usize];
    let time = best_kernel_time(REPEATS, || {
        block::block_sum::launch(
            Launch::on(device).grid(blocks).block(block),
            &x,
            &mut partial,
        )
    })?;
    let total: f64 = partial.iter().map(|&p| p as f64).sum();
    let expected: f64 = x.iter().map(|&v| v as f64).sum();
    let magnitude: f64 = x.iter().map(|&v| v.abs() as f64).sum();
    let ok = (total - expected).abs() <= 1e-5 * magnitude;
    let gbps = (n * 4) as f64 / time.as_secs_f64() / 1e9;
    println!(
        "block_sum of {n} f32 ({blocks} blocks of {block}, then {blocks} partials summed on the host): \
         {:.3} ms, {gbps:.0} GB/s read; sum {total:.6e} vs CPU {expected:.6e}: {}",
        time.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISMATCH" }
    );
    if let Some(memcpy) = reference_bandwidth::device_to_device(device, n * 4)? {
        println!(
            "device-to-device memcpy of the same bytes: {memcpy:.0} GB/s (read + write); \
             block_sum / memcpy = {:.2}",
            gbps / memcpy
        );
        Ratio::print(
            "block_bench",
            &format!("block_sum of 2^{} f32 (read)", n.trailing_zeros()),
            "device-to-device memcpy (read + write)",
            Measure::Speed,
            gbps / memcpy,
            Goal::None,
        );
    }
    if !ok {
        return Err("block_sum does not match the CPU".into());
    }
    Ok(())
}

fn sgemm(device: &Device, size: u32) -> Result<(), Box<dyn std::error::Error>> {
    let len = (size * size) as usize;
    let a: Vec<f32> = (0..len)
        .map(|i| ((i * 7 % 101) as f32) * 0.01 - 0.5)
        .collect();
    let b: Vec<f32> = (0..len)
        .map(|i| ((i * 13 % 97) as f32) * 0.01 - 0.5)
        .collect();
    let mut c = vec![0.0f32; len];
    let dims = GemmDims {
        m: size,
        n: size,
        k: size,
    };
    let launch = Launch::on(device)
        .grid((size / SGEMM_TILE, size / SGEMM_TILE))
        .block(SGEMM_THREADS);
    let time = best_kernel_time(REPEATS, || {
        block::sgemm::launch(launch, dims, &a, &b, &mut c)
    })?;
    // A sample of C against f64 dot products (the whole product is too slow on the CPU).
    let n = size as usize;
    let mut worst = 0.0f64;
    for s in 0..512 {
        let (i, j) = (s * 7919 % n, s * 104_729 % n);
        let want: f64 = (0..n)
            .map(|d| a[i * n + d] as f64 * b[d * n + j] as f64)
            .sum();
        worst = worst.max((c[i * n + j] as f64 - want).abs());
    }
    let ok = worst <= 1e-5 * n as f64;
    let gflops = 2.0 * (size as f64).powi(3) / time.as_secs_f64() / 1e9;
    println!(
        "sgemm {size}x{size}x{size}: {:.3} ms, {gflops:.0} GFLOP/s; 512 sampled elements vs CPU f64: \
         worst error {worst:.2e}: {}",
        time.as_secs_f64() * 1e3,
        if ok { "ok" } else { "MISMATCH" }
    );
    if device.is_gpu() {
        match cublas_gflops(size) {
            Ok(cublas) => {
                println!(
                    "cuBLAS fp32 (torch.mm, TF32 off) {size}^3: {cublas:.0} GFLOP/s; sgemm / cuBLAS = {:.2}",
                    gflops / cublas
                );
                Ratio::print(
                    "block_bench",
                    &format!("SIMT sgemm {size}^3"),
                    "cuBLAS fp32 (TF32 off)",
                    Measure::Speed,
                    gflops / cublas,
                    Goal::None,
                );
            }
            Err(e) => println!("cuBLAS reference unavailable: {e}"),
        }
    }
    if !ok {
        return Err("sgemm does not match the CPU".into());
    }
    Ok(())
}

/// torch.mm of two size² fp32 matrices with TF32 off (cuBLAS SGEMM), best of 20, in GFLOP/s.
fn cublas_gflops(size: u32) -> Result<f64, String> {
    let script = format!(
        "{BEST_MS}\
         torch.backends.cuda.matmul.allow_tf32 = False\n\
         n = {size}\n\
         a = torch.randn(n, n, device='cuda'); b = torch.randn(n, n, device='cuda')\n\
         print(2 * n ** 3 / (best_ms(lambda: torch.mm(a, b)) * 1e-3) / 1e9)\n"
    );
    python(&script)?
        .parse()
        .map_err(|e| format!("unexpected torch output: {e}"))
}
