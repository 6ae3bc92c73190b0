//! A two-layer MLP forward pass on the tensor cores, in one data region:
//!
//! `y = gelu(x · W1ᵀ + b1) · W2ᵀ + b2`
//!
//! `x` holds `tokens` rows of `d_model` values; `W1` (`hidden × d_model`) and `W2`
//! (`d_model × hidden`) are weight matrices as `torch.nn.Linear` holds them. Weights and
//! activations are `bf16`, sums `f32`, bias and GELU in the GEMM's epilogue: `gemm_bf16_wgmma`
//! (warpgroup tensor cores, copy engine) where it runs (an sm_90a image on a Hopper GPU), else
//! `gemm_bf16` (`mma.sync`; the host backend too).
//! The region copies `x` and the weights to the GPU once, keeps the hidden layer there (`alloc`)
//! and copies `y` back once; the forward pass itself is two launches.
//!
//! Checked against a CPU forward pass on sampled rows; on a GPU, timed next to torch's forward
//! pass of the same shapes (`F.linear`, `F.gelu(approximate='tanh')`, `F.linear`).
//! Arguments: `mlp [TOKENS [D_MODEL [HIDDEN]]]` (default 4096 4096 16384; 64 256 1024 on the
//! host backend).

use offload::half::bf16;
use offload_examples::kernel_timing::{last_kernel_time, warm_up, with_device_time};
use offload_examples::kernels::gemm_bf16::{gemm_bf16, ACT_GELU, ACT_NONE};
use offload_examples::kernels::gemm_wgmma::{gemm_bf16_wgmma, gemm_wgmma_blocks};
use offload_examples::kernels::tensor::MatDims;
use offload_examples::reference_gemm::{gelu_f64, linear_entry, uniform, uniform_bf16};
use offload_examples::reference_torch::{python, BEST_MS};
use offload_examples::tensor_launch;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = offload::default_device()?;
    let arg = |i: usize, gpu: usize, host: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(if device.is_gpu() { gpu } else { host })
    };
    let (tokens, d_model, hidden) = (arg(1, 4096, 64), arg(2, 4096, 256), arg(3, 16384, 1024));
    println!(
        "device: {}; MLP {tokens} tokens, {d_model} -> {hidden} -> {d_model}",
        device.name()
    );

    // Weights scaled as a trained layer's (about 1/sqrt(fan-in)), so activations stay near 1.
    let x = uniform_bf16(tokens * d_model, 1, 1.0);
    let w1 = uniform_bf16(hidden * d_model, 2, 1.7 / (d_model as f32).sqrt());
    let b1: Vec<f32> = uniform(hidden, 3).iter().map(|v| v * 0.1).collect();
    let w2 = uniform_bf16(d_model * hidden, 4, 1.7 / (hidden as f32).sqrt());
    let b2: Vec<f32> = uniform(d_model, 5).iter().map(|v| v * 0.1).collect();
    let mut h = vec![bf16::ZERO; tokens * hidden];
    let mut y = vec![bf16::NAN; tokens * d_model];

    let up = MatDims {
        m: tokens as u32,
        n: hidden as u32,
        k: d_model as u32,
    };
    let down = MatDims {
        m: tokens as u32,
        n: d_model as u32,
        k: hidden as u32,
    };
    let weights = (&x[..], &w1[..], &b1[..], &w2[..], &b2[..]);
    let wgmma = tensor_launch::runs_sm90a(&device);
    let [best, up_time, down_time] =
        forward_passes(&device, wgmma, (up, down), weights, &mut h, &mut y)?;
    let flop = 2.0 * tokens as f64 * d_model as f64 * hidden as f64 * 2.0;
    println!(
        "forward pass (two launches of {}, kernel time, best of 5): {:.3} ms, {:.1} TFLOP/s \
         (best pass: up projection with GELU {:.3} ms, down projection {:.3} ms)",
        if wgmma {
            "gemm_bf16_wgmma"
        } else {
            "gemm_bf16"
        },
        best.as_secs_f64() * 1e3,
        flop / best.as_secs_f64() / 1e12,
        up_time.as_secs_f64() * 1e3,
        down_time.as_secs_f64() * 1e3
    );

    let worst = check_rows(&x, &w1, &b1, &w2, &b2, &y, (tokens, d_model, hidden));
    let ok = worst <= 1.0;
    println!(
        "{} sampled rows against a CPU forward pass: worst error {worst:.2} of the tolerance: {}",
        tokens.min(4),
        if ok { "ok" } else { "MISMATCH" }
    );
    if device.is_gpu() {
        match torch_ms(tokens, d_model, hidden) {
            Ok(ms) => println!(
                "torch (cuBLAS) forward pass of the same shapes: {ms:.3} ms; offload / torch time = {:.2}",
                best.as_secs_f64() * 1e3 / ms
            ),
            Err(e) => println!("torch reference unavailable: {e}"),
        }
    }
    if !ok {
        return Err("the MLP does not match the CPU".into());
    }
    Ok(())
}

