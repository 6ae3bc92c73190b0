//! `kernels::stencil_tma::stencil7_tma` (the 7-point 3D stencil through the copy engine) against
//! the CPU loop, bit for bit, on the host backend and on the first GPU: grids whose sides are no
//! multiples of the tiles or the runs, every tile shape (on the host those whose ring fits its
//! 48 KiB of shared memory), rings of 3 and more, and grids of fewer blocks than work items.
//!
//! Where the GPU has no bulk tensor copies (no sm_90a image, or not a Hopper) the GPU test checks
//! that the launches fail as documented instead; without a GPU it prints `SKIPPED` and passes
//! (with `OFFLOAD_REQUIRE_GPU=1` it fails).

mod common;

use common::gpu::gpu;
use common::hopper::failed_as_documented;
use offload::{Device, Error};
use offload_examples::kernels::stencil_tma::{stencil_tma_shared_bytes, TmaMarch};
use offload_examples::kernels::stencils::Params3;
use offload_examples::reference;
use offload_examples::stencil_tma_launch::{stencil7_tma_on, TmaTile};
use offload_examples::tensor_launch::runs_sm90a;

/// The grids: one smaller than any tile, and two with partial tiles and runs in every direction.
const GRIDS: [(u32, u32, u32); 3] = [(8, 5, 3), (68, 21, 9), (132, 35, 40)];

/// Tile shapes (every instance) with a ring, planes per run and blocks (`None`: one per item).
const SHAPES: [(TmaTile, u32, u32, Option<u32>); 8] = [
    (TmaTile::new(64, 16, 2), 3, 4, None),
    (TmaTile::new(64, 16, 4), 4, 7, Some(3)),
    (TmaTile::new(64, 32, 2), 5, 64, None),
    (TmaTile::new(64, 32, 4), 3, 1, Some(2)),
    (TmaTile::new(128, 16, 2), 4, 16, None),
    (TmaTile::new(128, 16, 4), 3, 5, Some(1)),
    (TmaTile::new(128, 32, 2), 4, 8, None),
    (TmaTile::new(128, 32, 4), 3, 3, Some(4)),
];

/// `stencil7_tma` of a `grid` of pseudo-random points on `device` with one shape.
fn run(
    device: &Device,
    grid: Params3,
    (tile, ring, planes, blocks): (TmaTile, u32, u32, Option<u32>),
    input: &[f32],
) -> offload::Result<Vec<f32>> {
    let mut out = vec![f32::NAN; input.len()];
    offload::region_on(device, |r| {
        let i = r.to(input)?;
        let mut o = r.from(&mut out)?;
        let march = TmaMarch { ring, planes };
        stencil7_tma_on(device, (tile, march, blocks), grid, &i, &mut o)
    })?;
    Ok(out)
}

/// Every grid in every shape that fits `device`'s shared memory, against the CPU loop (every
/// case runs; the failures are listed together).
fn matches_cpu(device: &Device) -> offload::Result<()> {
    let mut failures = Vec::new();
    for (nx, ny, nz) in GRIDS {
        let grid = Params3 {
            nx,
            ny,
            nz,
            centre: 0.3,
        };
        let input = common::floats((nx * ny * nz) as usize, 41);
        let mut want = vec![0.0; input.len()];
        reference::stencil7(grid, &input, &mut want);
        for shape in SHAPES {
            let (t, ring, ..) = shape;
            if stencil_tma_shared_bytes(t.tx, t.ty, ring) > device.limits().max_shared_per_block {
                continue;
            }
            let got = run(device, grid, shape, &input)?;
            let wrong: Vec<usize> = (0..got.len())
                .filter(|&i| got[i].to_bits() != want[i].to_bits())
                .collect();
            if let Some(&i) = wrong.first() {
                let (x, y, z) = (i as u32 % nx, i as u32 / nx % ny, i as u32 / nx / ny);
                failures.push(format!(
                    "{nx}x{ny}x{nz} with {shape:?}: {} points differ, the first ({x}, {y}, {z}): \
                     {} instead of {}",
                    wrong.len(),
                    got[i],
                    want[i]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "on {}:\n{}",
        device.name(),
        failures.join("\n")
    );
    Ok(())
}

#[test]
fn host_stencil7_tma_matches_cpu() {
    matches_cpu(&Device::host()).unwrap();
}

#[test]
fn host_refuses_what_the_kernel_cannot_run() {
    let device = Device::host();
    let grid = |nx| Params3 {
        nx,
        ny: 4,
        nz: 4,
        centre: 0.3,
    };
    let input = common::floats(4 * 4 * 6, 42);
    // Rows of 6 points are no whole 16-byte chunks: the copy engine refuses the map.
    let odd = run(&device, grid(6), SHAPES[0], &input).unwrap_err();
    assert!(odd.to_string().contains("multiple of 16"), "{odd}");
    // A shape without an instance.
    let shape = (TmaTile::new(32, 8, 1), 3, 4, None);
    match run(&device, grid(4), shape, &input[..64]) {
        Err(Error::InvalidArgument {
            argument: "tile", ..
        }) => {}
        other => panic!("expected InvalidArgument for the tile, got {other:?}"),
    }
}

#[test]
fn gpu_stencil7_tma_matches_cpu() {
    let Some(device) = gpu("gpu_stencil7_tma_matches_cpu") else {
        return;
    };
    if !runs_sm90a(&device) {
        let grid = Params3 {
            nx: 8,
            ny: 5,
            nz: 3,
            centre: 0.3,
        };
        let input = common::floats(120, 43);
        return failed_as_documented(
            "stencil7_tma",
            run(&device, grid, SHAPES[0], &input).map(drop),
        );
    }
    matches_cpu(&device).unwrap();
}
