//! How a 16-byte walk cuts an output into unaligned ends and aligned chunks, and what it names
//! to the host backend's output saving before writing them.

use crate::index::GridStride;
use crate::output_saving::before_writing_mapped;
use crate::wide_element::WIDE_BYTES;
use core::mem::size_of;

/// How one launch cuts `len` elements: `head` unaligned elements, then `chunks` 16-byte
/// chunks, then `tail` elements. Depends on the addresses and the length only, so every thread of
/// the launch computes the same cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct Cut {
    pub(crate) head: usize,
    pub(crate) chunks: usize,
    pub(crate) tail: usize,
}

impl Cut {
    /// The cut of `len` elements of `size` bytes (each aligned to its size) at address `out`,
    /// walked together with other slices: chunks only if every one of them sits at the same
    /// offset from a 16-byte boundary (`alike`), else everything is `head`.
    #[inline(always)]
    pub(crate) fn of(out: usize, alike: bool, len: usize, size: usize) -> Cut {
        if !alike {
            return Cut {
                head: len,
                chunks: 0,
                tail: 0,
            };
        }
        let head = ((WIDE_BYTES - out % WIDE_BYTES) % WIDE_BYTES / size).min(len);
        let lanes = WIDE_BYTES / size;
        let chunks = (len - head) / lanes;
        Cut {
            head,
            chunks,
            tail: len - head - chunks * lanes,
        }
    }
}

/// Names to the host backend's output saving the elements of the output at `out` that this
/// thread's `chunks` and `ends` (the head and tail numbered one after the other) of `cut` hold.
#[inline(always)]
pub(crate) fn save_cut<T>(out: *mut T, chunks: &GridStride, ends: &GridStride, cut: Cut) {
    let lanes = WIDE_BYTES / size_of::<T>();
    let (head, tail_start) = (cut.head, cut.head + cut.chunks * lanes);
    before_writing_mapped(out, chunks, |a, b, save| {
        save(head + a * lanes, head + b * lanes)
    });
    // End number j is element j in the head, element `tail_start + j - head` in the tail.
    before_writing_mapped(out, ends, |a, b, save| {
        if a < head {
            save(a, b.min(head));
        }
        if b > head {
            save(tail_start + a.max(head) - head, tail_start + b - head);
        }
    });
}
