//! Property tests over every example kernel: random sizes (0 and non-multiples of the block
//! included), random values (NaN, infinities and subnormals included) and random launch shapes.
//! The host backend must equal the plain CPU loop bit for bit, and a GPU, when there is one, must
//! equal the host backend bit for bit. The one exemption is documented: a NaN result may carry a
//! different payload on the GPU (PTX arithmetic returns the canonical NaN where x86 propagates an
//! input's), so any NaN equals any NaN.

mod common;

use offload::{Device, Dim3, Launch};
use offload_examples::kernels::{self, Grid2};
use offload_examples::reference;
use proptest::prelude::*;
use std::sync::OnceLock;

/// The GPU the properties also run on, looked up (and the skip reported) once per binary.
fn gpu() -> Option<&'static Device> {
    static GPU: OnceLock<Option<Device>> = OnceLock::new();
    GPU.get_or_init(|| common::gpu::gpu("properties on the GPU"))
        .as_ref()
}

trait SameBits {
    fn same_bits(&self, other: &Self) -> bool;
}

impl SameBits for [f32] {
    fn same_bits(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

impl SameBits for [f64] {
    fn same_bits(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

/// Any f32: mostly ordinary values, with the special ones (NaN, ±inf, ±0, subnormals) mixed in.
fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1.0e3f32..1.0e3,
        1 => proptest::num::f32::ANY,
    ]
}

fn f32s(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(any_f32(), 0..max_len)
}

/// `None`: the launcher's default shape; otherwise an explicit 3D grid and block.
fn shape() -> impl Strategy<Value = Option<(Dim3, Dim3)>> {
    let dim = |max| (1u32..max, 1u32..4, 1u32..3).prop_map(|(x, y, z)| Dim3::new(x, y, z));
    // Blocks stay within 1024 threads: 169 × 3 × 2.
    proptest::option::of((dim(9), dim(170)))
}

fn on(device: &Device, shape: Option<(Dim3, Dim3)>) -> Launch<'_> {
    match shape {
        None => Launch::on(device),
        Some((grid, block)) => Launch::on(device).grid(grid).block(block),
    }
}

/// The GPU's result for the same inputs, when there is a GPU.
fn on_gpu<T: Clone>(init: &T, run: impl FnOnce(&Device, &mut T)) -> Option<T> {
    gpu().map(|g| {
        let mut out = init.clone();
        run(g, &mut out);
        out
    })
}

proptest! {
    #[test]
    fn saxpy(a in any_f32(), xy in f32s(3000).prop_flat_map(|x| {
        let n = x.len();
        (Just(x), proptest::collection::vec(any_f32(), n))
    }), shape in shape()) {
        let (x, y0) = xy;
        let mut expected = y0.clone();
        reference::saxpy(a, &x, &mut expected);
        let mut y = y0.clone();
        kernels::saxpy::launch(on(&Device::host(), shape), a, &x, &mut y).unwrap();
        prop_assert!(y.same_bits(&expected), "host backend vs CPU");
        if let Some(g) = on_gpu(&y0, |g, out| kernels::saxpy::launch(on(g, shape), a, &x, out).unwrap()) {
            prop_assert!(g.same_bits(&y), "GPU vs host backend");
        }
    }

    #[test]
    fn stencil5(width in 1u32..80, height in 1u32..80, centre in any_f32(), seed in any::<u64>(),
                shape in shape()) {
        let grid = Grid2 { width, height, centre };
        let n = (width * height) as usize;
        let input = common::floats(n, seed);
        let mut expected = vec![0.0; n];
        reference::stencil5(grid, &input, &mut expected);
        let mut out = vec![f32::NAN; n];
        kernels::stencil5::launch(on(&Device::host(), shape), grid, &input, &mut out).unwrap();
        prop_assert!(out.same_bits(&expected), "host backend vs CPU");
        if let Some(g) = on_gpu(&vec![f32::NAN; n], |g, o| kernels::stencil5::launch(on(g, shape), grid, &input, o).unwrap()) {
            prop_assert!(g.same_bits(&out), "GPU vs host backend");
        }
    }

    #[test]
    fn add_sub(negate in any::<bool>(), ab in proptest::collection::vec(any::<(i64, i64)>(), 0..3000),
               shape in shape()) {
        let (a, b): (Vec<i64>, Vec<i64>) = ab.into_iter().unzip();
        let n = a.len();
        let run = |device: &Device| {
            let (mut sum, mut diff) = (vec![0i64; n], vec![0i64; n]);
            kernels::add_sub::launch(on(device, shape), negate, &a, &b, &mut sum, &mut diff).unwrap();
            (sum, diff)
        };
        let (sum, diff) = run(&Device::host());
        for i in 0..n {
            let bi = if negate { b[i].wrapping_neg() } else { b[i] };
            prop_assert_eq!(sum[i], a[i].wrapping_add(bi));
            prop_assert_eq!(diff[i], a[i].wrapping_sub(bi));
        }
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), (sum, diff), "GPU vs host backend");
        }
    }

    #[test]
    fn thread_ids(n in 0usize..5000, grid in (1u32..6, 1u32..4, 1u32..3), block in (1u32..130, 1u32..4, 1u32..3)) {
        let (grid, block) = (Dim3::new(grid.0, grid.1, grid.2), Dim3::new(block.0, block.1, block.2));
        let threads = (grid.count() * block.count()) as usize;
        let run = |device: &Device| {
            let (mut ids, mut totals) = (vec![u32::MAX; n], vec![0u32; n]);
            kernels::thread_ids::launch(Launch::on(device).grid(grid).block(block), &mut ids, &mut totals).unwrap();
            (ids, totals)
        };
        let (ids, totals) = run(&Device::host());
        for i in 0..n {
            prop_assert_eq!(ids[i] as usize, i % threads);
            prop_assert_eq!(totals[i] as usize, threads);
        }
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), (ids, totals), "GPU vs host backend");
        }
    }

    #[test]
    fn math_mix(x in f32s(2000), shape in shape()) {
        let n = x.len();
        let run = |device: &Device| {
            let (mut out32, mut out64) = (vec![0.0f32; n], vec![0.0f64; n]);
            kernels::math_mix::launch(on(device, shape), &x, &mut out32, &mut out64).unwrap();
            (out32, out64)
        };
        let (host32, host64) = run(&Device::host());
        // The host backend is deterministic; the accuracy against std is math_kernel_is_accurate's.
        let (again32, again64) = run(&Device::host());
        prop_assert!(again32.same_bits(&host32) && again64.same_bits(&host64));
        if let Some(g) = gpu() {
            let (gpu32, gpu64) = run(g);
            prop_assert!(gpu32.same_bits(&host32), "f32: GPU vs host backend");
            prop_assert!(gpu64.same_bits(&host64), "f64: GPU vs host backend");
        }
    }
}
