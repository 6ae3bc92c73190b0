include!("shared/no_images.rs");

fn scale(a: f32, y: &mut [f32]) {
    for v in y {
        *v *= a;
    }
}

fn main() {
    let mut y = vec![2.0f32; 4];
    let _ = offload::offload! { kernel = scale, args = (2.0f32, &mut y) };
}
