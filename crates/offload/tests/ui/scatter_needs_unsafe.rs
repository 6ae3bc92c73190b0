include!("shared/no_images.rs");

#[offload::kernel]
fn permute(index: &[u32], x: &[f32], #[scatter(index)] out: &mut [f32]) {
    for (i, o) in out.iter_mine() {
        *o = x[i];
    }
}

fn main() {
    let (index, x, mut out) = (vec![1u32, 0], vec![1.0f32, 2.0], vec![0.0f32; 2]);
    // The caller vouches that `index` holds no value twice: the launcher is unsafe.
    let _ = permute(&index, &x, &mut out);
}
