include!("shared/no_images.rs");

// Arithmetic bounds: which element types to build cannot be guessed, so they must be declared.
#[offload::kernel]
fn scale<T: offload::DeviceCopy + core::ops::Mul<Output = T>>(a: T, y: &mut [T]) {
    for (_, y) in y.iter_mine() {
        *y = a * *y;
    }
}

fn main() {}
