// The images `offload::embed_images!()` would embed; none in these tests.
static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("ui test") };

#[derive(Clone, Copy)]
#[repr(C)]
struct Params {
    scale: f32,
}

#[offload::kernel]
fn scale(p: Params, y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y *= p.scale;
    }
}

fn main() {}
