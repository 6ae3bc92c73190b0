//! Element-wise updates that move 16 bytes per memory access.
//!
//! A slice parameter carries no alignment, so a plain loop over it loads and stores one element
//! at a time (4 bytes for `f32`, 2 for `f16`), well below what the memory system delivers.
//! [`WideSlice::update_mine_wide`] splits the output into its 16-byte-aligned chunks and the
//! unaligned elements at either end, and reads each chunk of the input with one 16-byte load
//! when the input is aligned like the output (otherwise the whole launch goes element by
//! element). Chunks and end elements are both handed out grid-stride, so, as with
//! [`ThreadSlice::iter_mine`], every element is updated exactly once whatever the launch shape,
//! and since each element goes through the same function either way the results do not depend on
//! the shape, on the alignment, or on the backend.
//!
//! Chunks give threads other elements than `iter_mine` does, so one parameter must not be
//! updated both ways in a launch. The `#[wide]` kernel-parameter attribute makes that a type rule:
//! the body sees the output as a [`WideSlice`], which has no other way in.

use crate::index::{ids_run, GridStride};
use crate::output_saving::before_writing_mapped;
use crate::thread_slice::ThreadSlice;
use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use half::{bf16, f16};

/// Bytes of one wide access.
pub const WIDE_BYTES: usize = 16;

/// `N` elements at a 16-byte boundary: read or written as a whole, one 16-byte access.
#[doc(hidden)]
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct Chunk16<T, const N: usize>([T; N]);

mod sealed {
    pub trait Sealed {}
}

/// Element types that [`WideSlice::update_mine_wide`] moves 16 bytes at a time: the
/// primitive integers and floats up to 8 bytes, `f16` and `bf16`. (Sealed: the library relies on
/// each type's chunk being exactly `16 / size_of::<Self>()` elements without padding.)
pub trait WideElement: Copy + sealed::Sealed {
    /// `16 / size_of::<Self>()` elements as one 16-byte-aligned value.
    #[doc(hidden)]
    type Chunk: Copy + AsRef<[Self]> + AsMut<[Self]>;
}

impl<T, const N: usize> AsRef<[T]> for Chunk16<T, N> {
    #[inline(always)]
    fn as_ref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const N: usize> AsMut<[T]> for Chunk16<T, N> {
    #[inline(always)]
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

macro_rules! wide_element {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl WideElement for $t {
            type Chunk = Chunk16<$t, { WIDE_BYTES / size_of::<$t>() }>;
        }
        // The chunk is 16 bytes of elements with nothing else, and every element is aligned to
        // its size (so an element-aligned address plus whole elements reaches each boundary).
        const _: () = assert!(
            size_of::<<$t as WideElement>::Chunk>() == WIDE_BYTES
                && align_of::<<$t as WideElement>::Chunk>() == WIDE_BYTES
                && align_of::<$t>() == size_of::<$t>()
        );
    )*};
}
wide_element!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, f16, bf16);

/// How one launch cuts `len` elements: `head` unaligned elements, then `chunks` 16-byte
/// chunks, then `tail` elements. Depends on the addresses and the length only, so every thread of
/// the launch computes the same cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cut {
    head: usize,
    chunks: usize,
    tail: usize,
}

