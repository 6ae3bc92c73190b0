// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

#[offload::kernel]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        *y += a * x[i];
    }
}

fn main() {
    let x = vec![1.0f32; 4];
    let y = vec![1.0f32; 4];
    let _ = saxpy(2.0, &x, &y);
}
