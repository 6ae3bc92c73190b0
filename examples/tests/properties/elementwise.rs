//! Kernels where each thread computes its own elements: any launch shape, results bit for bit.

use super::*;
use offload::half::{bf16, f16};
use offload_examples::kernels::{self, Grid2};
use offload_examples::reference;

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
    fn checked_products(ab in proptest::collection::vec((near_overflow(), near_overflow()), 0..3000),
                        shape in shape()) {
        let (a, b): (Vec<u64>, Vec<u64>) = ab.into_iter().unzip();
        let n = a.len();
        let run = |device: &Device| {
            let (mut unsigned, mut signed, mut overflows) = (vec![1u64; n], vec![1i64; n], vec![9u8; n]);
            kernels::checked_products::launch(on(device, shape), &a, &b, &mut unsigned, &mut signed, &mut overflows)
                .unwrap();
            (unsigned, signed, overflows)
        };
        let (unsigned, signed, overflows) = run(&Device::host());
        for i in 0..n {
            let (u, s) = (a[i].checked_mul(b[i]), (a[i] as i64).checked_mul(b[i] as i64));
            prop_assert_eq!(unsigned[i], u.unwrap_or(0));
            prop_assert_eq!(signed[i], s.unwrap_or(0));
            prop_assert_eq!(overflows[i], u8::from(u.is_none()) | u8::from(s.is_none()) << 1);
        }
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), (unsigned, signed, overflows), "GPU vs host backend");
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

    #[test]
    fn jacobi2d(width in 1u32..80, height in 1u32..80, seed in any::<u64>(), shape in shape()) {
        let n = (width * height) as usize;
        let input = common::floats(n, seed);
        let mut expected = vec![0.0; n];
        reference::jacobi2d(width, height, &input, &mut expected);
        let mut out = vec![f32::NAN; n];
        kernels::jacobi2d::launch(on(&Device::host(), shape), width, height, &input, &mut out).unwrap();
        prop_assert!(out.same_bits(&expected), "host backend vs CPU");
        if let Some(g) = on_gpu(&vec![f32::NAN; n], |g, o| kernels::jacobi2d::launch(on(g, shape), width, height, &input, o).unwrap()) {
            prop_assert!(g.same_bits(&out), "GPU vs host backend");
        }
    }

    #[test]
    fn axpy_f32(a in any_f32(), xy in pairs(any_f32, 2000), shape in shape()) {
        axpy_matches_cpu(a, xy, shape)?;
    }

    #[test]
    fn axpy_f64(a in any_f64(), xy in pairs(any_f64, 2000), shape in shape()) {
        axpy_matches_cpu(a, xy, shape)?;
    }

    #[test]
    fn axpy_f16(a in any_f32().prop_map(f16::from_f32),
                xy in pairs(|| any_f32().prop_map(f16::from_f32), 2000), shape in shape()) {
        axpy_matches_cpu(a, xy, shape)?;
    }

    #[test]
    fn axpy_bf16(a in any_f32().prop_map(bf16::from_f32),
                 xy in pairs(|| any_f32().prop_map(bf16::from_f32), 2000), shape in shape()) {
        axpy_matches_cpu(a, xy, shape)?;
    }

    #[test]
    fn batched_matmul(batch in 0usize..600, seed in any::<u64>(), shape in shape()) {
        matmul_matches_cpu::<f32, 2>(batch, seed, shape, |v| v)?;
        matmul_matches_cpu::<f32, 3>(batch, seed, shape, |v| v)?;
        matmul_matches_cpu::<f32, 4>(batch, seed, shape, |v| v)?;
        let wide = |v: f32| v as f64 * 1.000_000_1;
        matmul_matches_cpu::<f64, 2>(batch, seed, shape, wide)?;
        matmul_matches_cpu::<f64, 3>(batch, seed, shape, wide)?;
        matmul_matches_cpu::<f64, 4>(batch, seed, shape, wide)?;
    }

    #[test]
    fn iota_fixed(offset in any_f64(), step in any_f64(), shape in shape()) {
        let expected: Vec<f64> = (0..256).map(|k| offset + step * k as f64).collect();
        let run = |device: &Device| {
            let mut x = [f64::NAN; 256];
            // SAFETY: `x` is a live, aligned local that nothing else touches during the launch.
            unsafe {
                kernels::iota_fixed::launch(on(device, shape), &mut x as *mut [f64; 256], offset, &step)
            }
            .unwrap();
            x
        };
        let host = run(&Device::host());
        prop_assert!(host.same_bits(&expected), "host backend vs CPU");
        if let Some(g) = gpu() {
            prop_assert!(run(g).same_bits(&host), "GPU vs host backend");
        }
    }

    #[test]
    fn relax(steps in 0u32..50, xy in pairs(any_f32, 2000), shape in shape()) {
        let (x, y0) = xy;
        let mut expected = y0.clone();
        reference::relax(steps, &x, &mut expected);
        let mut y = y0.clone();
        kernels::streams::relax::launch(on(&Device::host(), shape), steps, &x, &mut y).unwrap();
        prop_assert!(y.same_bits(&expected), "host backend vs CPU");
        if let Some(g) = on_gpu(&y0, |g, out| kernels::streams::relax::launch(on(g, shape), steps, &x, out).unwrap()) {
            prop_assert!(g.same_bits(&y), "GPU vs host backend");
        }
    }
}

