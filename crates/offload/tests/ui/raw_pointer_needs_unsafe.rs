include!("shared/no_images.rs");

#[offload::kernel]
fn zero(x: *mut [f64; 4]) {
    // SAFETY: not run.
    unsafe { (*x)[0] = 0.0 };
}

fn main() {
    let mut x = [1.0f64; 4];
    // The caller vouches for the pointer: the launcher is unsafe.
    let _ = zero(&mut x as *mut [f64; 4]);
}
