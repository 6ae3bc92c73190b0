//! Tensor cores (`offload::mma`) on the host backend and on the first GPU:
//! - one `mma` per warp for every shape against CPU loops in the documented order: the host
//!   backend bit for bit; the GPU bit for bit for `f64` and within the documented bound for
//!   `f16`, `bf16` and tf32;
//! - the `ldmatrix` loads against fragments built element by element (bit for bit);
//! - the 3×TF32 SGEMM and the `bf16` linear layer on shapes with tails and unaligned rows,
//!   against `f64` references, and the same results whatever the grid;
//! - the DGEMM (`f64` tensor cores of sm_90) on such shapes against a CPU `f64`
//!   product (normwise within 1e-13), the same bits whatever the grid, and on the GPU the same
//!   bits as the host backend.
//!
//! The GPU tests print `SKIPPED` and pass without a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use offload::half::{bf16, f16};
use offload::mma::tf32_round;
use offload::{Device, Launch};
use offload_examples::kernels::dgemm;
use offload_examples::kernels::gemm_bf16::{self, ACT_GELU, ACT_NONE, ACT_RELU};
use offload_examples::kernels::sgemm_tf32;
use offload_examples::kernels::tensor::{self, MatDims};
use offload_examples::reference_gemm::{
    dgemm_cpu, gelu_f64, linear_entry, mma_chain_f32, mma_chain_f64, normwise_error, sgemm_entry,
    uniform, uniform_bf16, uniform_f64,
};
use offload_examples::tensor_launch;

const TILES: usize = 96;

/// Inputs away from zero (subnormal products are outside the documented bound).
fn nonzero(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, seed)
        .into_iter()
        .map(|v| if v.abs() < 1e-3 { 0.5 } else { v })
        .collect()
}

/// The launch the tile kernels get: two blocks of 64 threads (two warps each), so warps take
/// several tiles grid-stride.
fn tile_launch(device: &Device) -> Launch<'_> {
    Launch::on(device).grid(2).block(64)
}

/// `d = a·b + c` per tile, the documented host order, for row-major tiles of `mk`, `kn`, `mn`.
fn tiles_reference(a: &[f32], b: &[f32], c: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    let mut d = vec![0.0; c.len()];
    for t in 0..c.len() / (m * n) {
        for i in 0..m {
            for j in 0..n {
                let terms = (0..k).map(|d| (a[t * m * k + i * k + d], b[t * k * n + d * n + j]));
                d[t * m * n + i * n + j] = mma_chain_f32(c[t * m * n + i * n + j], terms);
            }
        }
    }
    d
}

/// Largest `|got - want| / (2⁻²³ · (|c| + Σ|a·b|))` over all elements: the GPU's error in the
/// units of the documented bound (which allows `2·K`).
fn error_in_ulps(got: &[f32], want: &[f32], a: &[f32], b: &[f32], c: &[f32], k: usize) -> f64 {
    let (m, n) = (16, 8);
    let mut worst = 0.0f64;
    for (e, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (t, i, j) = (e / (m * n), e / n % m, e % n);
        let scale = (0..k).fold(c[e].abs() as f64, |s, d| {
            s + (a[t * m * k + i * k + d] as f64 * b[t * k * n + d * n + j] as f64).abs()
        });
        worst = worst.max((g as f64 - w as f64).abs() / (scale * 2f64.powi(-23)));
    }
    worst
}

/// `m16n8k16` with `bf16` (else `f16`) operands: the host bit for bit; a GPU within `2·16`
/// units.
fn mma_16(device: &Device, use_bf16: bool) {
    let (a, b) = (nonzero(TILES * 256, 1), nonzero(TILES * 128, 2));
    let c = uniform(TILES * 128, 3);
    let mut d = vec![f32::NAN; TILES * 128];
    let (af, bf): (Vec<f32>, Vec<f32>) = if use_bf16 {
        let (a, b): (Vec<bf16>, Vec<bf16>) = (
            a.iter().map(|&v| bf16::from_f32(v)).collect(),
            b.iter().map(|&v| bf16::from_f32(v)).collect(),
        );
        tensor::mma_tiles_16::launch(tile_launch(device), &a, &b, &c, &mut d).unwrap();
        (
            a.iter().map(|v| v.to_f32()).collect(),
            b.iter().map(|v| v.to_f32()).collect(),
        )
    } else {
        let (a, b): (Vec<f16>, Vec<f16>) = (
            a.iter().map(|&v| f16::from_f32(v)).collect(),
            b.iter().map(|&v| f16::from_f32(v)).collect(),
        );
        tensor::mma_tiles_16::launch(tile_launch(device), &a, &b, &c, &mut d).unwrap();
        (
            a.iter().map(|v| v.to_f32()).collect(),
            b.iter().map(|v| v.to_f32()).collect(),
        )
    };
    let want = tiles_reference(&af, &bf, &c, (16, 8, 16));
    let what = if use_bf16 {
        "m16n8k16 bf16"
    } else {
        "m16n8k16 f16"
    };
    check_tiles(device, &d, &want, &af, &bf, &c, 16, what);
}

