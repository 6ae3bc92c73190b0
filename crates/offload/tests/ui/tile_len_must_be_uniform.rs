include!("shared/no_images.rs");

// Every thread must cut the output into the same tiles: a tile length from the thread's id would
// let two blocks own overlapping tiles.
#[offload::kernel]
fn per_block(#[tile(offload::global_id() + 1)] out: &mut [f32]) {
    for mut tile in out.iter_mine() {
        for (_, o) in tile.iter_mine() {
            *o = 1.0;
        }
    }
}

fn main() {}
