include!("shared/no_images.rs");

include!("shared/saxpy.rs");

fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![2.0f32; 4];
    // Bytes of dynamic shared memory are a u32, as in Launch::dynamic_shared.
    let _ = offload::offload! {
        kernel = saxpy,
        dyn_cache = 1024usize,
        args = (2.0f32, &x, &mut y),
    };
}
