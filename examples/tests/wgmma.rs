//! Hopper's warpgroup tensor cores (`offload::mma::wgmma`) fed by the copy engine
//! (`offload::tensor_copy`), on the host backend and on the first GPU:
//! - one warpgroup's `64 × 256` product through tensor maps, with rows and a k tail outside the
//!   matrices (zeros): the host backend bit for bit against the documented order, the GPU within
//!   the documented bound;
//! - on the GPU, `gemm_bf16_wgmma` on shapes with partial tiles and a k tail against `f64`.
//!
//! Where there is no sm_90a image for the GPU (built for sm_90 only, or not a Hopper GPU) the GPU
//! tests check that the launches fail as documented instead. The GPU tests print `SKIPPED` and pass without
//! a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use common::hopper::{failed_as_documented, runs_sm90a};
use offload::half::bf16;
use offload::tensor_copy::TiledLayout;
use offload::{Device, Launch};
use offload_examples::kernels::gemm_wgmma::{gemm_bf16_wgmma, gemm_wgmma_layout};
use offload_examples::kernels::tensor::MatDims;
use offload_examples::kernels::wgmma_tile::{
    wgmma_tile_product, TILE_A_ROWS, TILE_W_ROWS, WGMMA_TILE_SHARED_BYTES,
};
use offload_examples::reference_gemm::{linear_entry, mma_chain_f32, uniform_bf16};
use offload_examples::tensor_launch;

/// The map of a `rows × k` row-major `bf16` matrix in boxes of 64 columns by `box_rows`.
fn layout(rows: usize, k: usize, box_rows: usize) -> TiledLayout {
    gemm_wgmma_layout(rows as u32, k as u32, box_rows)
}

/// `wgmma_tile_product` of an `a_rows × k` A and a `w_rows × k` W on `device`.
fn tile_product(
    device: &Device,
    (a, a_rows): (&[bf16], usize),
    (w, w_rows): (&[bf16], usize),
    k: usize,
) -> offload::Result<Vec<f32>> {
    let mut out = vec![f32::NAN; TILE_A_ROWS * TILE_W_ROWS];
    let launch = Launch::on(device)
        .block(128)
        .dynamic_shared(WGMMA_TILE_SHARED_BYTES);
    offload::region_on(device, |r| {
        let (am, wm) = (r.to(a)?, r.to(w)?);
        let mut o = r.from(&mut out)?;
        let maps = [
            device.tensor_map_2d(am.device_ptr(), &layout(a_rows, k, TILE_A_ROWS))?,
            device.tensor_map_2d(wm.device_ptr(), &layout(w_rows, k, TILE_W_ROWS))?,
        ];
        // SAFETY: the maps (copied to the device by the launch) describe `am` and `wm` on `device`, mapped for the whole region.
        unsafe { wgmma_tile_product::launch(launch, k as u32, &maps, &mut o) }
    })?;
    Ok(out)
}

/// The product in the host backend's documented order: per element, fused multiply-adds over
/// `k` ascending from zero, zeros outside the matrices.
fn reference(a: &[bf16], a_rows: usize, w: &[bf16], w_rows: usize, k: usize) -> Vec<(f32, f64)> {
    let mut out = Vec::with_capacity(TILE_A_ROWS * TILE_W_ROWS);
    for i in 0..TILE_A_ROWS {
        for j in 0..TILE_W_ROWS {
            let at = |m: &[bf16], rows: usize, r: usize, c: usize| {
                if r < rows {
                    m[r * k + c].to_f32()
                } else {
                    0.0
                }
            };
            let terms = (0..k).map(|c| (at(a, a_rows, i, c), at(w, w_rows, j, c)));
            let scale = terms.clone().map(|(x, y)| (x * y).abs() as f64).sum();
            out.push((mma_chain_f32(0.0, terms), scale));
        }
    }
    out
}

/// Rows of A and W short of the boxes, and a k tail (200 = 3 slices and 8 columns).
const SHAPE: (usize, usize, usize) = (50, 200, 200);

