// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

#[offload::kernel]
fn fill<T: offload::DeviceCopy>(v: T, y: &mut [T]) {
    for (_, y) in y.iter_mine() {
        *y = v;
    }
}

fn main() {}