/// Any f64: mostly ordinary values, with the special ones mixed in.
fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -1.0e6f64..1.0e6,
        1 => proptest::num::f64::ANY,
    ]
}

/// Two vectors of one random length below `max_len` (`x` and `y`).
fn pairs<S: Strategy>(
    value: impl Fn() -> S,
    max_len: usize,
) -> impl Strategy<Value = (Vec<S::Value>, Vec<S::Value>)> {
    proptest::collection::vec((value(), value()), 0..max_len).prop_map(|xy| xy.into_iter().unzip())
}

/// One instance of the generic axpy: the host backend against the CPU loop in the same precision,
/// the GPU against the host backend.
fn axpy_matches_cpu<T>(
    a: T,
    (x, y0): (Vec<T>, Vec<T>),
    shape: Option<(Dim3, Dim3)>,
) -> Result<(), TestCaseError>
where
    T: Float
        + offload::DeviceCopy
        + offload::WideElement
        + offload::math::Arith
        + std::ops::Add<Output = T>
        + std::ops::Mul<Output = T>,
    kernels::axpy::Instance<T>: kernels::axpy::Declared,
{
    let mut expected = y0.clone();
    reference::axpy(a, &x, &mut expected);
    let mut y = y0.clone();
    kernels::axpy::launch(on(&Device::host(), shape), a, &x, &mut y).unwrap();
    prop_assert!(y.same_bits(&expected), "host backend vs CPU");
    if let Some(g) = on_gpu(&y0, |g, out| {
        kernels::axpy::launch(on(g, shape), a, &x, out).unwrap()
    }) {
        prop_assert!(g.same_bits(&y), "GPU vs host backend");
    }
    Ok(())
}

/// One instance of the const-generic matmul over `batch` random matrix pairs (values from `seed`,
/// through `to_t`).
fn matmul_matches_cpu<T, const N: usize>(
    batch: usize,
    seed: u64,
    shape: Option<(Dim3, Dim3)>,
    to_t: impl Fn(f32) -> T,
) -> Result<(), TestCaseError>
where
    T: Float + kernels::Scalar + offload::DeviceCopy,
    kernels::batched_matmul::Instance<T, N>: kernels::batched_matmul::Declared,
{
    let matrices = |seed| -> Vec<[[T; N]; N]> {
        let v = common::floats(batch * N * N, seed);
        v.chunks(N * N)
            .map(|m| std::array::from_fn(|i| std::array::from_fn(|j| to_t(m[i * N + j] * 100.0))))
            .collect()
    };
    let (a, b) = (matrices(seed), matrices(seed ^ 1));
    let zeros = vec![[[T::zero(); N]; N]; batch];
    let mut expected = zeros.clone();
    reference::batched_matmul(&a, &b, &mut expected);
    let mut c = zeros.clone();
    kernels::batched_matmul::launch::<T, N>(on(&Device::host(), shape), &a, &b, &mut c).unwrap();
    let flat = |m: &[[[T; N]; N]]| m.as_flattened().as_flattened().to_vec();
    prop_assert!(
        flat(&c).same_bits(&flat(&expected)),
        "N={} host backend vs CPU",
        N
    );
    if let Some(g) = on_gpu(&zeros, |g, out| {
        kernels::batched_matmul::launch::<T, N>(on(g, shape), &a, &b, out).unwrap()
    }) {
        prop_assert!(flat(&g).same_bits(&flat(&c)), "N={} GPU vs host backend", N);
    }
    Ok(())
}

/// 64-bit operands whose products often land near 2^63 and 2^64, where the signed and the
/// unsigned products start to overflow: random bits of a random width, either sign.
fn near_overflow() -> impl Strategy<Value = u64> {
    (any::<u64>(), 0u32..64, any::<bool>()).prop_map(|(bits, shift, negate)| {
        let v = bits >> shift;
        if negate {
            v.wrapping_neg()
        } else {
            v
        }
    })
}
