//! The block-sized tiles of `0..len` that the calling block walks, counted in 32 bits.
//!
//! A kernel that stages a tile of elements per block in shared memory (one element per thread,
//! a barrier, then reads of the neighbours' slots) walks tile starts `b * threads`,
//! `(b + blocks) * threads`, … below `len`. In `usize` every index derived from the start, its
//! compares with lengths and the loop's induction variables are 64-bit: two instructions each on
//! GPUs, whose integer units are 32-bit. [`tile_starts`] checks once that the walk fits 32 bits
//! and hands out `u32` starts, as CUDA C's `int` indices do (without their overflow).

use crate::{block_dim, block_idx, grid_dim};

/// Iterator over the start of each tile of [`tile_starts`]: made by that function.
#[derive(Clone, Debug)]
pub struct TileStarts {
    next: u32,
    stride: u32,
    len: u32,
}

/// The starts of the tiles of `0..len`, one tile of the block's thread count per block in turn
/// (blocks numbered x fastest), that the calling block walks: `b * threads`, then every
/// `blocks * threads` after it, below `len`.
///
/// Panics when `len + threads per block` does not fit 32 bits, so that for every start `s`
/// yielded, `s + i` for `i` up to the block's thread count is a `u32` without overflow (the
/// launch itself has fewer than 2^32 threads: the runtime refuses larger ones).
#[inline(always)]
#[track_caller]
pub fn tile_starts(len: usize) -> TileStarts {
    let block = block_dim();
    let grid = grid_dim();
    // The launch's thread count is below 2^32, so are these products.
    let threads = block.count() as u32;
    let first = block_idx().linear_in(grid) as u32 * threads;
    let len = u32::try_from(len)
        .ok()
        .filter(|&len| len.checked_add(threads).is_some())
        .expect("tile_starts: len + threads per block must be below 2^32");
    TileStarts {
        next: first,
        stride: grid.count() as u32 * threads,
        len,
    }
}

impl Iterator for TileStarts {
    type Item = u32;

    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        let start = self.next;
        if start < self.len {
            // Saturating: a start past u32::MAX ends the walk (len < u32::MAX).
            self.next = start.saturating_add(self.stride);
            Some(start)
        } else {
            None
        }
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::vec::Vec;

    fn starts(len: usize, block: Dim3, grid: Dim3, b: Dim3) -> Vec<u32> {
        let ctx = ThreadContext {
            thread_idx: Dim3::new(0, 0, 0),
            block_idx: b,
            block_dim: block,
            grid_dim: grid,
            warp_size: 32,
        };
        with_thread(ctx, || tile_starts(len).collect())
    }

    #[test]
    fn every_tile_start_below_len_belongs_to_one_block() {
        for (len, block, grid) in [
            (0, Dim3::new(4, 1, 1), Dim3::new(3, 1, 1)),
            (37, Dim3::new(4, 1, 1), Dim3::new(3, 1, 1)),
            (37, Dim3::new(2, 2, 1), Dim3::new(2, 2, 1)),
            (100, Dim3::new(8, 1, 1), Dim3::new(1, 1, 1)),
            (5, Dim3::new(8, 1, 1), Dim3::new(4, 1, 1)),
        ] {
            let threads = block.count() as u32;
            let mut seen = Vec::new();
            for b in 0..grid.count() {
                let b = Dim3::from_linear(b, grid);
                for s in starts(len, block, grid, b) {
                    assert_eq!(s % threads, 0, "start {s} on a tile boundary");
                    assert_eq!(s / threads % grid.count() as u32, b.linear_in(grid) as u32);
                    seen.push(s);
                }
            }
            seen.sort();
            let all: Vec<u32> = (0..len as u32).step_by(threads as usize).collect();
            assert_eq!(seen, all, "len {len}, block {block}, grid {grid}");
        }
    }

    #[test]
    fn the_walk_ends_where_the_next_start_would_pass_u32_max() {
        // Strides of 2^30: block 3's fifth start would be 3 * 1024 + 2^32.
        let (block, grid) = (Dim3::new(1024, 1, 1), Dim3::new(1 << 20, 1, 1));
        let len = (u32::MAX - 1024) as usize;
        let got = starts(len, block, grid, Dim3::new(3, 0, 0));
        let want: Vec<u32> = (0..4).map(|k| 3 * 1024 + (k << 30)).collect();
        assert_eq!(got, want);
    }

    #[test]
    #[should_panic(expected = "len + threads per block must be below 2^32")]
    fn a_walk_beyond_32_bits_panics() {
        starts(
            (u32::MAX - 3) as usize,
            Dim3::new(4, 1, 1),
            Dim3::new(1, 1, 1),
            Dim3::new(0, 0, 0),
        );
    }
}
