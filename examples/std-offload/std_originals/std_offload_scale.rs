// A program for rustc nightly's std::offload: a kernel taking a mutable array through a raw
// pointer (copied to the device and back), a scalar (by value) and a shared reference (copied to
// the device), launched with every field of `offload!`. Syntax after
// library/core/src/offload.md and the offload! macro's documentation in rust-lang/rust.
// std_originals/ holds the program as written for std::offload. It differs from this one in
// two lines: its `#![feature(gpu_offload)]` (a comment here: offload builds on stable Rust) and
// its import.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", no_main)]

#![feature(gpu_offload)]
use core::offload::{offload, offload_kernel};

/// Ordinary Rust called from the kernel.
fn affine(v: f64, factor: f64, shift: f64) -> f64 {
    v * factor + shift
}

#[offload_kernel]
fn scale(x: *mut [f64; 1024], factor: f64, shift: &f64) {
    // SAFETY: `x` points to the array this launch maps, and a single thread runs.
    unsafe {
        for v in (*x).iter_mut() {
            *v = affine(*v, factor, *shift);
        }
    }
}

#[cfg(target_os = "linux")]
fn main() {
    let mut x = [0.0f64; 1024];
    for (i, v) in x.iter_mut().enumerate() {
        *v = i as f64;
    }
    let shift = 0.25;
    offload! {
        kernel = scale,
        workgroup_dim = [1, 1, 1],
        thread_dim = [1, 1, 1],
        dyn_cache = 0,
        device = 0,
        args = (&mut x as *mut [f64; 1024], 0.5, &shift),
    }
    for (i, v) in x.iter().enumerate() {
        assert_eq!(*v, i as f64 * 0.5 + 0.25, "x[{i}]");
    }
    println!(
        "ok: scale mapped x to the device and back, x[1023] = {}",
        x[1023]
    );
}
