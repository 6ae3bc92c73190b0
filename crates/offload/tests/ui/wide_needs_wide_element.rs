include!("shared/no_images.rs");

use offload::prelude::*;

// A struct's 16-byte chunk could hold padding or straddle its fields: wide updates take the
// primitive numbers, f16 and bf16 only.
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Pair {
    re: f32,
    im: f32,
}

#[offload::kernel]
fn add_pairs(x: &[Pair], #[wide] y: &mut [Pair]) {
    y.update_mine_wide(x, |y, x| Pair {
        re: y.re + x.re,
        im: y.im + x.im,
    });
}

fn main() {}
