include!("shared/no_images.rs");

include!("shared/saxpy.rs");

fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![1.0f32; 4];
    let _ = saxpy(2.0f64, &x, &mut y);
}
