//! The example kernels' SPIR-V image (`OFFLOAD_SPIRV=1`) run by a real OpenCL runtime (Intel's
//! OpenCL CPU runtime in CI: `scripts/install-intel-opencl`), each result equal, bit for bit, to
//! the host backend's for the same launch: thread ids, a struct by value, f32 arithmetic,
//! sub-group (warp) operations, static and dynamic shared memory with the block barrier, integer
//! and f32 atomics, and a kernel panic reported through the image's panic record.
//!
//! Without the image or an OpenCL device that takes SPIR-V these tests print `SKIPPED` and pass;
//! with `OFFLOAD_REQUIRE_OPENCL=1` (scripts/test, after installing the runtime) they fail.

mod opencl;

use offload::{Device, ImageFormat, Launch};
use offload_examples::kernels::{self, atomics, block, warps, Grid2};
use opencl::{bytes_of, Arg, OpenCl};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The device with the image built, once per process (building the program takes seconds).
fn device(test: &str) -> Option<&'static Mutex<OpenCl>> {
    static DEVICE: OnceLock<Result<Mutex<OpenCl>, String>> = OnceLock::new();
    let loaded = DEVICE.get_or_init(|| {
        let image = offload_examples::__OFFLOAD_IMAGES
            .images
            .iter()
            .find(|i| i.format == ImageFormat::Spirv)
            .ok_or("no SPIR-V image (build with OFFLOAD_SPIRV=1)")?;
        let started = std::time::Instant::now();
        let cl = OpenCl::load(image.bytes)?;
        eprintln!(
            "built the SPIR-V image ({} bytes) for {} in {:.1} s",
            image.bytes.len(),
            cl.device_name,
            started.elapsed().as_secs_f64()
        );
        Ok(Mutex::new(cl))
    });
    match loaded {
        Ok(cl) => Some(cl),
        Err(reason) => {
            assert!(
                !std::env::var("OFFLOAD_REQUIRE_OPENCL").is_ok_and(|v| v == "1"),
                "{test}: OFFLOAD_REQUIRE_OPENCL=1 but {reason}"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
            None
        }
    }
}

fn host_launch(grid: u32, block: impl Into<offload::Dim3>) -> Launch<'static> {
    static HOST: OnceLock<Device> = OnceLock::new();
    Launch::on(HOST.get_or_init(Device::host))
        .grid(grid)
        .block(block)
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-data elements, read as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: plain-data elements (every bit pattern valid), written as bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// Device copies of slices for one launch: inputs uploaded, outputs downloaded after it.
struct Buffers<'a> {
    cl: &'a OpenCl,
    outputs: Vec<(*mut std::ffi::c_void, &'a mut [u8])>,
}

impl<'a> Buffers<'a> {
    fn new(cl: &'a OpenCl) -> Self {
        Buffers {
            cl,
            outputs: Vec::new(),
        }
    }
    fn input(&self, data: &[u8]) -> Arg<'static> {
        Arg::Buffer(self.cl.upload(data).unwrap())
    }
    fn output(&mut self, data: &'a mut [u8]) -> Arg<'static> {
        let ptr = self.cl.upload(data).unwrap();
        self.outputs.push((ptr, data));
        Arg::Buffer(ptr)
    }
    fn finish(self) {
        for (ptr, data) in self.outputs {
            self.cl.download(ptr, data).unwrap();
        }
    }
}

