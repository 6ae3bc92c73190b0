include!("shared/no_images.rs");

#[offload::kernel]
fn scale(a: &f32, y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y *= *a;
    }
}

fn main() {}
