//! Launches on the host backend through the whole host-side path: the generated launcher, the
//! argument descriptors, shape resolution, output staging, the grid-stride views, the rayon
//! workers, panic capture. Small enough for Miri, which runs this file in CI (`scripts/test`) to
//! check the runtime's unsafe code for undefined behaviour and data races.

use offload::prelude::*;
use offload::{Device, Error, Launch};

// No device images: these kernels only ever run on the host.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet {
    images: &[],
    kernels: &[],
    unavailable: Some("host-only test"),
};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Affine {
    scale: f64,
    shift: f64,
}

/// Two outputs of different element types, a by-value struct, an input slice.
#[offload::kernel]
fn affine(map: Affine, x: &[f64], y: &mut [f64], signs: &mut [i8]) {
    for (i, y) in y.iter_mine() {
        *y = map.scale * x[i] + map.shift;
    }
    for (i, s) in signs.iter_mine() {
        *s = if x[i] < 0.0 { -1 } else { 1 };
    }
}

/// Panics in exactly one thread (the owner of element `bad`), after others wrote their elements.
#[offload::kernel]
fn fail_at(bad: u32, out: &mut [u32]) {
    for (i, o) in out.iter_mine() {
        *o = i as u32;
        assert!(i as u32 != bad, "element {i} is bad");
    }
}

fn host() -> Device {
    Device::host()
}

#[test]
fn results_match_a_plain_loop_for_odd_sizes_and_shapes() {
    let map = Affine {
        scale: -1.5,
        shift: 0.25,
    };
    for n in [0usize, 1, 7, 33] {
        let x: Vec<f64> = (0..n).map(|i| i as f64 - 3.0).collect();
        for (grid, block) in [(1u32, 1u32), (2, 3), (5, 8)] {
            let mut y = vec![f64::NAN; n];
            let mut signs = vec![0i8; n];
            affine::launch(
                Launch::on(&host()).grid(grid).block(block),
                map,
                &x,
                &mut y,
                &mut signs,
            )
            .unwrap();
            for i in 0..n {
                assert_eq!(y[i], -1.5 * x[i] + 0.25, "n={n} grid={grid} block={block}");
                assert_eq!(signs[i], if x[i] < 0.0 { -1 } else { 1 });
            }
        }
    }
}

#[test]
fn a_panicking_thread_fails_the_launch_and_leaves_outputs_alone() {
    let mut out = vec![u32::MAX; 20];
    match fail_at::launch(Launch::on(&host()).grid(2).block(4), 13, &mut out) {
        Err(Error::KernelFailed {
            kernel: "fail_at",
            message,
            ..
        }) => assert!(message.contains("element 13 is bad"), "{message}"),
        other => panic!("expected KernelFailed, got {other:?}"),
    }
    assert!(
        out.iter().all(|&v| v == u32::MAX),
        "staged writes were dropped"
    );
    fail_at::launch(Launch::on(&host()).grid(2).block(4), 99, &mut out).unwrap();
    assert!(out.iter().enumerate().all(|(i, &v)| v == i as u32));
}

/// Per-block tiles of `width` elements (`#[tile]`, through the generated conversion): each element
/// records the block that owns it and its index in the tile; `sub` gets `value` in `start..` only.
#[offload::kernel]
fn tile_and_range(width: u32, start: u32, #[tile(width)] owners: &mut [u32], sub: &mut [u32]) {
    for mut tile in owners.iter_mine() {
        for (i, o) in tile.iter_mine() {
            *o = offload::block_idx().x * 1000 + i as u32;
        }
    }
    for (_, s) in sub.slice(start as usize..).iter_mine() {
        *s = 7;
    }
}

/// `out[index[i]] = i` through `#[scatter]`.
#[offload::kernel]
fn scatter_positions(index: &[u64], #[scatter(index)] out: &mut [u32]) {
    for (i, o) in out.iter_mine() {
        *o = i as u32;
    }
}

#[test]
fn tiles_ranges_and_scatters_through_the_generated_launchers() {
    let (grid, width, n) = (3u32, 4u32, 29usize);
    let mut owners = vec![u32::MAX; n];
    let mut sub = vec![0u32; n];
    tile_and_range::launch(
        Launch::on(&host()).grid(grid).block(3),
        width,
        5,
        &mut owners,
        &mut sub,
    )
    .unwrap();
    for (e, &o) in owners.iter().enumerate() {
        let tile = e / width as usize;
        assert_eq!(
            o,
            (tile as u32 % grid) * 1000 + (e % width as usize) as u32,
            "element {e}"
        );
    }
    assert!(sub
        .iter()
        .enumerate()
        .all(|(i, &v)| v == if i >= 5 { 7 } else { 0 }));

    let index: Vec<u64> = (0..n as u64).rev().collect();
    let mut out = vec![u32::MAX; n];
    // SAFETY: `index` is a permutation.
    unsafe { scatter_positions::launch(Launch::on(&host()).grid(2).block(2), &index, &mut out) }
        .unwrap();
    assert!(out
        .iter()
        .enumerate()
        .all(|(t, &v)| v as usize == n - 1 - t));
}
