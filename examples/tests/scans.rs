//! Device-wide prefix scans (`offload::scan_kernel!`) on the host backend and on the first GPU:
//! integer scans and scans of `Reduce` types exact against CPU loops (one of them, of affine
//! maps, not commutative), float scans within the rounding bound of the CPU's and the same bits
//! from run to run and between the two backends at the same shape, on a stream with kept
//! scratch and on views, refused shapes, and stream compaction against a CPU filter.
//!
//! The GPU tests print `SKIPPED` and pass without a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::gpu::gpu;
use common::{floats, ints};
use offload::scan::Scan;
use offload::{Device, DeviceVec, Error};
use offload_examples::compaction;
use offload_examples::kernels::reductions::MinLoc;
use offload_examples::kernels::scans::{self, Affine};

/// Empty, one element, around the default chunk of u32 (15 × 256 = 3840) and of 8-byte
/// elements (7 × 256 = 1792), and large sizes that are multiples of nothing.
const SIZES: [usize; 12] = [
    0, 1, 2, 31, 1791, 1792, 3840, 3841, 4099, 65_537, 100_003, 1_000_003,
];

/// Launch shapes (threads per block, tile length): the default; one thread; tiles shorter than
/// a chunk; blocks of a size that is no power of two; more threads than a 4 KiB block-scan
/// area has slots for 8-byte elements (512); tiles of many chunks.
fn shapes() -> Vec<(Option<u32>, Option<usize>)> {
    vec![
        (None, None),
        (Some(1), Some(1000)),
        (Some(32), Some(100)),
        (Some(100), Some(5000)),
        // More threads than 8-byte values fit in the block's 4 KiB area (512), and few enough
        // for the scans' registers on an H200: 17 warps leave 120 a thread (the sm_90a images'
        // 8-byte scans take up to 96).
        (Some(544), Some(20_000)),
        (Some(256), Some(1 << 18)),
    ]
}

fn scan_of(inclusive: bool, (block, tile): (Option<u32>, Option<usize>)) -> Scan {
    let mut scan = if inclusive {
        Scan::inclusive()
    } else {
        Scan::exclusive()
    };
    if let Some(b) = block {
        scan = scan.block(b);
    }
    if let Some(t) = tile {
        scan = scan.tile(t);
    }
    scan
}

/// The scan on the CPU, left to right.
fn cpu_scan<T: Copy>(x: &[T], identity: T, f: impl Fn(T, T) -> T, inclusive: bool) -> Vec<T> {
    let mut acc = identity;
    x.iter()
        .map(|&v| {
            let before = acc;
            acc = f(acc, v);
            if inclusive {
                acc
            } else {
                before
            }
        })
        .collect()
}

/// `$module::run(scan, x, out)` on `device`, the result back on the host.
macro_rules! scan_on {
    ($module:ident, $device:expr, $scan:expr, $x:expr) => {{
        let x = DeviceVec::from_slice($device, $x).unwrap();
        let mut out = DeviceVec::zeroed($device, x.len()).unwrap();
        scans::$module::run($scan, &x, &mut out).unwrap();
        out.to_vec().unwrap()
    }};
}

/// Every size with its shapes, and both kinds (inclusive, exclusive), as `(n, scan)`. The
/// largest sizes take the shapes that are cheap on the host backend (whose barriers switch
/// between a block's threads): small blocks of many elements each.
fn cases() -> Vec<(usize, Scan)> {
    let mut all = Vec::new();
    for n in SIZES {
        for shape in shapes() {
            let cheap = matches!(shape, (None, None) | (Some(100), _) | (Some(256), _));
            let affordable = cheap || n <= 65_537 || (n <= 100_003 && shape.0 == Some(1));
            if !affordable {
                continue;
            }
            for inclusive in [false, true] {
                all.push((n, scan_of(inclusive, shape)));
            }
        }
    }
    all
}