fn floats(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 20_000) as f32 / 997.0 - 10.0
        })
        .collect()
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn saxpy_and_thread_ids_match_the_host_backend() {
    let Some(cl) = device("saxpy_and_thread_ids_match_the_host_backend") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (x, y0) = (floats(10_001, 1), floats(10_001, 2));
    let n = x.len();
    for (grid, block) in [(1usize, 1usize), (7, 96), (40, 256)] {
        let mut y = y0.clone();
        let mut b = Buffers::new(&cl);
        let args = [
            Arg::Value(bytes_of(&1.75f32)),
            b.input(as_bytes(&x)),
            Arg::Value(bytes_of(&n)),
            b.output(as_bytes_mut(&mut y)),
            Arg::Value(bytes_of(&n)),
        ];
        cl.launch("saxpy", [grid, 1, 1], [block, 1, 1], 0, &args)
            .unwrap();
        b.finish();
        let mut want = y0.clone();
        kernels::saxpy::launch(host_launch(grid as u32, block as u32), 1.75, &x, &mut want)
            .unwrap();
        assert!(same_bits(&y, &want), "saxpy, grid {grid} block {block}");
    }

    // 3D shapes: every thread's global id and the thread count, as on the host.
    let (grid, block) = ([3usize, 2, 2], [4usize, 3, 2]);
    let threads = 12 * 24;
    let (mut ids, mut totals) = (vec![u32::MAX; threads], vec![0u32; threads]);
    let mut b = Buffers::new(&cl);
    let args = [
        b.output(as_bytes_mut(&mut ids)),
        Arg::Value(bytes_of(&threads)),
        b.output(as_bytes_mut(&mut totals)),
        Arg::Value(bytes_of(&threads)),
    ];
    cl.launch("thread_ids", grid, block, 0, &args).unwrap();
    b.finish();
    let (mut want_ids, mut want_totals) = (vec![u32::MAX; threads], vec![0u32; threads]);
    let launch = host_launch(1, 1).grid((3, 2, 2)).block((4, 3, 2));
    kernels::thread_ids::launch(launch, &mut want_ids, &mut want_totals).unwrap();
    assert_eq!(ids, want_ids);
    assert_eq!(totals, want_totals);
}

#[test]
fn a_struct_by_value_reaches_the_kernel() {
    let Some(cl) = device("a_struct_by_value_reaches_the_kernel") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let grid = Grid2 {
        width: 97,
        height: 61,
        centre: 0.3,
    };
    let input = floats(97 * 61, 3);
    let n = input.len();
    let mut out = vec![0.0f32; n];
    let mut b = Buffers::new(&cl);
    let args = [
        Arg::Value(bytes_of(&grid)),
        b.input(as_bytes(&input)),
        Arg::Value(bytes_of(&n)),
        b.output(as_bytes_mut(&mut out)),
        Arg::Value(bytes_of(&n)),
    ];
    cl.launch("stencil5", [13, 1, 1], [64, 1, 1], 0, &args)
        .unwrap();
    b.finish();
    let mut want = vec![0.0f32; input.len()];
    kernels::stencil5::launch(host_launch(13, 64), grid, &input, &mut want).unwrap();
    assert!(same_bits(&out, &want));
}

#[test]
fn warp_operations_match_the_host_backend() {
    let Some(cl) = device("warp_operations_match_the_host_backend") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let values: Vec<i32> = (0..96).map(|i| (i * 37 % 200) - 100).collect();
    let n = values.len();
    // Full warps, and warps where lanes 20.. returned before the warp operations.
    let size = std::mem::size_of::<warps::WarpResults>();
    for live_lanes in [32u32, 20] {
        // The results as bytes (the struct has padding, which is never read as a value).
        let mut bytes = vec![0u8; values.len() * size];
        let mut b = Buffers::new(&cl);
        let args = [
            Arg::Value(bytes_of(&live_lanes)),
            b.input(as_bytes(&values)),
            Arg::Value(bytes_of(&n)),
            b.output(&mut bytes),
            Arg::Value(bytes_of(&n)),
        ];
        cl.launch("warp_operations", [1, 1, 1], [96, 1, 1], 0, &args)
            .unwrap();
        b.finish();
        let out: Vec<warps::WarpResults> = bytes
            .chunks_exact(size)
            // SAFETY: each chunk holds a WarpResults the kernel wrote (integers and floats:
            // every bit pattern is valid).
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast()) })
            .collect();
        let mut want = vec![warps::WarpResults::default(); values.len()];
        warps::warp_operations::launch(host_launch(1, 96), live_lanes, &values, &mut want).unwrap();
        for (i, (got, want)) in out.iter().zip(&want).enumerate() {
            let lane = i as u32 % 32;
            if lane >= live_lanes {
                continue;
            }
            // A shuffle from a lane that returned gives an unspecified value (the reader's own
            // on the host backend): compare those only where the source lane is live.
            let live = |source: Option<u32>| source.is_none_or(|s| s < live_lanes);
            let mut got = *got;
            if !live(Some((lane * 7 + 3) % 32)) {
                got.indexed = want.indexed;
            }
            if !live(lane.checked_sub(3)) {
                got.up = want.up;
            }
            if !live(Some(lane + 5).filter(|&s| s < 32)) {
                got.down = want.down;
            }
            if !live(Some(lane ^ 9)) {
                got.xor = want.xor;
            }
            if !live(Some(lane + 1).filter(|&s| s < 32)) {
                got.wide = want.wide;
            }
            if !live(Some(lane ^ 1)) {
                got.float = want.float;
            }
            assert_eq!(&got, want, "thread {i}, {live_lanes} live lanes");
        }
    }
}

