//! Ownership views (block tiles, sub-ranges, scatter through a permutation, shared atomics) on
//! the host backend and on the first GPU, against plain CPU loops; panics in library calls name
//! the kernel's line on both.
//!
//! The GPU tests print `SKIPPED` and pass without a GPU; with `OFFLOAD_REQUIRE_GPU=1` they fail.

mod common;

use common::floats;
use common::gpu::gpu;
use offload::{Device, Dim3, Error, Launch};
use offload_examples::kernels::views;
use offload_examples::reference;
use std::sync::Mutex;

/// Shapes that cover fewer, as many and more blocks than tiles, and 2D and 3D blocks.
fn shapes() -> Vec<(u32, Dim3)> {
    vec![
        (1, Dim3::new(1, 1, 1)),
        (3, Dim3::new(32, 1, 1)),
        (7, Dim3::new(8, 4, 1)),
        (64, Dim3::new(4, 2, 2)),
        (200, Dim3::new(128, 1, 1)),
    ]
}

fn reverse_tiles_matches_cpu(device: &Device) {
    for (n, chunk) in [(0, 4), (1000, 256), (1000, 1), (77, 1024), (5000, 100)] {
        let x = floats(n, 31);
        let mut want = vec![0.0; n];
        reference::reverse_chunks(chunk, &x, &mut want);
        for (grid, block) in shapes() {
            let mut out = vec![f32::NAN; n];
            let launch = Launch::on(device).grid(grid).block(block);
            views::reverse_tiles::launch(launch, chunk as u32, &x, &mut out).unwrap();
            assert_eq!(
                out,
                want,
                "n={n} chunk={chunk} grid={grid} block={block} on {}",
                device.name()
            );
        }
    }
}

fn matmul_per_block_matches_cpu(device: &Device) {
    for (count, n) in [(0usize, 3usize), (1, 1), (5, 4), (33, 7), (10, 16)] {
        let (a, b) = (floats(count * n * n, 32), floats(count * n * n, 33));
        let mut want = vec![0.0f32; count * n * n];
        for m in 0..count {
            let base = m * n * n;
            for r in 0..n {
                for c in 0..n {
                    let mut acc = 0.0f32;
                    for k in 0..n {
                        acc += a[base + r * n + k] * b[base + k * n + c];
                    }
                    want[base + r * n + c] = acc;
                }
            }
        }
        for (grid, block) in shapes() {
            let mut c = vec![f32::NAN; count * n * n];
            let launch = Launch::on(device).grid(grid).block(block);
            views::matmul_per_block::launch(launch, n as u32, &a, &b, &mut c).unwrap();
            assert_eq!(
                c,
                want,
                "{count} of {n}x{n}, grid={grid} block={block} on {}",
                device.name()
            );
        }
    }
}

fn fill_range_writes_only_the_range(device: &Device) {
    let n = 1003;
    let before = floats(n, 34);
    for (start, end) in [(0, 0), (0, n), (1, 1002), (500, 501), (999, 1003)] {
        for (grid, block) in shapes() {
            let mut out = before.clone();
            let launch = Launch::on(device).grid(grid).block(block);
            views::fill_range::launch(launch, start as u32, end as u32, 7.5, &mut out).unwrap();
            for (i, (&got, &old)) in out.iter().zip(&before).enumerate() {
                let want = if (start..end).contains(&i) { 7.5 } else { old };
                assert_eq!(
                    got, want,
                    "{start}..{end}, grid={grid} block={block}: element {i}"
                );
            }
        }
    }
}