/// Integer sums (wrapping), minima and maxima, exact. Returns them, for comparing devices.
fn integer_scans(device: &Device) -> Vec<u64> {
    let mut seen = Vec::new();
    for (n, scan) in cases() {
        let inc = scan.is_inclusive();
        let wide = ints(n, 3);
        let x32: Vec<u32> = wide.iter().map(|&v| (v >> 20) as u32).collect();
        let i32s: Vec<i32> = wide.iter().map(|&v| (v >> 32) as i32).collect();
        let what = format!("n = {n}, {scan:?} on {}", device.name());

        let got = scan_on!(scan_sum_u32, device, scan, &x32);
        assert_eq!(
            got,
            cpu_scan(&x32, 0, u32::wrapping_add, inc),
            "u32 sum, {what}"
        );
        seen.extend(got.iter().map(|&v| v as u64));
        let got = scan_on!(scan_max_u32, device, scan, &x32);
        assert_eq!(got, cpu_scan(&x32, 0, u32::max, inc), "u32 max, {what}");
        let got = scan_on!(scan_sum_i64, device, scan, &wide);
        assert_eq!(
            got,
            cpu_scan(&wide, 0, i64::wrapping_add, inc),
            "i64 sum, {what}"
        );
        seen.extend(got.iter().map(|&v| v as u64));
        let got = scan_on!(scan_min_i64, device, scan, &wide);
        assert_eq!(
            got,
            cpu_scan(&wide, i64::MAX, i64::min, inc),
            "i64 min, {what}"
        );
        let got = scan_on!(scan_max_i64, device, scan, &wide);
        assert_eq!(
            got,
            cpu_scan(&wide, i64::MIN, i64::max, inc),
            "i64 max, {what}"
        );
        let got = scan_on!(scan_min_i32, device, scan, &i32s);
        assert_eq!(
            got,
            cpu_scan(&i32s, i32::MAX, i32::min, inc),
            "i32 min, {what}"
        );
        let x64: Vec<u64> = wide.iter().map(|&v| v as u64).collect();
        let got = scan_on!(scan_sum_u64, device, scan, &x64);
        assert_eq!(
            got,
            cpu_scan(&x64, 0, u64::wrapping_add, inc),
            "u64 sum, {what}"
        );
    }
    seen
}

/// Float sums within n·ε·Σ|x| of the f64 CPU prefix sums; minima and maxima (NaN ignored)
/// exact; each the same bits when run again. Returns the bits, for comparing devices.
fn float_scans(device: &Device) -> Vec<u64> {
    let mut bits = Vec::new();
    for (n, scan) in cases() {
        let inc = scan.is_inclusive();
        let mut x = floats(n, 5);
        for v in x.iter_mut().skip(3).step_by(101) {
            *v = f32::NAN;
        }
        let clean: Vec<f32> = floats(n, 6);
        let what = format!("n = {n}, {scan:?} on {}", device.name());

        let got = scan_on!(scan_sum_f32, device, scan, &clean);
        let again = scan_on!(scan_sum_f32, device, scan, &clean);
        assert!(
            got.iter()
                .zip(&again)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "f32 sum again, {what}"
        );
        let exact = cpu_scan(
            &clean.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            0.0,
            |a, b| a + b,
            inc,
        );
        let magnitude = cpu_scan(
            &clean.iter().map(|&v| v.abs() as f64).collect::<Vec<_>>(),
            0.0,
            |a, b| a + b,
            inc,
        );
        for i in 0..n {
            let bound = n as f64 * f32::EPSILON as f64 * magnitude[i] + 1e-30;
            assert!(
                (got[i] as f64 - exact[i]).abs() <= bound,
                "f32 sum [{i}] = {} against {}, {what}",
                got[i],
                exact[i]
            );
        }
        bits.extend(got.iter().map(|v| v.to_bits() as u64));

        let x64: Vec<f64> = clean.iter().map(|&v| v as f64 * 3.0).collect();
        let got = scan_on!(scan_sum_f64, device, scan, &x64);
        let again = scan_on!(scan_sum_f64, device, scan, &x64);
        assert!(
            got.iter()
                .zip(&again)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "f64 sum again, {what}"
        );
        let exact = cpu_scan(&x64, 0.0, |a, b| a + b, inc);
        let magnitude = cpu_scan(
            &x64.iter().map(|v| v.abs()).collect::<Vec<_>>(),
            0.0,
            |a, b| a + b,
            inc,
        );
        for i in 0..n {
            assert!(
                (got[i] - exact[i]).abs() <= n as f64 * f64::EPSILON * magnitude[i] + 1e-300,
                "f64 sum [{i}], {what}"
            );
        }
        bits.extend(got.iter().map(|v| v.to_bits()));

        let got = scan_on!(scan_min_f32, device, scan, &x);
        let expected = cpu_scan(&x, f32::INFINITY, f32::min, inc);
        assert!(common::same_bits(&got, &expected), "f32 min, {what}");
        let got = scan_on!(scan_max_f32, device, scan, &x);
        let expected = cpu_scan(&x, f32::NEG_INFINITY, f32::max, inc);
        assert!(common::same_bits(&got, &expected), "f32 max, {what}");
        let got = scan_on!(scan_max_f64, device, scan, &x64);
        let expected = cpu_scan(&x64, f64::NEG_INFINITY, f64::max, inc);
        assert_eq!(got, expected, "f64 max, {what}");
    }
    bits
}

