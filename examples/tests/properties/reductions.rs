//! `#[reduce]` kernels over random lengths, values and launch shapes (3D ones included): integer
//! reductions exact against the CPU, float sums within the rounding bound of an f64 CPU sum, the
//! same bits on a second launch, and on a GPU the host backend's bits at the same shape.

use super::*;
use offload_examples::kernels::reductions::{self, MinLoc};

/// Random data of any length, starting at a random offset (so the 16-byte walk has a head).
fn offset_data<T: std::fmt::Debug + Clone>(
    element: impl Strategy<Value = T>,
) -> impl Strategy<Value = (usize, Vec<T>)> {
    (0usize..4, proptest::collection::vec(element, 0..6000))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Wrapping u32 sums and i64 min, max and wrapping product, exact.
    #[test]
    fn integer_reductions_are_exact(shape in shape(), (offset, values) in offset_data(any::<i64>())) {
        let x = &values[offset.min(values.len())..];
        let small: Vec<u32> = x.iter().map(|&v| v as u32).collect();
        let run = |device: &Device| {
            let mut sum = 3u32;
            reductions::sum_u32::launch(on(device, shape), &small, &mut sum).unwrap();
            let (mut lo, mut hi, mut product) = (i64::MAX, i64::MIN, 1i64);
            reductions::extremes::launch(on(device, shape), x, &mut lo, &mut hi, &mut product).unwrap();
            (sum, lo, hi, product)
        };
        let expected = (
            small.iter().fold(3u32, |a, &b| a.wrapping_add(b)),
            x.iter().copied().min().unwrap_or(i64::MAX),
            x.iter().copied().max().unwrap_or(i64::MIN),
            x.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
        );
        prop_assert_eq!(run(&Device::host()), expected);
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), expected, "on the GPU");
        }
    }

    /// f32 sums and dot products within the bound of any summation order, the same bits when
    /// launched again, and on a GPU the host backend's bits.
    #[test]
    fn float_sums_repeat_and_match_the_host(shape in shape(), (offset, values) in offset_data(finite_f32())) {
        let x = &values[offset.min(values.len())..];
        let y: Vec<f32> = x.iter().rev().copied().collect();
        let run = |device: &Device| {
            let (mut sum, mut dot) = (0.0f32, 0.0f32);
            reductions::sum_f32::launch(on(device, shape), x, &mut sum).unwrap();
            reductions::dot_f32::launch(on(device, shape), x, &y, &mut dot).unwrap();
            [sum, dot]
        };
        let host = run(&Device::host());
        prop_assert!(run(&Device::host()).same_bits(&host), "a second launch");
        let exact: f64 = x.iter().map(|&v| v as f64).sum();
        let magnitude: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
        prop_assert!(within_summation_bound(host[0] as f64, exact, x.len(), magnitude));
        // The default shape differs between the host backend and a GPU, and so may the bits; so
        // does the 16-byte walk's cut where the host's `x` is not 16-byte aligned (the GPU's copy
        // is), as in block_sum's property.
        let aligned = (x.as_ptr() as usize).is_multiple_of(16) && (y.as_ptr() as usize).is_multiple_of(16);
        if let (Some(g), Some(_), true) = (gpu(), shape, aligned) {
            // A NaN (an overflow's inf - inf) may carry another payload on the GPU.
            prop_assert!(run(g).same_bits(&host), "GPU vs host backend");
        }
    }

    /// The least element and its first index (an infinity too), NaNs ignored.
    #[test]
    fn argmin_finds_the_first_least(shape in shape(), (offset, values) in offset_data(any_f32())) {
        let x = &values[offset.min(values.len())..];
        let expected = x.iter().enumerate().filter(|(_, v)| !v.is_nan()).fold(
            <MinLoc as offload::Reduce>::identity(),
            |b, (i, &v)| {
                let later = v < b.value || (v == b.value && (i as u32) < b.index);
                if later { MinLoc { value: v, index: i as u32 } } else { b }
            },
        );
        let run = |device: &Device| {
            let mut best = <MinLoc as offload::Reduce>::identity();
            reductions::argmin::launch(on(device, shape), x, &mut best).unwrap();
            best
        };
        prop_assert_eq!(run(&Device::host()), expected);
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), expected, "on the GPU");
        }
    }
}
