//! Ownership views: kernels that write per-block tiles, part of an output, or through a
//! permutation, and share data through shared memory, all in safe code (the scatter's launcher is
//! `unsafe`: its caller vouches for the index).
use offload::prelude::*;

/// Each block reverses its `chunk`-element tiles of `x` into `out` through shared memory
/// (`chunk` at most 1024): the tile is the block's own (`#[tile(chunk)]`), and shared atomics make
/// every shared access safe. No `unsafe` anywhere; any launch shape gives the same result.
#[offload::kernel]
pub fn reverse_tiles(chunk: u32, x: &[f32], #[tile(chunk)] out: &mut [f32]) {
    let staged = offload::shared_atomic!([f32; 1024]);
    let (t, threads) = (
        thread_idx().linear_in(block_dim()),
        block_dim().count() as usize,
    );
    for mut tile in out.iter_mine() {
        let (start, len) = (tile.start(), tile.len());
        let mut i = t;
        while i < len {
            staged[i].store(x[start + i]);
            i += threads;
        }
        sync_threads();
        for (i, o) in tile.iter_mine() {
            *o = staged[len - 1 - i].load();
        }
        sync_threads();
    }
}

/// `c[k] = a[k] · b[k]` for a batch of `n × n` row-major matrices stored one after the other:
/// one block per matrix (`#[tile(n * n)]`), its threads sharing the matrix's elements.
#[offload::kernel]
pub fn matmul_per_block(n: u32, a: &[f32], b: &[f32], #[tile(n * n)] c: &mut [f32]) {
    let n = n as usize;
    for mut tile in c.iter_mine() {
        let base = tile.start();
        for (e, out) in tile.iter_mine() {
            let (row, col) = (e / n, e % n);
            let mut acc = 0.0f32;
            for k in 0..n {
                acc += a[base + row * n + k] * b[base + k * n + col];
            }
            *out = acc;
        }
    }
}

/// Writes `value` into `out[start..end]` only: the rest of `out` keeps what the caller passed.
#[offload::kernel]
pub fn fill_range(start: u32, end: u32, value: f32, out: &mut [f32]) {
    for (_, o) in out.slice(start as usize..end as usize).iter_mine() {
        *o = value;
    }
}

/// `out[index[i]] = x[i]`: moves each element to where a permutation sends it.
#[offload::kernel]
pub fn permute(index: &[u32], x: &[f32], #[scatter(index)] out: &mut [f32]) {
    for (i, o) in out.iter_mine() {
        *o = x[i];
    }
}

/// Fails a bounds check in `ThreadSlice::at` at the element one past the end: the panic must name
/// this file and the line of the call below (`at` tracks its caller), not the library's.
#[offload::kernel]
pub fn at_past_the_end(out: &mut [u32]) {
    let n = out.len();
    if global_id() == 0 {
        // SAFETY: thread 0 alone reaches element n; the bounds check fails before any access.
        let past = unsafe { out.at(n) }; // PANICS HERE
        *past = 1;
    }
}

/// Asks for a view one element longer than `out`: `slice` panics, naming the line below.
#[offload::kernel]
pub fn slice_past_the_end(out: &mut [u32]) {
    let n = out.len();
    let mut view = out.slice(..n + 1); // PANICS HERE
    for (_, o) in view.iter_mine() {
        *o = 1;
    }
}

/// [`reverse_tiles`] through a plain `shared!` array (`unsafe` reads): `views_bench` compares the
/// two to tell the cost of the atomics from that of the tiles.
#[offload::kernel]
pub fn reverse_tiles_plain_shared(chunk: u32, x: &[f32], #[tile(chunk)] out: &mut [f32]) {
    let staged = offload::shared!([f32; 1024]);
    let (t, threads) = (
        thread_idx().linear_in(block_dim()),
        block_dim().count() as usize,
    );
    for mut tile in out.iter_mine() {
        let (start, len) = (tile.start(), tile.len());
        let mut i = t;
        while i < len {
            // SAFETY: slot i is this thread's alone (i ≡ t mod threads) until the barrier.
            unsafe { staged.write(i, x[start + i]) };
            i += threads;
        }
        sync_threads();
        for (i, o) in tile.iter_mine() {
            // SAFETY: every slot below len was written before the barrier, none is written
            // until the next one.
            *o = unsafe { staged.read(len - 1 - i) };
        }
        sync_threads();
    }
}