impl Cut {
    /// The cut of an output at `out` read together with an input at `input` (both of `len`
    /// elements of `size` bytes, each aligned to its size): chunks only where both sit at the same
    /// offset from a 16-byte boundary, else everything is `head`.
    #[inline(always)]
    fn of(out: usize, input: usize, len: usize, size: usize) -> Cut {
        if out % WIDE_BYTES != input % WIDE_BYTES {
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

/// A kernel's `#[wide] out: &mut [T]` parameter as the body sees it: an output updated 16 bytes
/// per access by [`update_mine_wide`](Self::update_mine_wide), whose ownership of chunks is the
/// only one the launch uses for this parameter (so no thread writes an element that another
/// thread reaches by a different rule).
pub struct WideSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> WideSlice<'a, T> {
    /// Wrap the output memory of one launch.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes for `'a`, and every thread of the
    /// launch must reach this memory through a `WideSlice` of the same range only (the `#[wide]`
    /// attribute does this).
    #[inline(always)]
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        WideSlice {
            ptr,
            len,
            _borrow: PhantomData,
        }
    }

    /// The kernel parameter `slice`, consumed before the body runs.
    ///
    /// # Safety
    /// `slice` must be a whole kernel parameter that no thread has used: the body must reach its
    /// memory through this `WideSlice` only.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn from_thread_slice(slice: ThreadSlice<'a, T>) -> Self {
        // SAFETY: the slice's memory, valid for 'a; the caller vouches for the rest.
        unsafe { Self::from_raw_parts(slice.raw_ptr(), slice.len()) }
    }

