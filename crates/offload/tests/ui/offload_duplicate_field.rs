include!("shared/no_images.rs");

include!("shared/saxpy.rs");

fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![2.0f32; 4];
    let _ = offload::offload! {
        kernel = saxpy,
        thread_dim = [256, 1, 1],
        thread_dim = [128, 1, 1],
        args = (2.0f32, &x, &mut y),
    };
}