#[allow(clippy::too_many_arguments)]
fn check_tiles(
    device: &Device,
    got: &[f32],
    want: &[f32],
    a: &[f32],
    b: &[f32],
    c: &[f32],
    k: usize,
    what: &str,
) {
    if device.is_gpu() {
        let units = error_in_ulps(got, want, a, b, c, k);
        eprintln!(
            "{what} on {}: largest error {units:.2} × 2^-23·(|c| + Σ|ab|) (bound {})",
            device.name(),
            2 * k
        );
        assert!(
            units <= 2.0 * k as f64,
            "{what}: error {units} units above the bound"
        );
    } else {
        let same = got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "{what} on the host backend differs from the documented order"
        );
    }
}

fn mma_tf32(device: &Device) {
    let a = nonzero(TILES * 128, 4);
    let b = nonzero(TILES * 64, 5);
    let c = uniform(TILES * 128, 6);
    let mut d = vec![f32::NAN; TILES * 128];
    tensor::mma_tiles_tf32::launch(tile_launch(device), &a, &b, &c, &mut d).unwrap();
    let (ar, br): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&v| tf32_round(v)).collect(),
        b.iter().map(|&v| tf32_round(v)).collect(),
    );
    let want = tiles_reference(&ar, &br, &c, (16, 8, 8));
    check_tiles(device, &d, &want, &ar, &br, &c, 8, "m16n8k8 tf32");
}

/// `f64`: bit for bit on both; on a mismatch, says which other order the GPU matches.
fn mma_f64(device: &Device) {
    let a: Vec<f64> = uniform(TILES * 32, 7)
        .iter()
        .zip(uniform(TILES * 32, 17))
        .map(|(&x, y)| x as f64 + y as f64 * 1e-9)
        .collect();
    let b: Vec<f64> = uniform(TILES * 32, 8)
        .iter()
        .zip(uniform(TILES * 32, 18))
        .map(|(&x, y)| x as f64 + y as f64 * 1e-9)
        .collect();
    let c: Vec<f64> = uniform(TILES * 64, 9)
        .iter()
        .map(|&x| x as f64 * 3.0)
        .collect();
    let mut d = vec![f64::NAN; TILES * 64];
    tensor::mma_tiles_f64::launch(tile_launch(device), &a, &b, &c, &mut d).unwrap();
    type Order = fn(f64, &[(f64, f64)]) -> f64;
    let orders: [(&str, Order); 3] = [
        ("fma chain, k ascending (documented)", |c, t| {
            mma_chain_f64(c, t.iter().copied())
        }),
        ("fma chain, k descending", |c, t| {
            mma_chain_f64(c, t.iter().rev().copied())
        }),
        ("products by fma chain, then + c", |c, t| {
            mma_chain_f64(0.0, t.iter().copied()) + c
        }),
    ];
    let matches: Vec<&str> = orders
        .iter()
        .filter(|(_, order)| {
            (0..d.len()).all(|e| {
                let (t, i, j) = (e / 64, e / 8 % 8, e % 8);
                let terms: Vec<(f64, f64)> = (0..4)
                    .map(|k| (a[t * 32 + i * 4 + k], b[t * 32 + k * 8 + j]))
                    .collect();
                order(c[e], &terms).to_bits() == d[e].to_bits()
            })
        })
        .map(|(name, _)| *name)
        .collect();
    assert!(
        matches.first() == Some(&orders[0].0),
        "m8n8k4 f64 on {}: not the documented order; matches: {matches:?}",
        device.name()
    );
}