#[test]
fn shared_memory_and_barriers_match_the_host_backend() {
    let Some(cl) = device("shared_memory_and_barriers_match_the_host_backend") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let x = floats(3000, 4);
    let n = x.len();
    for (kernel, dynamic) in [
        ("reverse_chunks", 0usize),
        ("reverse_chunks_dynamic", 4 * 128),
    ] {
        let mut out = vec![f32::NAN; n];
        let mut b = Buffers::new(&cl);
        let args = [
            b.input(as_bytes(&x)),
            Arg::Value(bytes_of(&n)),
            b.output(as_bytes_mut(&mut out)),
            Arg::Value(bytes_of(&n)),
        ];
        cl.launch(kernel, [5, 1, 1], [128, 1, 1], dynamic, &args)
            .unwrap();
        b.finish();
        let mut want = vec![f32::NAN; x.len()];
        let launch = host_launch(5, 128).dynamic_shared(dynamic as u32);
        if dynamic == 0 {
            block::reverse_chunks::launch(launch, &x, &mut want).unwrap();
        } else {
            block::reverse_chunks_dynamic::launch(launch, &x, &mut want).unwrap();
        }
        assert!(same_bits(&out, &want), "{kernel}");
        assert!(cl.take_panic_record().unwrap().flag == 0, "{kernel}");
    }
    // Even threads return before the barrier: OpenCL leaves that undefined, CUDA and the host
    // backend wait for the threads that have not returned. This runtime does the same.
    let mut out = vec![0u32; 128];
    let mut b = Buffers::new(&cl);
    let len = 128usize;
    let args = [b.output(as_bytes_mut(&mut out)), Arg::Value(bytes_of(&len))];
    cl.launch(
        "barrier_after_early_return",
        [2, 1, 1],
        [64, 1, 1],
        0,
        &args,
    )
    .unwrap();
    b.finish();
    let mut want = vec![0u32; 128];
    block::barrier_after_early_return::launch(host_launch(2, 64), &mut want).unwrap();
    assert_eq!(out, want);
}

#[test]
fn atomics_match_the_host_backend() {
    let Some(cl) = device("atomics_match_the_host_backend") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let values: Vec<f32> = floats(20_000, 5)
        .iter()
        .map(|v| (v + 10.0) / 20.0)
        .collect();
    let (n, bin_count) = (values.len(), 37usize);
    let mut bins = vec![0u32; bin_count];
    let mut b = Buffers::new(&cl);
    let args = [
        b.input(as_bytes(&values)),
        Arg::Value(bytes_of(&n)),
        b.output(as_bytes_mut(&mut bins)),
        Arg::Value(bytes_of(&bin_count)),
    ];
    cl.launch("histogram", [9, 1, 1], [128, 1, 1], 0, &args)
        .unwrap();
    b.finish();
    let mut want = vec![0u32; 37];
    atomics::histogram::launch(host_launch(9, 128), &values, &mut want).unwrap();
    assert_eq!(bins, want);
    assert_eq!(bins.iter().sum::<u32>(), values.len() as u32);
}

