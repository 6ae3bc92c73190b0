//! The example kernels' SPIR-V image (`OFFLOAD_SPIRV=1`) run through the runtime's OpenCL plugin
//! (Intel's OpenCL CPU runtime in CI: `scripts/install-spirv`, with `OFFLOAD_BACKEND=opencl`,
//! which offers CPU devices), each result equal, bit for bit, to the host backend's for the same
//! launch: thread ids, a struct by value, f32 arithmetic, sub-group (warp) operations, static and
//! dynamic shared memory with the block barrier, integer and f32 atomics, checked multiplies
//! (unsigned and signed, block tiles), and a kernel panic reported through the image's panic
//! record.
//!
//! Without the image or an OpenCL device these tests print `SKIPPED` and pass; with
//! `OFFLOAD_REQUIRE_OPENCL=1` (scripts/test, after installing the runtime) they fail.

use offload::{BackendKind, Device, Error, ImageFormat, Launch};
use offload_examples::kernels::{self, atomics, block, views, warps, Grid2};
use std::io::Write;
use std::sync::OnceLock;

/// The first device of the OpenCL plugin, or `None` (after saying why) when the test must be
/// skipped.
fn device(test: &str) -> Option<&'static Device> {
    static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();
    let found = DEVICE.get_or_init(|| {
        if !offload_examples::__OFFLOAD_IMAGES
            .images
            .iter()
            .any(|i| i.format == ImageFormat::Spirv)
        {
            return Err("no SPIR-V image (build with OFFLOAD_SPIRV=1)".to_string());
        }
        offload::devices_of(BackendKind::OpenCl)
            .into_iter()
            .next()
            .ok_or_else(|| {
                format!(
                    "no OpenCL device ({}; CPU runtimes are offered with OFFLOAD_BACKEND=opencl)",
                    offload::plugins_without_devices().join("; ")
                )
            })
    });
    match found {
        Ok(device) => Some(device),
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
    let (x, y0) = (floats(10_001, 1), floats(10_001, 2));
    for (grid, block) in [(1u32, 1u32), (7, 96), (40, 256)] {
        let mut y = y0.clone();
        let launch = Launch::on(cl).grid(grid).block(block);
        kernels::saxpy::launch(launch, 1.75, &x, &mut y).unwrap();
        let mut want = y0.clone();
        kernels::saxpy::launch(host_launch(grid, block), 1.75, &x, &mut want).unwrap();
        assert!(same_bits(&y, &want), "saxpy, grid {grid} block {block}");
    }

    // 3D shapes: every thread's global id and the thread count, as on the host.
    let threads = 12 * 24;
    let (mut ids, mut totals) = (vec![u32::MAX; threads], vec![0u32; threads]);
    let launch = Launch::on(cl).grid((3, 2, 2)).block((4, 3, 2));
    kernels::thread_ids::launch(launch, &mut ids, &mut totals).unwrap();
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
    let grid = Grid2 {
        width: 97,
        height: 61,
        centre: 0.3,
    };
    let input = floats(97 * 61, 3);
    let mut out = vec![0.0f32; input.len()];
    kernels::stencil5::launch(Launch::on(cl).grid(13).block(64), grid, &input, &mut out).unwrap();
    let mut want = vec![0.0f32; input.len()];
    kernels::stencil5::launch(host_launch(13, 64), grid, &input, &mut want).unwrap();
    assert!(same_bits(&out, &want));
}