fn permute_moves_every_element(device: &Device) {
    for n in [0usize, 1, 1000, 65_537] {
        let x = floats(n, 35);
        // A permutation: i -> (i * stride + 3) mod n with a stride prime to n.
        // gcd(s, 0) is s: for n = 0 any stride will do.
        let stride = (1..)
            .map(|s| 2 * s + 1)
            .find(|s| gcd(*s, n.max(1)) == 1)
            .unwrap();
        let index: Vec<u32> = (0..n)
            .map(|i| ((i * stride + 3) % n.max(1)) as u32)
            .collect();
        let mut want = vec![0.0f32; n];
        for (i, &to) in index.iter().enumerate() {
            want[to as usize] = x[i];
        }
        for (grid, block) in shapes() {
            let mut out = vec![f32::NAN; n];
            let launch = Launch::on(device).grid(grid).block(block);
            // SAFETY: `index` is a permutation of 0..n.
            unsafe { views::permute::launch(launch, &index, &x, &mut out) }.unwrap();
            assert_eq!(
                out,
                want,
                "n={n} grid={grid} block={block} on {}",
                device.name()
            );
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The line marked `// PANICS HERE` inside kernel `kernel`.
fn marked_line(kernel: &str) -> u32 {
    let source = include_str!("../src/kernels/views.rs");
    let start = source.find(&format!("pub fn {kernel}(")).unwrap();
    let offset = start + source[start..].find("// PANICS HERE").unwrap();
    source[..offset].lines().count() as u32
}

/// A panicking kernel's `KernelFailed` message.
fn panic_message(result: offload::Result<()>, kernel: &str) -> String {
    match result {
        Err(Error::KernelFailed { message, .. }) => message,
        other => panic!("expected KernelFailed from {kernel}, got {other:?}"),
    }
}

/// Runs both panicking kernels on `device`; returns their messages.
fn panicking_kernels(device: &Device) -> [(String, &'static str); 2] {
    let launch = || Launch::on(device).grid(2).block(64);
    let mut out = vec![0u32; 100];
    // SAFETY (of `at` inside): see the kernel; it panics before any access.
    let at = panic_message(
        views::at_past_the_end::launch(launch(), &mut out),
        "at_past_the_end",
    );
    let slice = panic_message(
        views::slice_past_the_end::launch(launch(), &mut out),
        "slice_past_the_end",
    );
    assert_eq!(
        out,
        vec![0; 100],
        "a failed launch leaves its output as it was"
    );
    [(at, "at_past_the_end"), (slice, "slice_past_the_end")]
}

#[test]
fn reverse_tiles_on_the_host() {
    reverse_tiles_matches_cpu(&Device::host());
}

#[test]
fn matmul_per_block_on_the_host() {
    matmul_per_block_matches_cpu(&Device::host());
}

#[test]
fn fill_range_on_the_host() {
    fill_range_writes_only_the_range(&Device::host());
}

#[test]
fn permute_on_the_host() {
    permute_moves_every_element(&Device::host());
}

/// On the host the panic hook sees each panicking GPU thread's location: the kernel's line.
#[test]
fn host_panics_in_library_calls_name_the_kernel_line() {
    static SEEN: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Some(at) = info.location() {
            SEEN.lock()
                .unwrap()
                .push((at.file().to_string(), at.line()));
        }
    }));
    let messages = panicking_kernels(&Device::host());
    std::panic::set_hook(previous);
    let seen = SEEN.lock().unwrap().clone();
    assert!(
        messages[0].0.contains("index out of bounds"),
        "{}",
        messages[0].0
    );
    assert!(
        messages[1].0.contains("slice range out of bounds"),
        "{}",
        messages[1].0
    );
    for (_, kernel) in &messages {
        let line = marked_line(kernel);
        assert!(
            seen.iter()
                .any(|(file, l)| file.ends_with("src/kernels/views.rs") && *l == line),
            "{kernel}: no panic at views.rs:{line} among {seen:?}"
        );
    }
    assert!(
        seen.iter()
            .all(|(file, _)| file.ends_with("src/kernels/views.rs")),
        "every panic names the kernel's file, none a library's: {seen:?}"
    );
}

#[test]
fn reverse_tiles_on_the_gpu() {
    if let Some(gpu) = gpu("reverse_tiles_on_the_gpu") {
        reverse_tiles_matches_cpu(&gpu);
    }
}

#[test]
fn matmul_per_block_on_the_gpu() {
    if let Some(gpu) = gpu("matmul_per_block_on_the_gpu") {
        matmul_per_block_matches_cpu(&gpu);
    }
}

#[test]
fn fill_range_on_the_gpu() {
    if let Some(gpu) = gpu("fill_range_on_the_gpu") {
        fill_range_writes_only_the_range(&gpu);
    }
}

#[test]
fn permute_on_the_gpu() {
    if let Some(gpu) = gpu("permute_on_the_gpu") {
        permute_moves_every_element(&gpu);
    }
}

/// On the GPU the panic record holds the location: the kernel's file and line.
#[test]
fn gpu_panics_in_library_calls_name_the_kernel_line() {
    let Some(gpu) = gpu("gpu_panics_in_library_calls_name_the_kernel_line") else {
        return;
    };
    for (message, kernel) in panicking_kernels(&gpu) {
        let at = format!("panicked at src/kernels/views.rs:{}:", marked_line(kernel));
        assert!(
            message.starts_with(&at),
            "{kernel}: {message} (expected {at}…)"
        );
    }
}