    /// Length of the whole slice (all threads' elements).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<'a, T: WideElement> WideSlice<'a, T> {
    /// `self[i] = f(self[i], input[i])` for every element `i` this thread owns, reading and
    /// writing 16 bytes at a time: the 16-byte-aligned chunks of the output, and the unaligned
    /// elements before and after them, are each shared out grid-stride among the threads, so
    /// the launch updates every element exactly once, whatever its shape. When `input` is not
    /// aligned like the output (their addresses differ modulo 16) the launch updates element by
    /// element instead; the results are the same either way.
    ///
    /// `input` may be longer than the output (its extra elements are not read).
    ///
    /// # Panics
    /// If `input` is shorter than the output: the threads that own output elements past its end
    /// panic with an index out of bounds, as the plain loop over [`ThreadSlice::iter_mine`]
    /// would, at the caller's location.
    #[inline(always)]
    #[track_caller]
    pub fn update_mine_wide<U: WideElement>(&mut self, input: &[U], f: impl Fn(T, U) -> T) {
        const {
            assert!(
                size_of::<T>() == size_of::<U>(),
                "update_mine_wide: input and output elements must have the same size"
            )
        };
        let len = self.len();
        let paired = len.min(input.len());
        let out = self.ptr;
        let cut = Cut::of(
            out as usize,
            input.as_ptr() as usize,
            paired,
            size_of::<T>(),
        );
        let lanes = WIDE_BYTES / size_of::<T>();
        let (chunks, ends) = (GridStride::mine(cut.chunks, 0), cut.head + cut.tail);
        let end_indices = GridStride::mine(ends, 0);
        before_writing_mapped(out, &chunks, |a, b, save| {
            save(cut.head + a * lanes, cut.head + b * lanes)
        });
        // End number j is element j in the head, element `paired - ends + j` in the tail.
        before_writing_mapped(out, &end_indices, |a, b, save| {
            if a < cut.head {
                save(a, b.min(cut.head));
            }
            if b > cut.head {
                save(paired - ends + a.max(cut.head), paired - ends + b);
            }
        });
        for c in chunks {
            let at = cut.head + c * lanes;
            // SAFETY: elements at..at+lanes lie within both slices (at + lanes <= head + chunks *
            // lanes <= paired); `at` is 16-byte aligned in the output (head reaches the first
            // boundary) and so in the input (same offset from a boundary), so each chunk pointer
            // is aligned for its 16-aligned, 16-byte Chunk type of `lanes` elements. Chunk c is
            // this thread's alone (c ≡ global_id mod global_threads) and the ends below hold no
            // chunk element, so no other thread touches these elements.
            unsafe {
                let y = out.add(at) as *mut T::Chunk;
                let x = input.as_ptr().add(at) as *const U::Chunk;
                let (mut ys, xs) = (y.read(), x.read());
                for (y, x) in ys.as_mut().iter_mut().zip(xs.as_ref()) {
                    *y = f(*y, *x);
                }
                y.write(ys);
            }
        }
        // The head and tail, numbered one after the other and shared out grid-stride too: a
        // launch of fewer threads than end elements must still reach all of them.
        for j in end_indices {
            let i = if j < cut.head { j } else { paired - ends + j };
            // SAFETY: i < paired, within both slices; end element j (hence i) is this thread's
            // alone and no chunk contains it.
            unsafe {
                let y = out.add(i);
                y.write(f(y.read(), *input.get_unchecked(i)));
            }
        }
        // Output elements past the end of a shorter input: the threads that own them in
        // `iter_mine`'s order (i ≡ global_id mod global_threads) panic, as its loop would: the
        // first of this call's threads that owns one.
        if len > paired {
            let (first, end, stride) = ids_run();
            // Counted from `end - first`, which folds to 1 on GPUs (`end` is `first + 1`).
            for id in (0..end - first).map(|k| first + k) {
                let past = if id >= paired {
                    id
                } else {
                    id + (paired - id).div_ceil(stride) * stride
                };
                if past < len {
                    panic!(
                        "index out of bounds: the len is {} but the index is {}",
                        paired, past
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::Dim3;
    use std::vec::Vec;

    /// Runs `update_mine_wide` as each thread of a one-block launch of `threads` threads in turn
    /// (also under Miri, which checks the chunk pointers' alignment and bounds).
    fn launch(threads: u32, x: &[u16], y: &mut [u16]) {
        for t in 0..threads {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(threads, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
                warp_size: 32,
            };
            with_thread(ctx, || {
                // SAFETY: y is borrowed mutably for the call, and the threads run one by one.
                let mut out = unsafe { WideSlice::from_raw_parts(y.as_mut_ptr(), y.len()) };
                out.update_mine_wide(x, |y, x| y.wrapping_add(x));
            });
        }
    }

    #[test]
    fn updates_every_element_once_for_any_offsets_and_thread_count() {
        let x: Vec<u16> = (1..=48).collect();
        for threads in [1, 3, 8] {
            for out_at in 0..8 {
                for in_at in [0, 3, out_at] {
                    let len = 37;
                    let mut y = std::vec![1000u16; 48];
                    launch(
                        threads,
                        &x[in_at..in_at + len + 2],
                        &mut y[out_at..out_at + len],
                    );
                    for (i, &v) in y.iter().enumerate() {
                        let want = if (out_at..out_at + len).contains(&i) {
                            1000 + x[in_at + i - out_at]
                        } else {
                            1000
                        };
                        assert_eq!(v, want, "{threads} threads, +{out_at}, +{in_at}: {i}");
                    }
                }
            }
        }
    }

    #[test]
    // Thread 0 of 2 owns elements 0, 2, 4 in `iter_mine`'s order: it panics first, at 4.
    #[should_panic(expected = "index out of bounds: the len is 3 but the index is 4")]
    fn a_shorter_input_panics_where_the_plain_loop_would() {
        launch(2, &[1, 2, 3], &mut [0; 5]);
    }

    #[test]
    fn cut_covers_every_element_once() {
        for out in (0..64).step_by(4) {
            for input in (0..64).step_by(4) {
                for len in 0..40 {
                    let cut = Cut::of(out, input, len, 4);
                    assert_eq!(cut.head + cut.chunks * 4 + cut.tail, len);
                    if out % 16 == input % 16 {
                        assert!(cut.tail < 4);
                        if cut.chunks > 0 {
                            assert_eq!((out + cut.head * 4) % 16, 0);
                        }
                    } else {
                        assert_eq!(cut.chunks, 0);
                    }
                }
            }
        }
        assert_eq!(
            Cut::of(4, 20, 10, 4),
            Cut {
                head: 3,
                chunks: 1,
                tail: 3
            }
        );
        assert_eq!(
            Cut::of(32, 0, 17, 2),
            Cut {
                head: 0,
                chunks: 2,
                tail: 1
            }
        );
    }
}