#[test]
fn warp_operations_match_the_host_backend() {
    let Some(cl) = device("warp_operations_match_the_host_backend") else {
        return;
    };
    let values: Vec<i32> = (0..96).map(|i| (i * 37 % 200) - 100).collect();
    // Full warps, and warps where lanes 20.. returned before the warp operations.
    for live_lanes in [32u32, 20] {
        let mut out = vec![warps::WarpResults::default(); values.len()];
        let launch = Launch::on(cl).grid(1).block(96);
        warps::warp_operations::launch(launch, live_lanes, &values, &mut out).unwrap();
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
    // Warp kernels run in sub-groups of 32 along x: another block width is refused, clearly.
    let mut out = vec![warps::WarpResults::default(); values.len()];
    let launch = Launch::on(cl).grid(1).block(48);
    match warps::warp_operations::launch(launch, 32, &values, &mut out) {
        Err(Error::InvalidLaunch { reason, .. }) => {
            assert!(reason.contains("must be a multiple of 32"), "{reason}")
        }
        other => panic!("a block of 48 threads: {other:?}"),
    }
}

#[test]
fn shared_memory_and_barriers_match_the_host_backend() {
    let Some(cl) = device("shared_memory_and_barriers_match_the_host_backend") else {
        return;
    };
    let x = floats(3000, 4);
    for dynamic in [0u32, 4 * 128] {
        let mut out = vec![f32::NAN; x.len()];
        let mut want = vec![f32::NAN; x.len()];
        let launch = Launch::on(cl).grid(5).block(128).dynamic_shared(dynamic);
        let host = host_launch(5, 128).dynamic_shared(dynamic);
        if dynamic == 0 {
            block::reverse_chunks::launch(launch, &x, &mut out).unwrap();
            block::reverse_chunks::launch(host, &x, &mut want).unwrap();
        } else {
            block::reverse_chunks_dynamic::launch(launch, &x, &mut out).unwrap();
            block::reverse_chunks_dynamic::launch(host, &x, &mut want).unwrap();
        }
        assert!(same_bits(&out, &want), "dynamic shared memory {dynamic}");
    }
    // Even threads return before the barrier: OpenCL leaves that undefined, CUDA and the host
    // backend wait for the threads that have not returned. This runtime does the same.
    let mut out = vec![0u32; 128];
    block::barrier_after_early_return::launch(Launch::on(cl).grid(2).block(64), &mut out).unwrap();
    let mut want = vec![0u32; 128];
    block::barrier_after_early_return::launch(host_launch(2, 64), &mut want).unwrap();
    assert_eq!(out, want);
}

#[test]
fn atomics_match_the_host_backend() {
    let Some(cl) = device("atomics_match_the_host_backend") else {
        return;
    };
    let values: Vec<f32> = floats(20_000, 5)
        .iter()
        .map(|v| (v + 10.0) / 20.0)
        .collect();
    let mut bins = vec![0u32; 37];
    atomics::histogram::launch(Launch::on(cl).grid(9).block(128), &values, &mut bins).unwrap();
    let mut want = vec![0u32; 37];
    atomics::histogram::launch(host_launch(9, 128), &values, &mut want).unwrap();
    assert_eq!(bins, want);
    assert_eq!(bins.iter().sum::<u32>(), values.len() as u32);
}

/// Multiplies with overflow (`checked_mul`) become OpenCL's `mul_hi` in the image (the runtime
/// lacks SPIR-V's OpUMulExtended/OpSMulExtended): every pair of operands around 2^32, 2^63 and
/// 2^64, either sign, unsigned and signed.
#[test]
fn checked_multiplies_match_the_host_backend() {
    let Some(cl) = device("checked_multiplies_match_the_host_backend") else {
        return;
    };
    let magnitudes: [u64; 12] = [
        0,
        1,
        3,
        0xffff_ffff,
        1 << 32,
        (1 << 32) + 1,
        3_037_000_499, // the largest square below 2^63 is its square
        3_037_000_500,
        i64::MAX as u64,
        1 << 63,
        u64::MAX,
        0xdead_beef_cafe,
    ];
    let operands: Vec<u64> = magnitudes
        .iter()
        .flat_map(|&m| [m, m.wrapping_neg()])
        .collect();
    let (a, b): (Vec<u64>, Vec<u64>) = operands
        .iter()
        .flat_map(|&x| operands.iter().map(move |&y| (x, y)))
        .unzip();
    let n = a.len();
    let (mut unsigned, mut signed, mut overflows) = (vec![1u64; n], vec![1i64; n], vec![9u8; n]);
    kernels::checked_products::launch(
        Launch::on(cl).grid(5).block(64),
        &a,
        &b,
        &mut unsigned,
        &mut signed,
        &mut overflows,
    )
    .unwrap();
    let (mut want_unsigned, mut want_signed, mut want_overflows) =
        (vec![1u64; n], vec![1i64; n], vec![9u8; n]);
    kernels::checked_products::launch(
        host_launch(5, 64),
        &a,
        &b,
        &mut want_unsigned,
        &mut want_signed,
        &mut want_overflows,
    )
    .unwrap();
    assert_eq!(unsigned, want_unsigned);
    assert_eq!(signed, want_signed);
    assert_eq!(overflows, want_overflows);
    // Every combination of the two overflows occurs.
    for bits in 0..4u8 {
        assert!(
            overflows.contains(&bits),
            "no pair with overflow bits {bits}"
        );
    }
}

/// `#[tile(..)]` outputs (BlockTiles, whose tiles are bounded by a checked multiply) in shapes
/// with fewer, as many and more blocks than tiles.
#[test]
fn block_tiles_match_the_host_backend() {
    let Some(cl) = device("block_tiles_match_the_host_backend") else {
        return;
    };
    for (n, chunk, grid, block) in [
        (1000usize, 256u32, 2u32, 32u32),
        (5000, 100, 7, 64),
        (77, 1024, 3, 128),
        (300, 1, 40, 8),
    ] {
        let x = floats(n, 7);
        let mut out = vec![f32::NAN; n];
        let launch = Launch::on(cl).grid(grid).block(block);
        views::reverse_tiles::launch(launch, chunk, &x, &mut out).unwrap();
        let mut want = vec![f32::NAN; n];
        views::reverse_tiles::launch(host_launch(grid, block), chunk, &x, &mut want).unwrap();
        assert!(
            same_bits(&out, &want),
            "n {n} chunk {chunk} grid {grid} block {block}"
        );
    }
}

#[test]
fn a_kernel_panic_is_recorded_and_the_device_stays_usable() {
    let Some(cl) = device("a_kernel_panic_is_recorded_and_the_device_stays_usable") else {
        return;
    };
    let x = floats(1000, 6);
    let mut out = vec![0.0f32; x.len()];
    // No dynamic shared memory: every thread's slot is out of bounds, a panic in each.
    let launch = Launch::on(cl).grid(3).block(64);
    match block::reverse_chunks_dynamic::launch(launch, &x, &mut out) {
        Err(Error::KernelFailed { message, .. }) => {
            assert!(
                message.contains("panicked at src/kernels/block.rs:"),
                "{message}"
            )
        }
        other => panic!("expected the kernel's panic, got {other:?}"),
    }
    // The record was re-armed, and the next launch runs normally.
    let mut y = vec![1.0f32; 10];
    kernels::saxpy::launch(Launch::on(cl).grid(1).block(32), 2.0, &x[..10], &mut y).unwrap();
    assert!(y.iter().zip(&x).all(|(y, x)| *y == 1.0 + 2.0 * x));
}

/// Without `OFFLOAD_BACKEND=opencl` an OpenCL CPU runtime is no device (a child process of this
/// test without the variable lists the OpenCL devices and the default device); with it, it is
/// the default device.
#[test]
fn a_cpu_runtime_is_a_device_only_when_asked_for() {
    const CHILD: &str = "OFFLOAD_OPENCL_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let names: Vec<String> = offload::devices_of(BackendKind::OpenCl)
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        println!("OPENCL DEVICES {names:?}");
        println!("DEFAULT {}", offload::default_device().unwrap().name());
        println!("REASONS {}", offload::plugins_without_devices().join("; "));
        return;
    }
    let Some(cl) = device("a_cpu_runtime_is_a_device_only_when_asked_for") else {
        return;
    };
    if !cl.name().contains("(OpenCL CPU ") {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: {} is no CPU runtime",
            cl.name()
        );
        return;
    }
    if std::env::var("OFFLOAD_BACKEND").is_ok_and(|v| v == "opencl") {
        assert_eq!(offload::default_device().unwrap().name(), cl.name());
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_cpu_runtime_is_a_device_only_when_asked_for",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env_remove("OFFLOAD_BACKEND")
        .env_remove("OFFLOAD_REQUIRE_GPU")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let line = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {stdout}"))
            .to_string()
    };
    assert!(!line("OPENCL DEVICES ").contains(cl.name()), "{stdout}");
    assert_ne!(line("DEFAULT "), cl.name());
    assert!(
        line("REASONS ").contains("a CPU device, offered only with OFFLOAD_BACKEND=opencl"),
        "{stdout}"
    );
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
            grid in 1u32..40,
            block in 1u32..300,
            a in -4.0f32..4.0,
            seed in any::<u32>(),
        ) {
            let Some(cl) = device("random_launches_match_the_host_backend") else {
                return Ok(());
            };
            let (x, y0) = (floats(n, seed), floats(n, seed ^ 0x5555));
            let mut y = y0.clone();
            kernels::saxpy::launch(Launch::on(cl).grid(grid).block(block), a, &x, &mut y).unwrap();
            let mut want = y0.clone();
            kernels::saxpy::launch(host_launch(grid, block), a, &x, &mut want).unwrap();
            prop_assert!(same_bits(&y, &want), "saxpy n {} grid {} block {}", n, grid, block);

            let values: Vec<f32> = x.iter().map(|v| (v + 10.0) / 20.0).collect();
            let bin_count = 1 + seed as usize % 50;
            let mut bins = vec![0u32; bin_count];
            let launch = Launch::on(cl).grid(grid).block(block);
            atomics::histogram::launch(launch, &values, &mut bins).unwrap();
            let mut want = vec![0u32; bin_count];
            atomics::histogram::launch(host_launch(grid, block), &values, &mut want).unwrap();
            prop_assert_eq!(bins, want);
        }
    }
}
