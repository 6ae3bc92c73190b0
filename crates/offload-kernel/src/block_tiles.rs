//! Block-tiled ownership of an output: each block owns whole contiguous tiles.
//!
//! A kernel parameter written `#[tile(len)] out: &mut [T]` is cut into tiles of `len` elements
//! (the last one shorter). Tile `k` belongs to block `k % blocks` (blocks take tiles grid-stride,
//! so any grid covers every tile once), and inside a tile element `i` belongs to the block's
//! thread `i % threads_per_block` (block-stride). Cooperative kernels need this: a block that
//! computes one small matrix, one row or one histogram together writes it without `unsafe`.
//!
//! Why it cannot race: the owner of an element is a function of its index, the tile length and
//! the launch shape only, and the tile length is fixed for the whole launch, since the
//! `#[tile(..)]` expression may use only constants and the kernel's scalar parameters (the same
//! values in every thread). The body sees a [`BlockTiles`] in place of the slice, so no other
//! ownership rule (the grid-stride one of a [`ThreadSlice`](crate::ThreadSlice)) can reach the
//! same elements in the same launch.

use crate::index::{block_dim, block_idx, grid_dim, thread_idx};
use crate::ThreadSlice;
use core::marker::PhantomData;

/// A `#[tile(len)] &mut [T]` kernel parameter: tiles of `tile_len()` elements, each owned by one
/// block (see the module docs).
pub struct BlockTiles<'a, T> {
    ptr: *mut T,
    len: usize,
    tile_len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> BlockTiles<'a, T> {
    /// Cut a kernel's output into tiles (the kernel attribute does this for `#[tile(..)]`).
    ///
    /// # Safety
    /// `ptr..ptr+len` is valid for reads and writes for `'a`; every thread of the launch builds
    /// its view of this memory through this constructor only, with the same `tile_len`.
    ///
    /// # Panics
    /// If `tile_len` is 0.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize, tile_len: usize) -> Self {
        assert!(tile_len > 0, "#[tile(..)]: the tile length is 0");
        BlockTiles {
            ptr,
            len,
            tile_len,
            _borrow: PhantomData,
        }
    }

    /// The tiles of a kernel parameter's `ThreadSlice`, which they replace (`#[tile(..)]`).
    ///
    /// # Safety
    /// `slice` is a kernel parameter's whole view, and every thread of the launch converts its
    /// own view of it with the same `tile_len`.
    ///
    /// # Panics
    /// If `tile_len` is 0.
    #[doc(hidden)]
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_thread_slice(mut slice: ThreadSlice<'a, T>, tile_len: usize) -> Self {
        // SAFETY: the slice's memory, valid for 'a; the caller vouches for the rest.
        unsafe { Self::from_raw_parts(slice.as_mut_ptr(), slice.len(), tile_len) }
    }

    /// Elements in the whole slice (all tiles).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the output has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements per tile (the last tile may hold fewer).
    #[inline(always)]
    pub fn tile_len(&self) -> usize {
        self.tile_len
    }

    /// Number of tiles, the last one possibly partial.
    #[inline(always)]
    pub fn tiles(&self) -> usize {
        self.len.div_ceil(self.tile_len)
    }

    /// The tiles this thread's block owns: tile `block`, then every `blocks`-th after it (block
    /// is the block's row-major index in the grid). Every thread of a block gets the same tiles,
    /// in the same order, so a loop over them may hold block barriers.
    #[inline(always)]
    pub fn iter_mine(&mut self) -> BlockTileIter<'_, T> {
        BlockTileIter {
            ptr: self.ptr,
            len: self.len,
            tile_len: self.tile_len,
            next: block_idx().linear_in(grid_dim()),
            stride: grid_dim().count() as usize,
            _borrow: PhantomData,
        }
    }
}

/// The tiles of a [`BlockTiles`] owned by the calling thread's block.
pub struct BlockTileIter<'s, T> {
    ptr: *mut T,
    len: usize,
    tile_len: usize,
    next: usize,
    stride: usize,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<'s, T> Iterator for BlockTileIter<'s, T> {
    type Item = Tile<'s, T>;

    #[inline(always)]
    fn next(&mut self) -> Option<Tile<'s, T>> {
        let k = self.next;
        let start = k.checked_mul(self.tile_len).filter(|&s| s < self.len)?;
        self.next = k + self.stride;
        Some(Tile {
            // SAFETY: start < len.
            ptr: unsafe { self.ptr.add(start) },
            len: self.tile_len.min(self.len - start),
            index: k,
            start,
            _borrow: PhantomData,
        })
    }
}

