// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

#[offload::kernel]
fn sum(x: &[f32]) -> f32 {
    x[0]
}

fn main() {}
