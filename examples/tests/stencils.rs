//! Stencils written with the grid API (`#[grid(..)]` outputs) on the host backend and on the
//! first GPU, against plain CPU loops, bit for bit: extents that are not whole 16-byte chunks,
//! tiny grids, unaligned slices, the default launch and explicit shapes, 2D and 3D; the error for
//! an output whose length is not the grid's, and on the host the output of a failed launch.
//!
//! The GPU tests print `SKIPPED` and pass without a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use offload::{Device, Dim3, Error, Launch};
use offload_examples::kernels::stencils::{self, Params3};
use offload_examples::kernels::Grid2;
use offload_examples::reference;

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i * 7919 % 1009) as f32 * 0.5).collect()
}

/// The default launch, then shapes with fewer threads than strips and 2D and 3D blocks.
fn launches(device: &Device) -> Vec<Launch<'_>> {
    vec![
        Launch::on(device),
        Launch::on(device).grid(1).block(1),
        Launch::on(device).grid(3).block(32),
        Launch::on(device).grid(5).block(Dim3::new(8, 4, 2)),
    ]
}

fn stencil5_matches_cpu(device: &Device) {
    for (width, height) in [
        (1, 1),
        (2, 3),
        (3, 2),
        (5, 7),
        (13, 9),
        (16, 16),
        (37, 21),
        (64, 3),
        (130, 67),
    ] {
        let grid = Grid2 {
            width,
            height,
            centre: 0.5,
        };
        let n = (width * height) as usize;
        // One element more, to read and write the grids at an odd offset too (no 16-byte rows).
        let input = values(n + 1);
        for skip in [0, 1] {
            let mut want = vec![0.0; n];
            reference::stencil5(grid, &input[skip..skip + n], &mut want);
            for launch in launches(device) {
                let mut out = vec![f32::NAN; n + 1];
                stencils::stencil5_tiles::launch(
                    launch,
                    grid,
                    &input[skip..skip + n],
                    &mut out[skip..skip + n],
                )
                .unwrap();
                assert_eq!(
                    out[skip..skip + n],
                    want,
                    "{width}x{height} skip {skip} on {}",
                    device.name()
                );
            }
        }
    }
}

fn stencil7_matches_cpu(device: &Device) {
    for (nx, ny, nz) in [
        (1, 1, 1),
        (3, 3, 3),
        (5, 4, 6),
        (8, 8, 8),
        (13, 7, 11),
        (33, 5, 20),
    ] {
        let grid = Params3 {
            nx,
            ny,
            nz,
            centre: 0.25,
        };
        let n = (nx * ny * nz) as usize;
        let input = values(n);
        let mut want = vec![0.0; n];
        reference::stencil7(grid, &input, &mut want);
        for launch in launches(device) {
            let mut out = vec![f32::NAN; n];
            stencils::stencil7_tiles::launch(launch, grid, &input, &mut out).unwrap();
            assert_eq!(out, want, "{nx}x{ny}x{nz} on {}", device.name());
        }
    }
}

/// An output that does not hold the grid's points fails the launch: on the host with the
/// message, on a GPU (which records no message) at the kernel's file.
fn a_wrong_output_length_is_an_error(device: &Device) {
    let grid = Grid2 {
        width: 8,
        height: 8,
        centre: 0.5,
    };
    let input = values(64);
    let mut out = vec![0.0; 63];
    let err =
        stencils::stencil5_tiles::launch(Launch::on(device), grid, &input, &mut out).unwrap_err();
    assert!(matches!(err, Error::KernelFailed { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("#[grid(nx, ny)]: the output does not hold nx * ny points")
            || !device.kind().eq(&offload::BackendKind::Host)
                && text.contains("src/kernels/stencils.rs"),
        "{err}"
    );
}

/// A grid kernel that panics on the last row, after other rows (and other tasks' strips) were
/// written, fails the launch and leaves its output as it was, whatever the launch shape.
#[test]
fn a_failed_grid_launch_leaves_the_output_as_it_was_on_the_host() {
    let host = Device::host();
    // 256 columns of chunks in 32 strips: more strips than one task of the host runs.
    let grid = Grid2 {
        width: 1024,
        height: 256,
        centre: 0.5,
    };
    let n = (grid.width * grid.height) as usize;
    let input = values(n);
    for launch in launches(&host) {
        let mut out = values(n + 1)[1..].to_vec();
        let before = out.clone();
        let err = stencils::stencil5_tiles_past_the_end::launch(launch, grid, &input, &mut out)
            .unwrap_err();
        assert!(
            matches!(&err, Error::KernelFailed { message, .. } if message.contains("index out of bounds")),
            "{err}"
        );
        assert!(out == before, "a failed launch leaves its output as it was");
    }
}

#[test]
fn stencil5_tiles_on_the_host() {
    stencil5_matches_cpu(&Device::host());
}

#[test]
fn stencil7_tiles_on_the_host() {
    stencil7_matches_cpu(&Device::host());
}

#[test]
fn wrong_output_length_on_the_host() {
    a_wrong_output_length_is_an_error(&Device::host());
}

#[test]
fn stencil5_tiles_on_the_gpu() {
    if let Some(gpu) = gpu("stencil5_tiles_on_the_gpu") {
        stencil5_matches_cpu(&gpu);
    }
}

#[test]
fn stencil7_tiles_on_the_gpu() {
    if let Some(gpu) = gpu("stencil7_tiles_on_the_gpu") {
        stencil7_matches_cpu(&gpu);
    }
}

#[test]
fn wrong_output_length_on_the_gpu() {
    if let Some(gpu) = gpu("wrong_output_length_on_the_gpu") {
        a_wrong_output_length_is_an_error(&gpu);
    }
}
