//! Hopper's warpgroup tensor cores (`offload::mma::wgmma`) fed by the copy engine
//! (`offload::tensor_copy`), on the host backend and on the first GPU:
//! - one warpgroup's `64 × 256` product through tensor maps, with rows and a k tail outside the
//!   matrices (zeros): the host backend bit for bit against the documented order, the GPU within
//!   the documented bound;
//! - a box loaded and stored back through the copy engine (`box_round_trip`), partly outside
//!   both matrices, swizzled and not: the host backend and the GPU against the expected copy; a
//!   box whose first column is off a 16-byte boundary refused with a panic on both (the H200's
//!   copy engine faults on one), the GPU usable afterwards;
//! - on the GPU, `gemm_bf16_wgmma` on shapes with partial tiles and a k tail against `f64`,
//!   with and without bias and GELU.
//!
//! Where there is no sm_90a image for the GPU (built for sm_90 only, or not a Hopper GPU) the GPU
//! tests check that the launches fail as documented instead. The GPU tests print `SKIPPED` and pass without
//! a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use common::hopper::failed_as_documented;
use offload::half::bf16;
use offload::tensor_copy::TiledLayout;
use offload::{Device, Launch};
use offload_examples::kernels::box_round_trip::{box_round_trip, ROUND_TRIP_SHARED_BYTES};
use offload_examples::kernels::gemm_bf16::{ACT_GELU, ACT_NONE};
use offload_examples::kernels::gemm_wgmma::{gemm_bf16_wgmma, gemm_wgmma_layout};
use offload_examples::kernels::tensor::MatDims;
use offload_examples::kernels::wgmma_tile::{
    wgmma_tile_product, TILE_A_ROWS, TILE_W_ROWS, WGMMA_TILE_SHARED_BYTES,
};
use offload_examples::reference_gemm::{
    gelu_f64, linear_entry, mma_chain_f32, uniform, uniform_bf16,
};
use offload_examples::tensor_launch::{self, runs_sm90a};

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

/// Source and destination of the round trip: `rows × cols` `u16` matrices (rows of 104 and 72
/// elements: multiples of 16 bytes).
const SRC: (usize, usize) = (40, 104);
const DST: (usize, usize) = (30, 72);
/// The box (columns, rows), where it is loaded from (column, row) and stored to: past the
/// source's last row and column, and past the destination's (`ALIGNED`); loaded from or stored
/// to columns off the 16-byte chunks, which `copy_box_2d` and `store_box_2d` refuse
/// (`OFF_CHUNKS`).
const BOX: (usize, usize) = (64, 16);
type Corners = ((i32, i32), (i32, i32));
const ALIGNED: Corners = ((48, 30), (16, 20));
const OFF_CHUNKS: [Corners; 2] = [((50, 30), (16, 20)), ((48, 30), (20, 20))];
/// What the destination starts as.
const UNTOUCHED: u16 = 0xdead;

/// `box_round_trip` on `device` from and to `corners` (`swizzle`: both maps 128-byte
/// swizzled): the destination.
fn round_trip(device: &Device, swizzle: bool, corners: Corners) -> offload::Result<Vec<u16>> {
    let ((from_col, from_row), (to_col, to_row)) = corners;
    let src: Vec<u16> = (0..SRC.0 * SRC.1).map(|i| i as u16 + 1).collect();
    let mut dst = vec![UNTOUCHED; DST.0 * DST.1];
    let layout = |(rows, cols): (usize, usize)| TiledLayout {
        element_bytes: 2,
        cols: cols as u64,
        rows: rows as u64,
        row_stride_bytes: 2 * cols as u64,
        box_cols: BOX.0 as u32,
        box_rows: BOX.1 as u32,
        swizzle_128: swizzle,
    };
    let launch = Launch::on(device)
        .block(32)
        .dynamic_shared(ROUND_TRIP_SHARED_BYTES);
    offload::region_on(device, |r| {
        let s = r.to(&src)?;
        let mut d = r.tofrom(&mut dst)?;
        let maps = [
            device.tensor_map_2d(s.device_ptr(), &layout(SRC))?,
            device.tensor_map_2d(d.device_ptr(), &layout(DST))?,
        ];
        let bytes = layout(SRC).box_bytes();
        // SAFETY: the maps (copied to the device by the launch) describe `s` and `d` on `device`,
        // mapped for the whole region.
        unsafe {
            box_round_trip::launch(
                launch, &maps, bytes, from_col, from_row, to_col, to_row, &mut d,
            )
        }
    })?;
    Ok(dst)
}

/// The destination after the round trip: inside the stored box, the source's element (zero
/// outside the source); elsewhere untouched.
fn round_trip_expected(((from_col, from_row), (to_col, to_row)): Corners) -> Vec<u16> {
    let mut want = vec![UNTOUCHED; DST.0 * DST.1];
    for r in 0..BOX.1 as i32 {
        for c in 0..BOX.0 as i32 {
            let (dr, dc) = (to_row + r, to_col + c);
            if dr as usize >= DST.0 || dc as usize >= DST.1 {
                continue;
            }
            let (sr, sc) = ((from_row + r) as usize, (from_col + c) as usize);
            let v = if sr < SRC.0 && sc < SRC.1 {
                (sr * SRC.1 + sc) as u16 + 1
            } else {
                0
            };
            want[dr as usize * DST.1 + dc as usize] = v;
        }
    }
    want
}

