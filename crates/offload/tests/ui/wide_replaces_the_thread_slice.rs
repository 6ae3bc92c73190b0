include!("shared/no_images.rs");

// A `#[wide]` output is updated in 16-byte chunks only: a grid-stride loop over it would give its
// elements other owners in the same launch, so the body has no `iter_mine`.
#[offload::kernel]
fn twice(x: &[f32], #[wide] y: &mut [f32]) {
    y.update_mine_wide(x, |y, x| y + x);
    for (_, y) in y.iter_mine() {
        *y *= 2.0;
    }
}

fn main() {}
