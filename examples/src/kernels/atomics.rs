//! Kernels that share data between threads through atomics.
use offload::prelude::*;

/// Counts the values of `[0, 1)` falling in each of `bins.len()` equal-width bins; values out of
/// range go to the first or last bin.
#[offload::kernel]
pub fn histogram(values: &[f32], bins: &[Atomic<u32>]) {
    let last = bins.len() - 1;
    let scale = bins.len() as f32;
    for i in grid_stride(values.len()) {
        // `as` saturates: negative values land in bin 0.
        let bin = ((values[i] * scale) as usize).min(last);
        bins[bin].fetch_add(1);
    }
}

/// Every value of `values` through each atomic operation of one type, into six slots: 0 sum,
/// 1 min, 2 max, 3 the last value swapped in, 4 the sum of the values swapped out (so slots 3 + 4
/// hold the initial slot 3 plus the sum), 5 a count kept by compare-exchange loops.
macro_rules! every_operation {
    ($slots:expr, $v:expr, $one:expr) => {{
        let (slots, v) = ($slots, $v);
        slots[0].fetch_add(v);
        slots[1].fetch_min(v);
        slots[2].fetch_max(v);
        let swapped_out = slots[3].swap(v);
        slots[4].fetch_add(swapped_out);
        let mut seen = slots[5].load();
        while let Err(actual) = slots[5].compare_exchange(seen, seen + $one) {
            seen = actual;
        }
    }};
}

/// Each atomic operation on every type it exists for, fed from `values` (see `every_operation`);
/// for `f64`, which has no min or max, slots 1 and 2 are unused.
#[offload::kernel]
pub fn atomic_operations(
    values: &[i32],
    on_i32: &[Atomic<i32>],
    on_u32: &[Atomic<u32>],
    on_i64: &[Atomic<i64>],
    on_u64: &[Atomic<u64>],
    on_f32: &[Atomic<f32>],
    on_f64: &[Atomic<f64>],
) {
    for i in grid_stride(values.len()) {
        let v = values[i];
        every_operation!(on_i32, v, 1);
        every_operation!(on_u32, v as u32, 1);
        every_operation!(on_i64, v as i64 * 3_000_000_000, 1);
        every_operation!(on_u64, (v as i64 * 3_000_000_000) as u64, 1);
        every_operation!(on_f32, v as f32, 1.0);
        on_f64[0].fetch_add(v as f64 * 0.5);
        let swapped_out = on_f64[3].swap(v as f64);
        on_f64[4].fetch_add(swapped_out);
        let mut seen = on_f64[5].load();
        while let Err(actual) = on_f64[5].compare_exchange(seen, seen + 1.0) {
            seen = actual;
        }
    }
}