/// The `f64` shapes of sm_90 (`K` = 4, 8, 16): bit for bit the documented chain of fused
/// multiply-adds, `k` ascending, on both; on a mismatch, says which other order the GPU matches.
fn mma_f64_16x8(device: &Device) {
    for k in [4usize, 8, 16] {
        let (a, b) = (
            uniform_f64(TILES * 16 * k, 40),
            uniform_f64(TILES * 8 * k, 41),
        );
        let c: Vec<f64> = uniform_f64(TILES * 128, 42)
            .iter()
            .map(|x| x * 3.0)
            .collect();
        let mut d = vec![f64::NAN; TILES * 128];
        let launch = tile_launch(device);
        match k {
            4 => tensor::mma_tiles_f64_16x8::launch::<4>(launch, &a, &b, &c, &mut d),
            8 => tensor::mma_tiles_f64_16x8::launch::<8>(launch, &a, &b, &c, &mut d),
            _ => tensor::mma_tiles_f64_16x8::launch::<16>(launch, &a, &b, &c, &mut d),
        }
        .unwrap();
        let terms = |e: usize| -> Vec<(f64, f64)> {
            let (t, i, j) = (e / 128, e / 8 % 16, e % 8);
            (0..k)
                .map(|d| (a[t * 16 * k + i * k + d], b[t * 8 * k + d * 8 + j]))
                .collect()
        };
        type Order = fn(f64, &[(f64, f64)]) -> f64;
        let orders: [(&str, Order); 4] = [
            ("fma chain, k ascending (documented)", |c, t| {
                mma_chain_f64(c, t.iter().copied())
            }),
            ("fma chain, k descending", |c, t| {
                mma_chain_f64(c, t.iter().rev().copied())
            }),
            ("fma chains of 4, k ascending, then + c", |c, t| {
                t.chunks(4)
                    .map(|q| mma_chain_f64(0.0, q.iter().copied()))
                    .sum::<f64>()
                    + c
            }),
            ("products by fma chain, then + c", |c, t| {
                mma_chain_f64(0.0, t.iter().copied()) + c
            }),
        ];
        let matches: Vec<&str> = orders
            .iter()
            .filter(|(_, order)| {
                (0..d.len()).all(|e| order(c[e], &terms(e)).to_bits() == d[e].to_bits())
            })
            .map(|(name, _)| *name)
            .collect();
        assert!(
            matches.first() == Some(&orders[0].0),
            "m16n8k{k} f64 on {}: not the documented order; matches: {matches:?}",
            device.name()
        );
    }
}

/// The `ldmatrix` loads give the fragments built element by element, bit for bit.
fn ldmatrix_matches_element_loads(device: &Device) {
    let x = uniform_bf16(256, 10, 1.0);
    let y = uniform(128, 11);
    let mut out = vec![0u32; 32 * 32];
    tensor::fragments_from_shared::launch(Launch::on(device).grid(1).block(32), &x, &y, &mut out)
        .unwrap();
    let names = [
        "A", "A", "A", "A", "Bt", "Bt", "Bt", "Bt", "B", "B", "B", "B", "tf32 A", "tf32 A",
        "tf32 A", "tf32 A",
    ];
    for lane in 0..32 {
        for (p, name) in names.iter().enumerate() {
            let (got, want) = (out[32 * lane + 2 * p], out[32 * lane + 2 * p + 1]);
            assert_eq!(
                got,
                want,
                "{name} register {} of lane {lane} on {}",
                p % 4,
                device.name()
            );
        }
    }
}

/// 3×TF32 against `f64` on shapes with tails, unaligned rows (`k` or `n` not a multiple of 4)
/// and `k = 0`; the bound is far below one missing product. A one-block grid gives the same bits.
fn sgemm_tf32x3_matches_f64(device: &Device) {
    for (m, n, k) in [
        (128, 128, 16),
        (257, 131, 67),
        (300, 260, 40),
        (33, 17, 5),
        (1, 1, 1),
        (20, 30, 0),
    ] {
        let dims = MatDims {
            m: m as u32,
            n: n as u32,
            k: k as u32,
        };
        let a = uniform(m * k, 12);
        let b = uniform(k * n, 13);
        let mut c = vec![f32::NAN; m * n];
        sgemm_tf32::sgemm_tf32x3::launch(
            tensor_launch::sgemm_tf32x3(device, dims, None),
            dims,
            &a,
            &b,
            &mut c,
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                let (want, scale) = sgemm_entry(&a, &b, n, k, i, j);
                let err = (c[i * n + j] as f64 - want).abs();
                assert!(
                    err <= scale * 2f64.powi(-19),
                    "sgemm {m}x{n}x{k} ({i}, {j}) on {}: {} vs {want}",
                    device.name(),
                    c[i * n + j]
                );
            }
        }
        let mut one_block = vec![f32::NAN; m * n];
        sgemm_tf32::sgemm_tf32x3::launch(
            tensor_launch::sgemm_tf32x3(device, dims, Some(1)),
            dims,
            &a,
            &b,
            &mut one_block,
        )
        .unwrap();
        assert!(
            common::same_bits(&one_block, &c),
            "sgemm {m}x{n}x{k}: one block differs"
        );
    }
}

