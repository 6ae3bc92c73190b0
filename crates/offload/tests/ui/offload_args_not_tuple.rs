include!("shared/no_images.rs");

include!("shared/saxpy.rs");

fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![2.0f32; 4];
    let _ = offload::offload! {
        kernel = saxpy,
        args = [2.0f32, 1.0, 0.0],
    };
}
