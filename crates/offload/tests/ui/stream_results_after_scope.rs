include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// Results may still be arriving until the scope ends: reading them inside it does not compile.
fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![0.0f32; 4];
    let _ = offload::scope(|s| {
        let stream = s.stream(&offload::Device::host())?;
        saxpy::enqueue(&stream, offload::Launch::auto(), 2.0, &x, &mut y)?;
        let early = y[0];
        Ok(early)
    });
}
