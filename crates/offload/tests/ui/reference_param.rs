// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

#[offload::kernel]
fn scale(a: &f32, y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y *= *a;
    }
}

fn main() {}
