include!("shared/no_images.rs");

#[offload::kernel(instances(T = f32 | f64))]
fn axpy<T: Copy + core::ops::Add<Output = T> + core::ops::Mul<Output = T>>(a: T, x: &[T], y: &mut [T]) {
    for (i, y) in y.iter_mine() {
        *y = a * x[i] + *y;
    }
}

fn main() {
    let x = vec![1u32; 4];
    let mut y = vec![2u32; 4];
    // u32 was not declared, so there is no device entry for it.
    let _ = axpy(2, &x, &mut y);
}
