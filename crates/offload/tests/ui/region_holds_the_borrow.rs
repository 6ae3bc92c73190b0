include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// While a region maps `y` tofrom, the device may hold newer values: the host cannot read it.
fn main() {
    let x = vec![1.0f32; 4];
    let mut y = vec![1.0f32; 4];
    let _ = offload::region(|r| {
        let mut yd = r.tofrom(&mut y)?;
        saxpy(2.0, &x, &mut yd)?;
        println!("{}", y[0]);
        Ok(())
    });
}
