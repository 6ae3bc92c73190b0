include!("shared/no_images.rs");

include!("shared/saxpy.rs");

fn main() {
    let x = vec![1.0f64; 4];
    let mut y = vec![1.0f32; 4];
    let _ = saxpy::launch(offload::Launch::auto(), 2.0, &x, &mut y);
}
