//! Kernels that share data through atomics. Integer results are exact whatever the order of the
//! threads. Floating-point atomic sums depend on that order: they are checked against the exact
//! sum within the rounding bound of any order (f32), or made exact by the data (f64: halves of
//! 32-bit integers, whose partial sums all fit in 53 bits). Min, max and counts are exact.

use super::*;
use common::atomics::{expected_slots, settle};
use offload_examples::kernels::atomics;
use offload_examples::reference;

/// Small values (many collisions on min/max and exact float sums) and any values.
fn atomic_values() -> impl Strategy<Value = Vec<i32>> {
    proptest::collection::vec(prop_oneof![-100i32..100, any::<i32>()], 0..3000)
}

proptest! {
    // 128 cases: each atomic_operations case checks six types against folds over the values.
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn histogram(values in f32s(5000), bins in 1usize..300, shape in shape()) {
        let mut expected = vec![0u32; bins];
        reference::histogram(&values, &mut expected);
        let run = |device: &Device| {
            let mut counts = vec![0u32; bins];
            atomics::histogram::launch(on(device, shape), &values, &mut counts).unwrap();
            counts
        };
        prop_assert_eq!(run(&Device::host()), expected.clone(), "host backend vs CPU");
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), expected, "GPU vs CPU");
        }
    }

    #[test]
    fn atomic_operations(
        values in atomic_values(),
        on_i32 in any::<[i32; 6]>(),
        on_u32 in any::<[u32; 6]>(),
        on_i64 in any::<[i64; 6]>(),
        on_u64 in any::<[u64; 6]>(),
        on_f32 in proptest::array::uniform6(-1.0e6f32..1.0e6),
        on_f64 in proptest::array::uniform6(-2_000_000i32..2_000_000).prop_map(|s| s.map(|v| v as f64 * 0.5)),
        unused_f64 in any::<[f64; 2]>(),
        shape in shape(),
    ) {
        let mut on_f64 = on_f64;
        // f64 has no min or max: slots 1 and 2 must come back as they went in, whatever they hold.
        on_f64[1..3].copy_from_slice(&unused_f64);
        let run = |device: &Device| {
            let mut slots = (on_i32, on_u32, on_i64, on_u64, on_f32, on_f64);
            atomics::atomic_operations::launch(
                on(device, shape), &values, &mut slots.0, &mut slots.1, &mut slots.2,
                &mut slots.3, &mut slots.4, &mut slots.5,
            )
            .unwrap();
            slots
        };
        let devices = std::iter::once(Device::host()).chain(gpu().cloned());
        for device in devices {
            let (i32s, u32s, i64s, u64s, f32s, f64s) = run(&device);
            let name = device.name();
            let v = values.iter();
            let wide = |&x: &i32| x as i64 * 3_000_000_000;
            prop_assert_eq!(
                settle(i32s, i32::wrapping_add),
                expected_slots(v.clone().copied(), on_i32, i32::wrapping_add, i32::min, i32::max, 1),
                "i32 on {}", name
            );
            prop_assert_eq!(
                settle(u32s, u32::wrapping_add),
                expected_slots(v.clone().map(|&x| x as u32), on_u32, u32::wrapping_add, u32::min, u32::max, 1),
                "u32 on {}", name
            );
            prop_assert_eq!(
                settle(i64s, i64::wrapping_add),
                expected_slots(v.clone().map(wide), on_i64, i64::wrapping_add, i64::min, i64::max, 1),
                "i64 on {}", name
            );
            prop_assert_eq!(
                settle(u64s, u64::wrapping_add),
                expected_slots(v.clone().map(|x| wide(x) as u64), on_u64, u64::wrapping_add, u64::min, u64::max, 1),
                "u64 on {}", name
            );
            // The value left in slot 3 is the last one swapped in: one of the values, or the
            // initial one when there are none.
            let last_swapped = |got: u64, init: u64, of: &dyn Fn(i32) -> u64| {
                if values.is_empty() { got == init } else { values.iter().any(|&x| of(x) == got) }
            };
            prop_assert!(last_swapped(i32s[3] as u64, on_i32[3] as u64, &|x| x as u64), "i32 slot 3 on {}", name);
            prop_assert!(last_swapped(u64s[3], on_u64[3], &|x| wide(&x) as u64), "u64 slot 3 on {}", name);
            prop_assert!(last_swapped(f32s[3].to_bits().into(), on_f32[3].to_bits().into(), &|x| (x as f32).to_bits().into()), "f32 slot 3 on {}", name);
            prop_assert!(last_swapped(f64s[3].to_bits(), on_f64[3].to_bits(), &|x| (x as f64).to_bits()), "f64 slot 3 on {}", name);

            // f32: min, max and the compare-exchange count (the same additions of 1 in any
            // order) exact; the sums within the bound of any summation order.
            let as_f32 = v.clone().map(|&x| x as f32);
            let expected = expected_slots(as_f32.clone(), on_f32, |a, b| a + b, f32::min, f32::max, 1.0);
            prop_assert_eq!([f32s[1], f32s[2], f32s[5]], [expected[1], expected[2], expected[5]], "f32 min, max, count on {}", name);
            let exact: f64 = as_f32.clone().map(f64::from).sum();
            let magnitude: f64 = as_f32.map(|x| x.abs() as f64).sum();
            let n = values.len();
            prop_assert!(
                within_summation_bound(f32s[0] as f64, on_f32[0] as f64 + exact, n, magnitude + on_f32[0].abs() as f64),
                "f32 sum {} vs exact {} on {}", f32s[0], on_f32[0] as f64 + exact, name
            );
            let swapped = f32s[3] as f64 + f32s[4] as f64;
            let swapped_exact = on_f32[3] as f64 + on_f32[4] as f64 + exact;
            let swapped_magnitude = on_f32[3].abs() as f64 + on_f32[4].abs() as f64 + magnitude;
            prop_assert!(
                within_summation_bound(swapped, swapped_exact, n + 1, swapped_magnitude),
                "f32 swapped out + last {} vs exact {} on {}", swapped, swapped_exact, name
            );

            // f64: every partial sum is exact, so every slot is.
            let sum: f64 = values.iter().map(|&x| x as f64 * 0.5).sum();
            let swapped: f64 = values.iter().map(|&x| x as f64).sum();
            let settled = settle(f64s, |a, b| a + b);
            prop_assert_eq!(settled[0], on_f64[0] + sum, "f64 sum on {}", name);
            prop_assert_eq!(
                [settled[1].to_bits(), settled[2].to_bits()],
                [on_f64[1].to_bits(), on_f64[2].to_bits()],
                "f64 unused slots on {}", name
            );
            prop_assert_eq!(settled[3], on_f64[3] + on_f64[4] + swapped, "f64 swaps on {}", name);
            prop_assert_eq!(settled[5], on_f64[5] + n as f64, "f64 count on {}", name);
        }
    }
}
