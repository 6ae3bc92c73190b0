include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// A mapped handle refers to device memory the region releases: it cannot outlive the region.
fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![1.0f32; 4];
    let mut escaped = None;
    let _ = offload::region(|r| {
        escaped = Some(r.to(&x)?);
        Ok(())
    });
    let _ = saxpy(2.0, escaped.as_ref().unwrap(), &mut y);
}