#[test]
fn a_kernel_panic_is_recorded_and_the_device_stays_usable() {
    let Some(cl) = device("a_kernel_panic_is_recorded_and_the_device_stays_usable") else {
        return;
    };
    let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let x = floats(1000, 6);
    let n = x.len();
    let mut out = vec![0.0f32; n];
    // No dynamic shared memory: every thread's slot is out of bounds, a panic in each.
    let mut b = Buffers::new(&cl);
    let args = [
        b.input(as_bytes(&x)),
        Arg::Value(bytes_of(&n)),
        b.output(as_bytes_mut(&mut out)),
        Arg::Value(bytes_of(&n)),
    ];
    cl.launch("reverse_chunks_dynamic", [3, 1, 1], [64, 1, 1], 0, &args)
        .unwrap();
    b.finish();
    let record = cl.take_panic_record().unwrap();
    let message = record.to_string();
    assert!(
        message.starts_with("panicked at src/kernels/block.rs:"),
        "{message}"
    );
    assert!(
        record.block.iter().all(|&b| b < 3) && record.thread[0] < 64,
        "{message}"
    );
    // The record was re-armed, and the next launch runs normally.
    assert_eq!(cl.take_panic_record().unwrap().flag, 0);
    let (mut y, ten, two) = (vec![1.0f32; 10], 10usize, 2.0f32);
    let mut b = Buffers::new(&cl);
    let args = [
        Arg::Value(bytes_of(&two)),
        b.input(as_bytes(&x[..10])),
        Arg::Value(bytes_of(&ten)),
        b.output(as_bytes_mut(&mut y)),
        Arg::Value(bytes_of(&ten)),
    ];
    cl.launch("saxpy", [1, 1, 1], [32, 1, 1], 0, &args).unwrap();
    b.finish();
    assert!(y.iter().zip(&x).all(|(y, x)| *y == 1.0 + 2.0 * x));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Random sizes, values and launch shapes: the OpenCL device equals the host backend.
        #[test]
        fn random_launches_match_the_host_backend(
            n in 0usize..4000,
            grid in 1usize..40,
            block in 1usize..300,
            a in -4.0f32..4.0,
            seed in any::<u32>(),
        ) {
            let Some(cl) = device("random_launches_match_the_host_backend") else {
                return Ok(());
            };
            let cl = cl.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let (x, y0) = (floats(n, seed), floats(n, seed ^ 0x5555));
            let mut y = y0.clone();
            let mut b = Buffers::new(&cl);
            let args = [
                Arg::Value(bytes_of(&a)),
                b.input(as_bytes(&x)),
                Arg::Value(bytes_of(&n)),
                b.output(as_bytes_mut(&mut y)),
                Arg::Value(bytes_of(&n)),
            ];
            cl.launch("saxpy", [grid, 1, 1], [block, 1, 1], 0, &args).unwrap();
            b.finish();
            let mut want = y0.clone();
            kernels::saxpy::launch(host_launch(grid as u32, block as u32), a, &x, &mut want).unwrap();
            prop_assert!(same_bits(&y, &want), "saxpy n {} grid {} block {}", n, grid, block);

            let values: Vec<f32> = x.iter().map(|v| (v + 10.0) / 20.0).collect();
            let bin_count = 1 + seed as usize % 50;
            let mut bins = vec![0u32; bin_count];
            let mut b = Buffers::new(&cl);
            let args = [
                b.input(as_bytes(&values)),
                Arg::Value(bytes_of(&n)),
                b.output(as_bytes_mut(&mut bins)),
                Arg::Value(bytes_of(&bin_count)),
            ];
            cl.launch("histogram", [grid, 1, 1], [block, 1, 1], 0, &args).unwrap();
            b.finish();
            let mut want = vec![0u32; bin_count];
            atomics::histogram::launch(host_launch(grid as u32, block as u32), &values, &mut want).unwrap();
            prop_assert_eq!(bins, want);
        }
    }
}
