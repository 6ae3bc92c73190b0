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
    let mut y = vec![2.0f32; 4];
    let _ = offload::offload! {
        kernel = saxpy,
        args = [2.0f32, 1.0, 0.0],
    };
}
