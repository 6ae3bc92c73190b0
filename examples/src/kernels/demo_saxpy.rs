//! The demo's saxpy, in a file of its own so that `examples/unreported` can build it alone.
use offload::prelude::*;

/// `y = a * x + y`, reading and writing 16 bytes (four elements) at a time where `x` and `y`
/// are aligned alike.
#[offload::kernel]
pub fn saxpy(a: f32, x: &[f32], #[wide] y: &mut [f32]) {
    y.update_mine_wide(x, |y, x| y + a * x);
}