#[test]
fn host_tile_product_is_the_documented_order() {
    let (a_rows, w_rows, k) = SHAPE;
    let (a, w) = (
        uniform_bf16(a_rows * k, 1, 1.0),
        uniform_bf16(w_rows * k, 2, 1.0),
    );
    let got = tile_product(&Device::host(), (&a, a_rows), (&w, w_rows), k).unwrap();
    for (idx, (g, (want, _))) in got
        .iter()
        .zip(reference(&a, a_rows, &w, w_rows, k))
        .enumerate()
    {
        assert_eq!(g.to_bits(), want.to_bits(), "element {idx}: {g} vs {want}");
    }
}

#[test]
fn tensor_maps_a_gpu_would_refuse_are_refused_on_the_host() {
    let odd = TiledLayout {
        row_stride_bytes: 2 * 201,
        ..layout(64, 201, 64)
    };
    let err = Device::host().tensor_map_2d(0x1000, &odd).unwrap_err();
    assert!(err.to_string().contains("multiple of 16"), "{err}");
}

#[test]
fn gpu_tile_product_is_within_the_bound() {
    let Some(device) = gpu("gpu_tile_product_is_within_the_bound") else {
        return;
    };
    let (a_rows, w_rows, k) = SHAPE;
    let (a, w) = (
        uniform_bf16(a_rows * k, 1, 1.0),
        uniform_bf16(w_rows * k, 2, 1.0),
    );
    let run = tile_product(&device, (&a, a_rows), (&w, w_rows), k);
    if !runs_sm90a(&device) {
        return failed_as_documented("wgmma_tile_product", run.map(drop));
    }
    let got = run.unwrap();
    for (idx, (g, (want, scale))) in got
        .iter()
        .zip(reference(&a, a_rows, &w, w_rows, k))
        .enumerate()
    {
        let bound = 2.0 * k as f64 * 2f64.powi(-23) * scale;
        assert!(
            ((*g as f64) - want as f64).abs() <= bound,
            "element {idx}: {g} vs {want} (bound {bound:e})"
        );
    }
}

#[test]
fn gpu_gemm_wgmma_matches_f64() {
    let Some(device) = gpu("gpu_gemm_wgmma_matches_f64") else {
        return;
    };
    // Partial tiles in both directions, a k tail, several tiles per block (grid of 3).
    for (m, n, k, grid) in [
        (300, 520, 200, None),
        (256, 512, 1024, Some(3)),
        (129, 257, 8, None),
    ] {
        let dims = MatDims { m, n, k };
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let (a, w) = (uniform_bf16(mu * ku, 3, 1.0), uniform_bf16(nu * ku, 4, 1.0));
        let mut out = vec![bf16::NAN; mu * nu];
        let launch = tensor_launch::gemm_bf16_wgmma(&device, dims, grid);
        let run = offload::region_on(&device, |r| {
            let (am, wm) = (r.to(&a)?, r.to(&w)?);
            let mut o = r.from(&mut out)?;
            let maps =
                tensor_launch::gemm_wgmma_maps(&device, dims, (am.device_ptr(), wm.device_ptr()))?;
            // SAFETY: the maps (copied to the device by the launch) describe `am` and `wm` on
            // `device`, mapped for the whole region.
            unsafe { gemm_bf16_wgmma::launch(launch, dims, &maps, &mut o) }
        });
        if !runs_sm90a(&device) {
            return failed_as_documented("gemm_bf16_wgmma", run);
        }
        run.unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        for i in 0..mu {
            for j in 0..nu {
                let (want, scale) = linear_entry(&a, &w, &[], ku, i, j);
                let got = out[i * nu + j].to_f64();
                // f32 sums (2k·2^-24 of the scale at most) and the rounding to bf16 (2^-9).
                assert!(
                    (got - want).abs() <= 2f64.powi(-8) * scale.max(want.abs()) + 1e-30,
                    "{m}x{n}x{k} ({i}, {j}): {got} vs {want}"
                );
            }
        }
    }
}