/// One tile, owned by the calling thread's block: its threads share its elements block-stride.
pub struct Tile<'s, T> {
    ptr: *mut T,
    len: usize,
    index: usize,
    start: usize,
    _borrow: PhantomData<&'s mut [T]>,
}

impl<'s, T> Tile<'s, T> {
    /// The tile's number: it holds elements `index() * tile_len()..` of the slice.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Index in the whole slice of the tile's first element.
    #[inline(always)]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Elements in this tile.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tile has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements of this tile that the calling thread owns, with their index in the tile:
    /// its linear index in the block `t`, then `t + threads_per_block`, … Together the block's
    /// threads cover the tile once, whatever the block's shape.
    #[inline(always)]
    pub fn iter_mine(&mut self) -> TileMineIter<'_, T> {
        let block = block_dim();
        TileMineIter {
            ptr: self.ptr,
            len: self.len,
            next: thread_idx().linear_in(block),
            stride: block.count() as usize,
            _borrow: PhantomData,
        }
    }
}

/// Block-stride iterator over the elements of a [`Tile`] that the calling thread owns.
pub struct TileMineIter<'t, T> {
    ptr: *mut T,
    len: usize,
    next: usize,
    stride: usize,
    _borrow: PhantomData<&'t mut [T]>,
}

impl<'t, T> Iterator for TileMineIter<'t, T> {
    type Item = (usize, &'t mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        if i < self.len {
            self.next = i + self.stride;
            // SAFETY: i < len, within the tile; the tile is this block's alone and element i of
            // it this thread's alone (i ≡ linear thread index mod threads per block); each index
            // is yielded once per iterator.
            Some((i, unsafe { &mut *self.ptr.add(i) }))
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
    use std::vec;
    use std::vec::Vec;

    /// Runs every thread of a `grid` × `block` launch in turn; each writes, into every element it
    /// owns, its (block, thread) pair and the element's tile and index in the tile.
    fn owners(
        len: usize,
        tile_len: usize,
        grid: u32,
        block: Dim3,
    ) -> Vec<(u32, usize, usize, usize)> {
        let mut out = vec![(u32::MAX, 0, 0, 0); len];
        for b in 0..grid {
            for t in 0..block.count() as u32 {
                let ctx = ThreadContext {
                    thread_idx: Dim3::new(
                        t % block.x,
                        t / block.x % block.y,
                        t / (block.x * block.y),
                    ),
                    block_idx: Dim3::new(b, 0, 0),
                    block_dim: block,
                    grid_dim: Dim3::new(grid, 1, 1),
                    warp_size: 32,
                };
                with_thread(ctx, || {
                    // SAFETY: `out` is borrowed mutably for the call; the threads run one by one.
                    let mut tiles =
                        unsafe { BlockTiles::from_raw_parts(out.as_mut_ptr(), len, tile_len) };
                    for mut tile in tiles.iter_mine() {
                        let (k, start) = (tile.index(), tile.start());
                        for (i, e) in tile.iter_mine() {
                            assert_eq!(e.0, u32::MAX, "element {} reached twice", start + i);
                            *e = (b * 1000 + t, k, start, i);
                        }
                    }
                });
            }
        }
        out
    }

    #[test]
    fn each_tile_belongs_to_one_block_and_each_element_to_one_thread() {
        for (len, tile_len, grid, block) in [
            (0, 4, 3, Dim3::new(2, 1, 1)),
            (37, 4, 3, Dim3::new(2, 1, 1)),
            (37, 40, 2, Dim3::new(8, 1, 1)),
            (100, 9, 1, Dim3::new(3, 2, 1)),
            (64, 16, 8, Dim3::new(4, 2, 2)),
        ] {
            let out = owners(len, tile_len, grid, block);
            let threads = block.count() as usize;
            for (e, &(owner, k, start, i)) in out.iter().enumerate() {
                assert_eq!(k, e / tile_len, "tile of element {e}");
                assert_eq!((start, i), (k * tile_len, e % tile_len));
                assert_eq!(
                    owner / 1000,
                    (k % grid as usize) as u32,
                    "block of element {e}"
                );
                assert_eq!(
                    (owner % 1000) as usize,
                    i % threads,
                    "thread of element {e}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "the tile length is 0")]
    fn a_zero_tile_length_panics() {
        let mut x = [0u8; 3];
        // SAFETY: `x` outlives the view.
        let _ = unsafe { BlockTiles::from_raw_parts(x.as_mut_ptr(), 3, 0) };
    }
}
