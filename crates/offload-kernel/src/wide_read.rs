//! The input-only 16-byte walk: each element of this thread's grid-stride share of one or more
//! slices, loaded 16 bytes at a time with four loads in flight — the loop of a reduction, which
//! reads much and writes nothing but its accumulator.

use crate::index::GridStride;
use crate::wide_cut::Cut;
use crate::wide_element::WIDE_BYTES;
use crate::wide_lanes::WideInputs;

/// Chunks per tile at least (16 KiB): a host block's contiguous run of its inputs.
const TILE_CHUNKS: usize = 1024;

/// Call `f` with each index and the elements there of this thread's share of `inputs` (a slice, or a
/// tuple of up to eight slices whose elements all have one size; the tuple's elements for a
/// tuple), 16 bytes per load: together the threads of a launch visit every index below the
/// shortest input's length once, whatever the launch shape. The aligned middle goes in 16-byte
/// chunks, in tiles of `max(4B, 1024)` chunks (`B` threads per block): tile `j` to block
/// `j mod G` (`G` blocks), and in a tile thread `t` takes chunks `t`, `t + B`, …, four at a
/// time. The unaligned ends go element by element, grid-stride; when the inputs sit at
/// different offsets from a 16-byte boundary, everything goes element by element.
///
/// A dot product: `for_each_mine_wide((x, y), |_, (x, y)| *total += x * y)` in a kernel taking
/// `#[reduce(sum)] total: &mut f32`.
#[inline(always)]
pub fn for_each_mine_wide<I: WideInputs>(inputs: I, mut f: impl FnMut(usize, I::Elements)) {
    let size = I::ELEMENT_SIZE;
    let len = inputs.shortest_len();
    let first = inputs.address();
    let alike = inputs.differing_bits(first) % WIDE_BYTES == 0;
    let cut = Cut::of(first, alike, len, size);
    let lanes = WIDE_BYTES / size;
    let at = |c: usize| cut.head + c * lanes;
    // Every `load_chunks` below: chunk c's elements at(c)..at(c) + lanes lie within every input
    // (c < end <= cut.chunks), and at(c) is 16-byte aligned in the first input (the head reaches
    // its first boundary) and so in every input (same offset from a boundary).
    let each = |f: &mut dyn FnMut(usize, I::Elements), c: usize, x: &I::Chunks| {
        for k in 0..lanes {
            f(at(c) + k, I::lane(x, k));
        }
    };
    // The chunks go in tiles of `tile`, tile j to block j mod G, so that on a GPU the blocks
    // sweep the inputs together; block b's thread t takes chunks t, t + B, … of each of its
    // tiles, four loads at a time (on the host, where a block's threads run one after another,
    // each tile is a contiguous run that stays in cache between them).
    let (grid, block) = (crate::grid_dim(), crate::block_dim());
    let threads = block.count() as usize;
    let tile = (4 * threads).max(TILE_CHUNKS);
    let t = crate::thread_idx().linear_in(block);
    let mut base = crate::block_idx().linear_in(grid) * tile;
    let step = grid.count() as usize * tile;
    while base < cut.chunks {
        let end = (base + tile).min(cut.chunks);
        let mut c = base + t;
        // Every load first, then the elements: four 16-byte loads in flight per thread.
        while c + 3 * threads < end {
            // SAFETY: chunks below `end` (see above).
            let x0 = unsafe { inputs.load_chunks(at(c)) };
            // SAFETY: as above.
            let x1 = unsafe { inputs.load_chunks(at(c + threads)) };
            // SAFETY: as above.
            let x2 = unsafe { inputs.load_chunks(at(c + 2 * threads)) };
            // SAFETY: as above.
            let x3 = unsafe { inputs.load_chunks(at(c + 3 * threads)) };
            each(&mut f, c, &x0);
            each(&mut f, c + threads, &x1);
            each(&mut f, c + 2 * threads, &x2);
            each(&mut f, c + 3 * threads, &x3);
            c += 4 * threads;
        }
        while c < end {
            // SAFETY: as above.
            let x = unsafe { inputs.load_chunks(at(c)) };
            each(&mut f, c, &x);
            c += threads;
        }
        base += step;
    }
    // The head and tail, numbered one after the other and shared out grid-stride too.
    let ends = cut.head + cut.tail;
    for j in GridStride::mine(ends, 0) {
        let i = if j < cut.head { j } else { len - ends + j };
        // SAFETY: i < len, within every input.
        f(i, unsafe { inputs.load(i) });
    }
}