/// Five forward passes in one data region (`x` and the weights copied in once, the hidden layer
/// `h` only on the device, `y` copied back once), on `gemm_bf16_wgmma` if `wgmma` (one block per
/// multiprocessor, each taking its tiles in turn), else on `gemm_bf16`: the best kernel time
/// (events) of the two launches, and the times of each launch in that pass.
#[allow(clippy::type_complexity)]
fn forward_passes(
    device: &offload::Device,
    wgmma: bool,
    (up, down): (MatDims, MatDims),
    (x, w1, b1, w2, b2): (&[bf16], &[bf16], &[f32], &[bf16], &[f32]),
    h: &mut [bf16],
    y: &mut [bf16],
) -> offload::Result<[Duration; 3]> {
    let sms = device.limits().multiprocessors;
    let launch = |dims: MatDims| {
        if wgmma {
            let grid = gemm_wgmma_blocks(dims).min(sms);
            tensor_launch::gemm_bf16_wgmma(device, dims, Some(grid))
        } else {
            tensor_launch::gemm_bf16(device, dims, None)
        }
    };
    let (up_launch, down_launch) = (launch(up), launch(down));
    offload::region_on(device, |r| {
        let (x, w1, b1, w2, b2) = (r.to(x)?, r.to(w1)?, r.to(b1)?, r.to(w2)?, r.to(b2)?);
        let mut h = r.alloc(h)?;
        let mut y = r.from(y)?;
        let maps = if wgmma {
            let (xp, w1p, w2p) = (x.device_ptr(), w1.device_ptr(), w2.device_ptr());
            let (hp, yp) = (h.device_ptr(), y.device_ptr());
            Some((
                tensor_launch::gemm_wgmma_maps(device, up, (xp, w1p, hp))?,
                tensor_launch::gemm_wgmma_maps(device, down, (hp, w2p, yp))?,
            ))
        } else {
            None
        };
        // The two layers, each timed on the device.
        let mut pass = || -> offload::Result<[Duration; 2]> {
            let time = last_kernel_time;
            if let Some((up_maps, down_maps)) = &maps {
                // SAFETY: the maps (copied to the device by the launch) describe `x`, `w1`, `w2`,
                // `h` and `y` on this device, mapped for the whole region; each launch writes
                // only its out (`h`, then `y`), which the other map of that launch does not
                // describe.
                unsafe {
                    gemm_bf16_wgmma::launch(up_launch, up, ACT_GELU, up_maps, &b1, &mut h)?;
                    let first = time();
                    gemm_bf16_wgmma::launch(down_launch, down, ACT_NONE, down_maps, &b2, &mut y)?;
                    Ok([first, time()])
                }
            } else {
                gemm_bf16::launch::<bf16>(up_launch, up, ACT_GELU, &x, &w1, &b1, &mut h)?;
                let first = time();
                gemm_bf16::launch::<bf16>(down_launch, down, ACT_NONE, &h, &w2, &b2, &mut y)?;
                Ok([first, time()])
            }
        };
        // Each kernel timed by events, as torch times its forward pass.
        with_device_time(|| {
            warm_up(|| pass().map(drop))?;
            let mut best = [Duration::MAX; 3];
            for _ in 0..5 {
                let [first, second] = pass()?;
                if first + second < best[0] {
                    best = [first + second, first, second];
                }
            }
            Ok(best)
        })
    })
}

/// The largest error on sampled rows of `y`, as a fraction of its tolerance: the CPU computes
/// each row in `f64`, rounding the hidden layer to `bf16` as the GPU does; a hidden value may
/// still land on the other side of a rounding boundary (half an ulp of bf16, 2⁻⁹ relative), and
/// `y` is rounded to `bf16` too.
fn check_rows(
    x: &[bf16],
    w1: &[bf16],
    b1: &[f32],
    w2: &[bf16],
    b2: &[f32],
    y: &[bf16],
    (tokens, d_model, hidden): (usize, usize, usize),
) -> f64 {
    let mut worst = 0.0f64;
    for s in 0..tokens.min(4) {
        let t = s * 7919 % tokens;
        let h: Vec<bf16> = (0..hidden)
            .map(|j| bf16::from_f64(gelu_f64(linear_entry(x, w1, b1, d_model, t, j).0)))
            .collect();
        for j in 0..d_model {
            let (want, scale) = linear_entry(&h, w2, b2, hidden, 0, j);
            let tol = scale * 2f64.powi(-8) + want.abs() * 2f64.powi(-8);
            worst = worst.max((y[t * d_model + j].to_f64() - want).abs() / tol);
        }
    }
    worst
}

/// torch's forward pass of the same shapes in `bf16`, best of 20, in milliseconds.
fn torch_ms(tokens: usize, d_model: usize, hidden: usize) -> Result<f64, String> {
    let script = format!(
        "{BEST_MS}\
         import torch.nn.functional as F\n\
         t, d, h = {tokens}, {d_model}, {hidden}\n\
         kw = dict(device='cuda', dtype=torch.bfloat16)\n\
         x = torch.randn(t, d, **kw)\n\
         w1, b1 = torch.randn(h, d, **kw) / d ** 0.5, torch.randn(h, **kw) * 0.1\n\
         w2, b2 = torch.randn(d, h, **kw) / h ** 0.5, torch.randn(d, **kw) * 0.1\n\
         print(best_ms(lambda: F.linear(F.gelu(F.linear(x, w1, b1), approximate='tanh'), w2, b2)))\n"
    );
    python(&script)?
        .parse()
        .map_err(|e| format!("unexpected torch output: {e}"))
}
