include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// Data handed to a stream must outlive the scope: a local of the scope's body does not.
fn main() {
    let _ = offload::scope(|s| {
        let stream = s.stream(&offload::Device::host())?;
        let x = vec![1.0f32; 4];
        let mut y = vec![0.0f32; 4];
        saxpy::enqueue(&stream, offload::Launch::auto(), 2.0, &x, &mut y)?;
        Ok(())
    });
}
