#[offload::kernel]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        *y += a * x[i];
    }
}