/// Checks that `run`, a round trip from or to a column off the 16-byte chunks, was refused by
/// `copy_box_2d` or `store_box_2d`: a panic with their message on the host, one at the call in
/// the kernel's source on a GPU (whose panic records hold the location alone).
fn refused_off_chunks(run: offload::Result<Vec<u16>>, corners: Corners) {
    let err = run
        .expect_err("a box off the 16-byte chunks was copied")
        .to_string();
    assert!(
        err.contains("the box's first column must lie at a 16-byte boundary")
            || err.contains("panicked at") && err.contains("box_round_trip.rs"),
        "{corners:?}: {err}"
    );
}

#[test]
fn host_box_round_trip_stores_the_box_inside_the_matrix() {
    for swizzle in [false, true] {
        let got = round_trip(&Device::host(), swizzle, ALIGNED).unwrap();
        assert!(got == round_trip_expected(ALIGNED), "swizzle {swizzle}");
        for corners in OFF_CHUNKS {
            refused_off_chunks(round_trip(&Device::host(), swizzle, corners), corners);
        }
    }
}

/// The round trip on the GPU, at the chunks; with `off_chunks`, first the refused ones, so that
/// the one at the chunks shows the GPU still works after them.
fn gpu_round_trip(test: &str, off_chunks: bool) {
    let Some(device) = gpu(test) else {
        return;
    };
    for swizzle in [true, false] {
        if off_chunks && runs_sm90a(&device) {
            for corners in OFF_CHUNKS {
                refused_off_chunks(round_trip(&device, swizzle, corners), corners);
            }
        }
        let run = round_trip(&device, swizzle, ALIGNED);
        if !runs_sm90a(&device) {
            return failed_as_documented("box_round_trip", run.map(drop));
        }
        let got = run.unwrap_or_else(|e| panic!("swizzle {swizzle}: {e}"));
        let want = round_trip_expected(ALIGNED);
        let wrong = (0..got.len()).find(|&i| got[i] != want[i]);
        assert!(
            wrong.is_none(),
            "swizzle {swizzle}: element {wrong:?}: {:#x?} vs {:#x?}",
            wrong.map(|i| got[i]),
            wrong.map(|i| want[i])
        );
    }
}

#[test]
fn gpu_box_round_trip_stores_the_box_inside_the_matrix() {
    gpu_round_trip("gpu_box_round_trip_stores_the_box_inside_the_matrix", false);
}

#[test]
fn gpu_box_off_chunk_boundaries_is_refused_and_the_gpu_stays_usable() {
    gpu_round_trip(
        "gpu_box_off_chunk_boundaries_is_refused_and_the_gpu_stays_usable",
        true,
    );
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
    // Partial tiles in both directions, a k tail, several tiles per block (grid of 3); plain,
    // with bias, with bias and GELU.
    for (m, n, k, grid) in [
        (300, 520, 200, None),
        (256, 512, 1024, Some(3)),
        (129, 264, 8, None),
    ] {
        let dims = MatDims { m, n, k };
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let (a, w) = (uniform_bf16(mu * ku, 3, 1.0), uniform_bf16(nu * ku, 4, 1.0));
        let bias = uniform(nu, 5);
        for (act, with_bias) in [(ACT_NONE, false), (ACT_NONE, true), (ACT_GELU, true)] {
            let b: &[f32] = if with_bias { &bias } else { &[] };
            let mut out = vec![bf16::NAN; mu * nu];
            let launch = tensor_launch::gemm_bf16_wgmma(&device, dims, grid);
            let run = offload::region_on(&device, |r| {
                let (am, wm) = (r.to(&a)?, r.to(&w)?);
                let mut o = r.from(&mut out)?;
                let at = (am.device_ptr(), wm.device_ptr(), o.device_ptr());
                let maps = tensor_launch::gemm_wgmma_maps(&device, dims, at)?;
                // SAFETY: the maps (copied to the device by the launch) describe `am`, `wm` and
                // `o` on `device`, mapped for the whole region.
                unsafe { gemm_bf16_wgmma::launch(launch, dims, act, &maps, b, &mut o) }
            });
            if !runs_sm90a(&device) {
                return failed_as_documented("gemm_bf16_wgmma", run);
            }
            let case = format!("{m}x{n}x{k} act {act} bias {with_bias}");
            run.unwrap_or_else(|e| panic!("{case}: {e}"));
            for i in 0..mu {
                for j in 0..nu {
                    let (x, scale) = linear_entry(&a, &w, b, ku, i, j);
                    let want = if act == ACT_GELU { gelu_f64(x) } else { x };
                    let got = out[i * nu + j].to_f64();
                    // f32 sums (2k·2^-24 of the scale at most, through GELU's slope, below 1.2),
                    // the activation in f32, the rounding to bf16 (2^-9 relative).
                    let tol = 1.2 * 2.0 * ku as f64 * 2f64.powi(-24) * scale
                        + want.abs() * (2f64.powi(-8) + 2f64.powi(-21))
                        + 1e-30;
                    assert!(
                        (got - want).abs() <= tol,
                        "{case} ({i}, {j}): {got} vs {want}"
                    );
                }
            }
        }
    }
}
