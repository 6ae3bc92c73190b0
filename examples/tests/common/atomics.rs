//! Atomics checks shared by the host-backend and GPU suites.

use super::floats;
use offload::{Device, Launch};
use offload_examples::kernels::atomics;
use offload_examples::reference;

/// The histogram's counts equal the CPU's, for several launch shapes (many threads hitting a few
/// bins, and one thread doing everything).
pub fn histogram_counts_equal_cpu(device: &Device) {
    let values: Vec<f32> = floats(1_000_003, 20)
        .iter()
        .map(|v| v * 0.6 + 0.5)
        .collect();
    for bins in [1usize, 7, 256] {
        let mut expected = vec![0u32; bins];
        reference::histogram(&values, &mut expected);
        for launch in [
            Launch::on(device),
            Launch::on(device).grid(3).block(64),
            Launch::on(device).grid(1).block(1),
        ] {
            let mut counts = vec![0u32; bins];
            atomics::histogram::launch(launch, &values, &mut counts).unwrap();
            assert_eq!(counts, expected, "{bins} bins on {}", device.name());
        }
    }
}

/// Slots after `every_operation` (in the kernels) over `values` from `init`, on the CPU, with the
/// two order-dependent swap slots folded as [`settle`] folds them.
pub fn expected_slots<T: Copy + Default>(
    values: impl Iterator<Item = T> + Clone,
    init: [T; 6],
    add: impl Fn(T, T) -> T,
    min: impl Fn(T, T) -> T,
    max: impl Fn(T, T) -> T,
    one: T,
) -> [T; 6] {
    let [sum, low, high, _, _, count] = init;
    let all = values.clone().fold(sum, &add);
    [
        all,
        values.clone().fold(low, &min),
        values.clone().fold(high, &max),
        // The last value swapped in is not determined; slot 3 + slot 4 is.
        add(init[3], values.clone().fold(init[4], &add)),
        T::default(),
        values.fold(count, |c, _| add(c, one)),
    ]
}

/// Slots from the device with the swap slots folded: what went out (slot 4) plus what stayed
/// (slot 3) into slot 3, slot 4 zeroed. That sum does not depend on the order of the swaps.
pub fn settle<T: Copy + Default>(mut got: [T; 6], add: impl Fn(T, T) -> T) -> [T; 6] {
    got[3] = add(got[3], got[4]);
    got[4] = T::default();
    got
}

/// Every atomic operation on every type gives the CPU's result, also in the order-dependent
/// cases made checkable (swaps: what went out plus what stayed equals what came in).
pub fn atomic_operations_match_cpu(device: &Device) {
    let n = 10_000;
    let values: Vec<i32> = floats(n, 21).iter().map(|v| (v * 100.0) as i32).collect();
    let mut on_i32 = [5i32, i32::MAX, i32::MIN, 7, 0, 0];
    let mut on_u32 = [5u32, u32::MAX, 0, 7, 0, 0];
    let mut on_i64 = [5i64, i64::MAX, i64::MIN, 7, 0, 0];
    let mut on_u64 = [5u64, u64::MAX, 0, 7, 0, 0];
    let mut on_f32 = [0.5f32, f32::INFINITY, f32::NEG_INFINITY, 7.0, 0.0, 0.0];
    let mut on_f64 = [0.25f64, 0.0, 0.0, 7.0, 0.0, 0.0];
    let (i32s0, u32s0, i64s0, u64s0, f32s0, f64s0) =
        (on_i32, on_u32, on_i64, on_u64, on_f32, on_f64);
    atomics::atomic_operations::launch(
        Launch::on(device).grid(7).block(96),
        &values,
        &mut on_i32,
        &mut on_u32,
        &mut on_i64,
        &mut on_u64,
        &mut on_f32,
        &mut on_f64,
    )
    .unwrap();
    let v = values.iter();
    let name = device.name();
    assert_eq!(
        settle(on_i32, i32::wrapping_add),
        expected_slots(
            v.clone().copied(),
            i32s0,
            i32::wrapping_add,
            i32::min,
            i32::max,
            1
        ),
        "i32 on {name}"
    );
    assert_eq!(
        settle(on_u32, u32::wrapping_add),
        expected_slots(
            v.clone().map(|&x| x as u32),
            u32s0,
            u32::wrapping_add,
            u32::min,
            u32::max,
            1
        ),
        "u32 on {name}"
    );
    let wide = |&x: &i32| x as i64 * 3_000_000_000;
    assert_eq!(
        settle(on_i64, i64::wrapping_add),
        expected_slots(
            v.clone().map(wide),
            i64s0,
            i64::wrapping_add,
            i64::min,
            i64::max,
            1
        ),
        "i64 on {name}"
    );
    assert_eq!(
        settle(on_u64, u64::wrapping_add),
        expected_slots(
            v.clone().map(|x| wide(x) as u64),
            u64s0,
            u64::wrapping_add,
            u64::min,
            u64::max,
            1
        ),
        "u64 on {name}"
    );
    // Small integers in f32/f64: every partial sum is exact, so the order does not matter.
    let add32 = |a: f32, b: f32| a + b;
    assert_eq!(
        settle(on_f32, add32),
        expected_slots(
            v.clone().map(|&x| x as f32),
            f32s0,
            add32,
            f32::min,
            f32::max,
            1.0
        ),
        "f32 on {name}"
    );
    let add64 = |a: f64, b: f64| a + b;
    let on_f64 = settle(on_f64, add64);
    let sum: f64 = values.iter().map(|&x| x as f64 * 0.5).sum();
    let swapped: f64 = values.iter().map(|&x| x as f64).sum();
    assert_eq!(
        on_f64,
        [f64s0[0] + sum, 0.0, 0.0, f64s0[3] + swapped, 0.0, n as f64],
        "f64 on {name}"
    );
}
