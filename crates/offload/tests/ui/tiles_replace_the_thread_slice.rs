include!("shared/no_images.rs");

// A tiled output is reachable only as tiles: no other rule (a grid-stride loop, `at`) can give its
// elements other owners in the same launch.
#[offload::kernel]
fn per_block(n: u32, #[tile(n)] out: &mut [f32]) {
    // SAFETY: not run.
    unsafe { *out.at(0) = 1.0 };
}

fn main() {}