/// Scans of `Reduce` types: the running minimum with its index (ties to the lower index, NaN
/// ignored), and the composition of affine maps, which is not commutative: exact.
fn reduce_type_scans(device: &Device) {
    for (n, scan) in cases() {
        let inc = scan.is_inclusive();
        let what = format!("n = {n}, {scan:?} on {}", device.name());
        let mut values = floats(n, 7);
        for v in values.iter_mut().step_by(13) {
            *v = f32::NAN;
        }
        for i in (5..n).step_by(17) {
            values[i] = values[i - 5];
        }
        let locs: Vec<MinLoc> = values
            .iter()
            .enumerate()
            .map(|(i, &value)| MinLoc {
                value,
                index: i as u32,
            })
            .collect();
        let got = scan_on!(scan_min_loc, device, scan, &locs);
        let identity = <MinLoc as offload::Reduce>::identity();
        let expected = cpu_scan(&locs, identity, offload::Reduce::combine, inc);
        assert!(
            got.iter()
                .zip(&expected)
                .all(|(a, b)| a.index == b.index && a.value.to_bits() == b.value.to_bits()),
            "min-loc, {what}"
        );

        let maps: Vec<Affine> = ints(n, 8)
            .iter()
            .map(|&v| Affine {
                a: (v as u32) | 1,
                b: (v >> 32) as u32,
            })
            .collect();
        let got = scan_on!(scan_affine, device, scan, &maps);
        let expected = cpu_scan(&maps, Affine { a: 1, b: 0 }, offload::Reduce::combine, inc);
        assert_eq!(got, expected, "affine maps, {what}");
    }
}

/// On a stream, with one scratch for several scans, over views of part of a vector: the same
/// as `run`.
fn stream_scans_on_views(device: &Device) {
    let n = 300_001;
    let x: Vec<u32> = ints(n, 9).iter().map(|&v| (v >> 40) as u32).collect();
    let xd = DeviceVec::from_slice(device, &x).unwrap();
    let mut exclusive = DeviceVec::<u32>::zeroed(device, n).unwrap();
    let mut inclusive = DeviceVec::<u32>::zeroed(device, n - 10).unwrap();
    let mut small = DeviceVec::<u32>::zeroed(device, 7).unwrap();
    let mut scratch = offload::scan::Scratch::new();
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let shaped = Scan::exclusive().block(128).tile(4096);
        scans::scan_sum_u32::enqueue(
            &stream,
            shaped,
            xd.slice(..),
            exclusive.slice_mut(..),
            &mut scratch,
        )?;
        scans::scan_sum_u32::enqueue(
            &stream,
            Scan::inclusive(),
            xd.slice(5..n - 5),
            inclusive.slice_mut(..),
            &mut scratch,
        )?;
        scans::scan_sum_u32::enqueue(
            &stream,
            Scan::inclusive().tile(2),
            xd.slice(..7),
            small.slice_mut(..),
            &mut scratch,
        )
    })
    .unwrap();
    assert_eq!(
        exclusive.to_vec().unwrap(),
        cpu_scan(&x, 0, u32::wrapping_add, false)
    );
    assert_eq!(
        inclusive.to_vec().unwrap(),
        cpu_scan(&x[5..n - 5], 0, u32::wrapping_add, true)
    );
    assert_eq!(
        small.to_vec().unwrap(),
        cpu_scan(&x[..7], 0, u32::wrapping_add, true)
    );
}