/// `c = a · b` by `dgemm` on `device` (`blocks`: the grid, else one per tile).
fn run_dgemm(
    device: &Device,
    dims: MatDims,
    blocks: Option<u32>,
    a: &[f64],
    b: &[f64],
) -> Vec<f64> {
    let mut c = vec![f64::NAN; (dims.m * dims.n) as usize];
    dgemm::dgemm::launch(
        tensor_launch::dgemm(device, dims, blocks),
        dims,
        a,
        b,
        &mut c,
    )
    .unwrap();
    c
}

/// DGEMM against the CPU's `f64` product on shapes with tails, odd `k` and `n`
/// (rows off 16-byte boundaries: staged element by element), interior tiles whose `k` is not a
/// multiple of 16, more slices than stages, and `k = 0`: normwise within 1e-13. A one-block grid
/// and every stage count that fits a block give the same bits; on a GPU, so does the host
/// backend.
fn dgemm_matches_cpu(device: &Device) {
    for (s, (m, n, k)) in [
        (128, 128, 16),
        (256, 256, 96),
        (256, 192, 150),
        (257, 131, 67),
        (300, 260, 40),
        (33, 17, 5),
        (1, 1, 1),
        (20, 30, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let dims = MatDims {
            m: m as u32,
            n: n as u32,
            k: k as u32,
        };
        let (a, b) = (
            uniform_f64(m * k, 50 + s as u64),
            uniform_f64(k * n, 60 + s as u64),
        );
        let c = run_dgemm(device, dims, None, &a, &b);
        let err = normwise_error(&c, &dgemm_cpu(&a, &b, (m, n, k)));
        assert!(
            err <= 1e-13,
            "dgemm {m}x{n}x{k} on {}: normwise error {err:e}",
            device.name()
        );
        let one_block = run_dgemm(device, dims, Some(1), &a, &b);
        assert!(
            one_block
                .iter()
                .zip(&c)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "dgemm {m}x{n}x{k}: one block differs"
        );
        let max_shared = device.limits().max_shared_per_block;
        for stages in 2..=dgemm::DGEMM_MAX_STAGES as u32 {
            let bytes = stages * dgemm::DGEMM_STAGE_BYTES;
            if bytes > max_shared {
                break;
            }
            let launch = tensor_launch::dgemm(device, dims, None).dynamic_shared(bytes);
            let mut staged = vec![f64::NAN; m * n];
            dgemm::dgemm::launch(launch, dims, &a, &b, &mut staged).unwrap();
            assert!(
                staged
                    .iter()
                    .zip(&c)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "dgemm {m}x{n}x{k}: {stages} stages differ"
            );
        }
        if device.is_gpu() {
            let host = run_dgemm(&Device::host(), dims, None, &a, &b);
            assert!(
                host.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()),
                "dgemm {m}x{n}x{k}: the host backend's bits differ from {}'s",
                device.name()
            );
        }
    }
}

/// `gemm_bf16` with `bf16` out (else `f32`), every element as `f64`.
#[allow(clippy::too_many_arguments)]
fn run_linear(
    device: &Device,
    launch: Launch<'_>,
    dims: MatDims,
    act: u32,
    a: &[bf16],
    w: &[bf16],
    bias: &[f32],
    bf16_out: bool,
) -> Vec<f64> {
    let len = (dims.m * dims.n) as usize;
    let _ = device;
    if bf16_out {
        let mut out = vec![bf16::NAN; len];
        gemm_bf16::gemm_bf16::launch::<bf16>(launch, dims, act, a, w, bias, &mut out).unwrap();
        out.iter().map(|v| v.to_f64()).collect()
    } else {
        let mut out = vec![f32::NAN; len];
        gemm_bf16::gemm_bf16::launch::<f32>(launch, dims, act, a, w, bias, &mut out).unwrap();
        out.iter().map(|&v| v as f64).collect()
    }
}

