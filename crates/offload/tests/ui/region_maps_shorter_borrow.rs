include!("shared/no_images.rs");

// The region copies `from` data back when it closes: data dropped inside it cannot be mapped.
fn main() {
    let _ = offload::region(|r| {
        let mut local = vec![0.0f32; 4];
        let _mapped = r.from(&mut local)?;
        Ok(())
    });
}
