// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

// Writing any element of an output from every thread would race: the safe view does not index.
#[offload::kernel]
fn racy(y: &mut [f32]) {
    y[0] = 1.0;
}

fn main() {}
