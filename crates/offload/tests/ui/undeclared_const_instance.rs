include!("shared/no_images.rs");

#[offload::kernel(instances(N = 2 | 4))]
fn sum_rows<const N: usize>(rows: &[[f32; N]], out: &mut [f32]) {
    for (i, o) in out.iter_mine() {
        *o = rows[i].iter().sum();
    }
}

fn main() {
    let rows = vec![[1.0f32; 3]; 8];
    let mut out = vec![0.0f32; 8];
    let _ = offload::offload! { kernel = sum_rows::<3>, args = (&rows, &mut out) };
}
