include!("shared/no_images.rs");

/// # Safety
/// Whatever the kernel's author asks of callers (an `unsafe fn` kernel's contract).
#[offload::kernel]
unsafe fn fill(y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y = 1.0;
    }
}

fn main() {
    let mut y = vec![0.0f32; 4];
    // An `unsafe fn` kernel's launchers are `unsafe`: this call needs an `unsafe` block.
    let _ = fill(&mut y);
}
