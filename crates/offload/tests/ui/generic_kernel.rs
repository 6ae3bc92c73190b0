include!("shared/no_images.rs");

#[offload::kernel]
fn fill<T: offload::DeviceCopy>(v: T, y: &mut [T]) {
    for (_, y) in y.iter_mine() {
        *y = v;
    }
}

fn main() {}
