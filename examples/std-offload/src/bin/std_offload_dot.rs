// A program for rustc nightly's std::offload: two kernels in sequence over fixed-size arrays,
// inputs by shared reference (copied to the device only), results through raw pointers (copied
// back). Syntax after library/core/src/offload.md and the offload tests (mir-opt, pretty) of
// rust-lang/rust.
// std_originals/ holds the program as written for std::offload. It differs from this one in
// two lines: its `#![feature(gpu_offload)]` (a comment here: offload builds on stable Rust) and
// its import.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", no_main)]

// std::offload: #![feature(gpu_offload)]
use offload::std_offload::{offload, offload_kernel};

const N: usize = 4096;

#[offload_kernel]
fn axpy(a: f32, x: &[f32; N], y: *mut [f32; N]) {
    // SAFETY: `y` points to the array this launch maps, and a single thread runs.
    unsafe {
        for (yi, xi) in (*y).iter_mut().zip(x.iter()) {
            *yi += a * xi;
        }
    }
}

#[offload_kernel]
fn dot(x: &[f32; N], y: &[f32; N], out: *mut f32) {
    let sum = x
        .iter()
        .zip(y.iter())
        .map(|(a, b)| a * b)
        .fold(0.0, |acc, p| acc + p);
    // SAFETY: `out` points to the one value this launch maps, and a single thread runs.
    unsafe { *out = sum };
}

#[cfg(target_os = "linux")]
fn main() {
    let x = [0.5f32; N];
    let mut y = [1.0f32; N];
    offload! {
        kernel = axpy,
        args = (2.0f32, &x, &mut y as *mut [f32; N]),
    }
    let mut result = 0.0f32;
    offload! {
        kernel = dot,
        args = (&x, &y, &mut result as *mut f32),
    }
    // y is 2.0 everywhere, so the dot product is N * 0.5 * 2.0, exactly.
    assert!(y.iter().all(|&v| v == 2.0), "axpy");
    assert_eq!(result, N as f32, "dot");
    println!("ok: axpy then dot = {result}");
}
