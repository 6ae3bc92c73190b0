include!("shared/no_images.rs");

#[offload::kernel(max_registers = 0)]
fn none(y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y = 0.0;
    }
}

#[offload::kernel(max_registers = 256)]
fn too_many(y: &mut [f32]) {
    for (_, y) in y.iter_mine() {
        *y = 0.0;
    }
}

fn main() {}