/// Refused before anything runs: an output of another length, no threads, too many threads for
/// the element size, a tile of 0 elements.
fn refused(device: &Device) {
    let xd = DeviceVec::from_slice(device, &[1u32, 2, 3]).unwrap();
    let mut short = DeviceVec::<u32>::zeroed(device, 2).unwrap();
    let err = scans::scan_sum_u32::exclusive(&xd, &mut short).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                argument: "out",
                ..
            }
        ),
        "{err}"
    );
    let mut out = DeviceVec::<u32>::zeroed(device, 3).unwrap();
    for scan in [
        Scan::exclusive().block(0),
        Scan::exclusive().block(2048),
        Scan::inclusive().tile(0),
    ] {
        let err = scans::scan_sum_u32::run(scan, &xd, &mut out).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    }
    // 16 KiB of MinLoc (8 bytes) is 2048 of them: 768 threads (what its registers allow on an
    // H200) fit, and one element each.
    let locs = DeviceVec::from_slice(
        device,
        &[MinLoc {
            value: 1.0,
            index: 0,
        }; 3],
    )
    .unwrap();
    let mut best = DeviceVec::zeroed(device, 3).unwrap();
    scans::scan_min_loc::run(Scan::inclusive().block(768), &locs, &mut best).unwrap();
    assert_eq!(
        best.to_vec().unwrap()[2],
        MinLoc {
            value: 1.0,
            index: 0
        }
    );
}

/// The indices of the elements above a threshold, on the device, as the CPU's filter.
fn compaction_matches_filter(device: &Device) {
    for n in SIZES {
        let x = floats(n, 10);
        let xd = DeviceVec::from_slice(device, &x).unwrap();
        for (threshold, shape) in [
            (0.25, (None, None)),
            (-2.0, (Some(64), Some(999))),
            (2.0, (None, None)),
            // As many threads as any scan's registers allow on an H200 (128 a thread).
            (0.0, (Some(512), Some(20_000))),
        ] {
            let got = compaction::indices_above(scan_of(false, shape), threshold, &xd)
                .unwrap()
                .to_vec()
                .unwrap();
            let expected: Vec<u32> = (0..n as u32)
                .filter(|&i| x[i as usize] > threshold)
                .collect();
            assert_eq!(
                got,
                expected,
                "compaction of {n} above {threshold} on {}",
                device.name()
            );
        }
    }
}

mod host {
    use offload::Device;

    #[test]
    fn integer_scans_are_exact() {
        super::integer_scans(&Device::host());
    }
    #[test]
    fn float_scans_match_cpu_and_repeat() {
        super::float_scans(&Device::host());
    }
    #[test]
    fn reduce_type_scans_are_exact_and_ordered() {
        super::reduce_type_scans(&Device::host());
    }
    #[test]
    fn stream_scans_on_views() {
        super::stream_scans_on_views(&Device::host());
    }
    #[test]
    fn refused() {
        super::refused(&Device::host());
    }
    #[test]
    fn compaction_matches_filter() {
        super::compaction_matches_filter(&Device::host());
    }
}

mod gpu {
    use super::gpu;
    use offload::Device;

    #[test]
    fn integer_scans_are_exact_and_as_on_the_host() {
        if let Some(gpu) = gpu("integer_scans_are_exact_and_as_on_the_host") {
            assert_eq!(
                super::integer_scans(&gpu),
                super::integer_scans(&Device::host())
            );
        }
    }
    #[test]
    fn float_scans_match_the_host_bit_for_bit() {
        if let Some(gpu) = gpu("float_scans_match_the_host_bit_for_bit") {
            assert!(super::float_scans(&gpu) == super::float_scans(&Device::host()));
        }
    }
    #[test]
    fn reduce_type_scans_are_exact_and_ordered() {
        if let Some(gpu) = gpu("reduce_type_scans_are_exact_and_ordered") {
            super::reduce_type_scans(&gpu);
        }
    }
    #[test]
    fn stream_scans_on_views() {
        if let Some(gpu) = gpu("stream_scans_on_views") {
            super::stream_scans_on_views(&gpu);
        }
    }
    #[test]
    fn refused() {
        if let Some(gpu) = gpu("refused") {
            super::refused(&gpu);
        }
    }
    #[test]
    fn compaction_matches_filter() {
        if let Some(gpu) = gpu("compaction_matches_filter") {
            super::compaction_matches_filter(&gpu);
        }
    }
}