/// The linear layer against `f64` on shapes with tails and unaligned rows (`k` not a multiple
/// of 8) and `k = 0`, and one whose tiles inside the matrices (the unchecked fast path) and at
/// their edges share a launch, with more slices than stages; each activation, with and without bias, `f32` and `bf16` out: within the
/// `f32` accumulation bound plus the output's rounding. A one-block grid gives the same bits.
fn gemm_bf16_matches_f64(device: &Device) {
    let shapes = [
        (128, 256, 32),
        (260, 200, 128),
        (300, 260, 40),
        (77, 45, 19),
        (1, 1, 1),
        (20, 30, 0),
    ];
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        let dims = MatDims {
            m: m as u32,
            n: n as u32,
            k: k as u32,
        };
        let a = uniform_bf16(m * k, 20 + s as u64, 1.0);
        let w = uniform_bf16(n * k, 30 + s as u64, 1.0);
        let bias = uniform(n, 40 + s as u64);
        for (act, with_bias, bf16_out) in [
            (ACT_NONE, false, false),
            (ACT_RELU, true, false),
            (ACT_GELU, true, false),
            (ACT_NONE, true, true),
            (ACT_GELU, false, true),
        ] {
            let b: &[f32] = if with_bias { &bias } else { &[] };
            let got = run_linear(
                device,
                tensor_launch::gemm_bf16(device, dims, None),
                dims,
                act,
                &a,
                &w,
                b,
                bf16_out,
            );
            for i in 0..m {
                for j in 0..n {
                    let (x, scale) = linear_entry(&a, &w, b, k, i, j);
                    let want = match act {
                        ACT_RELU => x.max(0.0),
                        ACT_GELU => gelu_f64(x),
                        _ => x,
                    };
                    // f32 sums (tensor-core steps of 16, then f32 additions), the activation in
                    // f32, then the output's rounding (half an ulp of bf16: 2^-9 relative).
                    let mut tol = scale * 2f64.powi(-20) + want.abs() * 2f64.powi(-21) + 1e-30;
                    if bf16_out {
                        tol += want.abs() * 2f64.powi(-8);
                    }
                    let g = got[i * n + j];
                    assert!(
                        (g - want).abs() <= tol,
                        "gemm_bf16 {m}x{n}x{k} act {act} bias {with_bias} bf16 out {bf16_out} ({i}, {j}) on {}: {g} vs {want}",
                        device.name()
                    );
                }
            }
            let one_block = run_linear(
                device,
                tensor_launch::gemm_bf16(device, dims, Some(1)),
                dims,
                act,
                &a,
                &w,
                b,
                bf16_out,
            );
            assert!(
                one_block
                    .iter()
                    .zip(&got)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "gemm_bf16 {m}x{n}x{k}: one block differs"
            );
        }
    }
}

#[test]
fn host_mma_follows_the_documented_order() {
    let host = Device::host();
    mma_16(&host, true);
    mma_16(&host, false);
    mma_tf32(&host);
    mma_f64(&host);
    mma_f64_16x8(&host);
}

#[test]
fn gpu_mma_within_the_documented_bounds() {
    let Some(gpu) = gpu("gpu_mma_within_the_documented_bounds") else {
        return;
    };
    mma_16(&gpu, true);
    mma_16(&gpu, false);
    mma_tf32(&gpu);
    mma_f64(&gpu);
    mma_f64_16x8(&gpu);
}

#[test]
fn host_ldmatrix_matches_element_loads() {
    ldmatrix_matches_element_loads(&Device::host());
}

#[test]
fn gpu_ldmatrix_matches_element_loads() {
    let Some(gpu) = gpu("gpu_ldmatrix_matches_element_loads") else {
        return;
    };
    ldmatrix_matches_element_loads(&gpu);
}

#[test]
fn host_sgemm_tf32x3_matches_f64() {
    sgemm_tf32x3_matches_f64(&Device::host());
}

#[test]
fn gpu_sgemm_tf32x3_matches_f64() {
    let Some(gpu) = gpu("gpu_sgemm_tf32x3_matches_f64") else {
        return;
    };
    sgemm_tf32x3_matches_f64(&gpu);
}

#[test]
fn host_gemm_bf16_matches_f64() {
    gemm_bf16_matches_f64(&Device::host());
}

#[test]
fn gpu_gemm_bf16_matches_f64() {
    let Some(gpu) = gpu("gpu_gemm_bf16_matches_f64") else {
        return;
    };
    gemm_bf16_matches_f64(&gpu);
}

#[test]
fn host_dgemm_matches_cpu() {
    dgemm_matches_cpu(&Device::host());
}

#[test]
fn gpu_dgemm_matches_cpu() {
    let Some(gpu) = gpu("gpu_dgemm_matches_cpu") else {
        return;
    };
    dgemm_matches_cpu(&gpu);
}
