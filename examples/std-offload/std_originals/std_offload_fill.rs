// A program for rustc nightly's std::offload: a generic kernel over a fixed-size array behind a
// raw pointer, `fn kernel<T: Copy>(x: *mut [T; 256], v: T)`, launched with `offload!`'s defaults
// (one workgroup of one thread). Syntax after library/core/src/offload.md and the offload
// tests (mir-opt, pretty) of rust-lang/rust.
// std_originals/ holds the program as written for std::offload. It differs from this one in
// two lines: its `#![feature(gpu_offload)]` (a comment here: offload builds on stable Rust) and
// its import.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", no_main)]

#![feature(gpu_offload)]
use core::offload::{offload, offload_kernel};

#[offload_kernel]
fn fill<T: Copy>(x: *mut [T; 256], v: T) {
    // SAFETY: `x` points to the array this launch maps, and a single thread runs.
    unsafe {
        for e in (*x).iter_mut() {
            *e = v;
        }
    }
}

#[cfg(target_os = "linux")]
fn main() {
    let mut a = [0.0f64; 256];
    offload! {
        kernel = fill,
        args = (&mut a as *mut [f64; 256], 2.5),
    }
    let mut b = [0u16; 256];
    offload! {
        kernel = fill,
        args = (&mut b as *mut [u16; 256], 7),
    }
    assert!(a.iter().all(|&v| v == 2.5), "f64 fill");
    assert!(b.iter().all(|&v| v == 7), "u16 fill");
    println!("ok: fill::<f64> and fill::<u16> wrote all 256 elements");
}
