include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// `from` skips the copy in: it is for outputs, so an input given `from` does not compile.
fn main() {
    let mut x = vec![1.0f32; 4];
    let mut y = vec![1.0f32; 4];
    let _ = saxpy(2.0, offload::from(&mut x), &mut y);
}
