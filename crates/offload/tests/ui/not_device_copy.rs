include!("shared/no_images.rs");

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
