//! Element-wise updates that move 16 bytes per memory access.
//!
//! A slice parameter carries no alignment, so a plain loop over it loads and stores one element
//! at a time (4 bytes for `f32`, 2 for `f16`), well below what the memory system delivers.
//! [`WideSlice::update_mine_wide`] and [`WideSlice::map_mine_wide`] (one output, read or not),
//! [`WideSlice::map_mine_wide_with`] (two outputs) and [`WideOutputs`]' methods of the same names
//! (a tuple of outputs) split the outputs into their 16-byte-aligned chunks and the unaligned
//! elements at either end, and read each chunk of every input (a slice or a tuple of them,
//! [`WideInputs`]) with one 16-byte load when all are aligned like the first output (otherwise
//! the whole launch goes element by element). Chunks and end elements are both handed out
//! grid-stride, so, as with [`ThreadSlice::iter_mine`], every element is written exactly once
//! whatever the launch shape, and since each element goes through the same function either way
//! the results do not depend on the shape, on the alignment, or on the backend. Index `i` of
//! every output goes to the thread that owns index `i` of the first, below the shortest
//! output's length. What the walks read and write lane by lane is in `wide_lanes`.
//!
//! Chunks give threads other elements than `iter_mine` does, so one parameter must not be
//! written both ways in a launch. The `#[wide]` kernel-parameter attribute makes that a type rule:
//! the body sees the output as a [`WideSlice`], which has no other way in.

use crate::index::GridStride;
use crate::thread_slice::ThreadSlice;
use crate::wide_cut::{save_cut, Cut};
use crate::wide_element::WideElement;
use crate::wide_lanes::{walk_mine, OldValues, WideInputs, WideOutputs};
use core::marker::PhantomData;
use core::mem::size_of;

/// A kernel's `#[wide] out: &mut [T]` parameter as the body sees it: an output written 16 bytes per
/// access by [`update_mine_wide`](Self::update_mine_wide), [`map_mine_wide`](Self::map_mine_wide)
/// or [`map_mine_wide_with`](Self::map_mine_wide_with), whose ownership of chunks is the only one
/// the launch uses for this parameter (so no thread writes an element that another thread reaches
/// by a different rule).
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

    /// The first element's address.
    #[inline(always)]
    pub(crate) fn raw_ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<'a, T: WideElement> WideSlice<'a, T> {
    /// `self[i] = f(self[i], inputs[i])` for every element `i` this thread owns, reading and
    /// writing 16 bytes at a time: the 16-byte-aligned chunks of the output, and the unaligned
    /// elements before and after them, are each shared out grid-stride among the threads, so
    /// the launch updates every element exactly once, whatever its shape. `inputs` is a slice,
    /// whose element `f` receives, or a tuple of slices, whose tuple of elements it receives
    /// ([`WideInputs`]): `y.update_mine_wide((b, c), |y, (b, c)| y + b + s * c)`. When an input
    /// is not aligned like the output (their addresses differ modulo 16) the launch updates
    /// element by element instead; the results are the same either way.
    ///
    /// Inputs may be longer than the output (their extra elements are not read).
    ///
    /// # Panics
    /// If an input is shorter than the output: the threads that own output elements past its end
    /// panic with an index out of bounds, as the plain loop over [`ThreadSlice::iter_mine`]
    /// would, at the caller's location. At compile time, if the inputs' elements and the
    /// output's differ in size.
    #[inline(always)]
    #[track_caller]
    pub fn update_mine_wide<I: WideInputs>(&mut self, inputs: I, f: impl Fn(T, I::Elements) -> T) {
        let old = OldValues {
            ptr: self.ptr,
            len: self.len,
        };
        walk_mine(self, (old, inputs), |(y, x)| f(y, x));
    }

    /// `self[i] = f(inputs[i])` for every element `i` this thread owns, 16 bytes at a time as in
    /// [`update_mine_wide`](Self::update_mine_wide) (the output is written, not read). `inputs`
    /// is a slice, whose element `f` receives, or a tuple of slices, whose tuple of elements it
    /// receives: `y.map_mine_wide((a, b), |(a, b)| a * b)`. Each input's chunk is one 16-byte
    /// load; chunks are used only when every input is aligned like the output, else the launch
    /// goes element by element, with the same results.
    ///
    /// # Panics
    /// If an input is shorter than the output, as [`update_mine_wide`](Self::update_mine_wide).
    /// At compile time, if the inputs' elements and the output's differ in size.
    ///
    /// Several outputs: a tuple of them, [`WideOutputs::map_mine_wide`].
    #[inline(always)]
    #[track_caller]
    pub fn map_mine_wide<I: WideInputs>(&mut self, inputs: I, f: impl Fn(I::Elements) -> T) {
        walk_mine(self, inputs, f);
    }

    /// `(self[i], other[i]) = f(inputs[i])` for every index `i` this thread owns below the
    /// shorter output's length: [`map_mine_wide`](Self::map_mine_wide) with two outputs, each
    /// chunk of each written with one 16-byte store. Chunks are used only when both outputs and
    /// every input are aligned alike. The same as `(self, other).map_mine_wide(inputs, f)`
    /// ([`WideOutputs::map_mine_wide`], for any number of outputs).
    ///
    /// # Panics
    /// As [`map_mine_wide`](Self::map_mine_wide), against the shorter output's length.
    #[inline(always)]
    #[track_caller]
    pub fn map_mine_wide_with<U: WideElement, I: WideInputs>(
        &mut self,
        other: &mut WideSlice<'_, U>,
        inputs: I,
        f: impl Fn(I::Elements) -> (T, U),
    ) {
        walk_mine((self, other), inputs, f);
    }
}

impl<T: WideElement> crate::wide_lanes::OutputsSealed for &mut WideSlice<'_, T> {}

/// One output of a wide walk: this slice's chunks and elements.
impl<T: WideElement> WideOutputs for &mut WideSlice<'_, T> {
    type Values = T;
    const ELEMENT_SIZE: usize = size_of::<T>();
    type Chunks = T::Chunk;
    type Old = OldValues<T>;

    #[inline(always)]
    fn shortest_len(&self) -> usize {
        WideSlice::len(self)
    }

    #[inline(always)]
    fn address(&self) -> usize {
        self.raw_ptr() as usize
    }

    #[inline(always)]
    fn differing_bits(&self, address: usize) -> usize {
        self.address() ^ address
    }

    #[inline(always)]
    fn before_writing(&self, chunks: &GridStride, ends: &GridStride, cut: Cut) {
        save_cut(self.raw_ptr(), chunks, ends, cut);
    }

    #[inline(always)]
    fn new_chunks() -> T::Chunk {
        // SAFETY: every `WideElement` (integers, floats, f16, bf16) is valid as all zero bits.
        unsafe { core::mem::zeroed() }
    }

    #[inline(always)]
    fn set_lane(chunks: &mut T::Chunk, k: usize, value: T) {
        chunks.as_mut()[k] = value;
    }

    #[inline(always)]
    unsafe fn store_chunks(&mut self, at: usize, chunks: T::Chunk) {
        // SAFETY: per the contract.
        unsafe { (self.raw_ptr().add(at) as *mut T::Chunk).write(chunks) }
    }

    #[inline(always)]
    unsafe fn store(&mut self, i: usize, value: T) {
        // SAFETY: per the contract.
        unsafe { self.raw_ptr().add(i).write(value) }
    }

    #[inline(always)]
    fn old_values(&self) -> OldValues<T> {
        OldValues {
            ptr: self.raw_ptr(),
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::host_context::{with_thread, ThreadContext};
    use crate::test_cases::{lengths, THREADS};
    use crate::Dim3;
    use std::format;
    use std::vec::Vec;

    /// Runs `body` as each thread of a one-block launch of `threads` threads in turn (also
    /// under Miri, which checks the chunk pointers' alignment and bounds).
    fn as_threads(threads: u32, mut body: impl FnMut()) {
        for t in 0..threads {
            let ctx = ThreadContext {
                thread_idx: Dim3::new(t, 0, 0),
                block_idx: Dim3::new(0, 0, 0),
                block_dim: Dim3::new(threads, 1, 1),
                grid_dim: Dim3::new(1, 1, 1),
                warp_size: 32,
            };
            with_thread(ctx, &mut body);
        }
    }

    /// `update_mine_wide` as every thread of the launch.
    fn launch(threads: u32, x: &[u16], y: &mut [u16]) {
        as_threads(threads, || {
            // SAFETY: y is borrowed mutably for the call, and the threads run one by one.
            let mut out = unsafe { WideSlice::from_raw_parts(y.as_mut_ptr(), y.len()) };
            out.update_mine_wide(x, |y, x| y.wrapping_add(x));
        });
    }

    /// 16-byte-aligned storage, so that the tests choose each slice's offset from a boundary.
    #[repr(C, align(16))]
    struct Aligned<T>([T; 24]);

    /// `map_mine_wide_with` as every thread of the launch: `e[i] = a[i] + b[i]` and
    /// `p[i] = (b[i] * c[i]) as f32`, with the inputs as a nested tuple.
    fn launch_two(threads: u32, (a, b, c): (&[u32], &[u32], &[u32]), e: &mut [u32], p: &mut [f32]) {
        as_threads(threads, || {
            // SAFETY: e and p are borrowed mutably for the call, and the threads run one by one.
            let (mut e, mut p) = unsafe {
                (
                    WideSlice::from_raw_parts(e.as_mut_ptr(), e.len()),
                    WideSlice::from_raw_parts(p.as_mut_ptr(), p.len()),
                )
            };
            e.map_mine_wide_with(&mut p, (a, (b, c)), |(a, (b, c))| (a + b, (b * c) as f32));
        });
    }

    #[test]
    fn updates_every_element_once_for_any_offsets_and_thread_count() {
        let x: Vec<u16> = (1..=48).collect();
        for &threads in THREADS {
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
    fn two_outputs_get_every_element_once_for_any_lengths_offsets_and_thread_count() {
        let a = Aligned(core::array::from_fn(|i| 1 + i as u32));
        let b = Aligned(core::array::from_fn(|i| 100 + i as u32));
        let c = Aligned(core::array::from_fn(|i| 1000 + i as u32));
        // Lengths 0..=9 with 4 lanes: no chunk, one, two, with and without a head and a tail;
        // offsets 0..4: every phase; the second output or an input one element off the first
        // output's phase: element by element.
        for &threads in THREADS {
            for len in lengths() {
                for e_at in 0..4 {
                    for (p_at, in_at, b_at) in [
                        (e_at, e_at, e_at),
                        (e_at + 4, e_at + 8, e_at),
                        (e_at + 1, e_at, e_at),
                        (e_at, e_at + 1, e_at),
                        (e_at, e_at, e_at + 3),
                    ] {
                        let (mut e, mut p) = (Aligned([u32::MAX; 24]), Aligned([-1.0f32; 24]));
                        launch_two(
                            threads,
                            (
                                &a.0[in_at..in_at + len],
                                &b.0[b_at..b_at + len + 1],
                                &c.0[in_at..],
                            ),
                            &mut e.0[e_at..e_at + len],
                            &mut p.0[p_at..p_at + len],
                        );
                        let at = format!(
                            "{threads} threads, len {len}, +{e_at} +{p_at} +{in_at} +{b_at}"
                        );
                        for j in 0..24usize {
                            let want_e = match j.checked_sub(e_at) {
                                Some(i) if i < len => a.0[in_at + i] + b.0[b_at + i],
                                _ => u32::MAX,
                            };
                            let want_p = match j.checked_sub(p_at) {
                                Some(i) if i < len => (b.0[b_at + i] * c.0[in_at + i]) as f32,
                                _ => -1.0,
                            };
                            assert_eq!((e.0[j], p.0[j]), (want_e, want_p), "{at}: {j}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn two_outputs_stop_at_the_shorter_one() {
        let x = Aligned(core::array::from_fn(|i| i as u32));
        let (mut e, mut p) = (Aligned([0u32; 24]), Aligned([0u32; 24]));
        as_threads(3, || {
            // SAFETY: e and p are borrowed mutably for the call, and the threads run one by one.
            let (mut e, mut p) = unsafe {
                (
                    WideSlice::from_raw_parts(e.0.as_mut_ptr(), 9),
                    WideSlice::from_raw_parts(p.0.as_mut_ptr(), 14),
                )
            };
            e.map_mine_wide_with(&mut p, &x.0[..], |x| (x + 1, x + 2));
        });
        let want = |k: u32, n: usize| -> Vec<u32> {
            (0..24)
                .map(|i| if i < n { i as u32 + k } else { 0 })
                .collect()
        };
        assert_eq!((e.0.to_vec(), p.0.to_vec()), (want(1, 9), want(2, 9)));
    }

    #[test]
    // Thread 0 of 2 owns elements 0, 2, 4 in `iter_mine`'s order: it panics first, at 4, the
    // shorter input's length deciding.
    #[should_panic(expected = "index out of bounds: the len is 3 but the index is 4")]
    fn a_shorter_input_of_two_outputs_panics_where_the_plain_loop_would() {
        let (mut e, mut p) = ([0u32; 5], [0u32; 5]);
        as_threads(2, || {
            // SAFETY: e and p are borrowed mutably for the call, and the threads run one by one.
            let (mut e, mut p) = unsafe {
                (
                    WideSlice::from_raw_parts(e.as_mut_ptr(), 5),
                    WideSlice::from_raw_parts(p.as_mut_ptr(), 5),
                )
            };
            e.map_mine_wide_with(&mut p, (&[1u32; 5][..], &[2u32; 3][..]), |(x, y)| (x, y));
        });
    }

    #[test]
    fn one_output_from_one_input_equals_the_plain_loop() {
        let x = Aligned(core::array::from_fn(|i| i as u16 * 3));
        for (out_at, len) in [(0, 24), (1, 23), (5, 9), (2, 0)] {
            let mut y = Aligned([7u16; 24]);
            as_threads(3, || {
                // SAFETY: y is borrowed mutably for the call, and the threads run one by one.
                let mut out =
                    unsafe { WideSlice::from_raw_parts(y.0.as_mut_ptr().add(out_at), len) };
                out.map_mine_wide(&x.0[out_at..], |x| x ^ 0x55);
            });
            for (i, &v) in y.0.iter().enumerate() {
                let want = if (out_at..out_at + len).contains(&i) {
                    x.0[i] ^ 0x55
                } else {
                    7
                };
                assert_eq!(v, want, "+{out_at}, len {len}: {i}");
            }
        }
    }

    #[test]
    fn cut_covers_every_element_once() {
        for out in (0..64).step_by(4) {
            for input in (0..64).step_by(4) {
                for len in 0..40 {
                    let cut = Cut::of(out, out % 16 == input % 16, len, 4);
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
            Cut::of(4, true, 10, 4),
            Cut {
                head: 3,
                chunks: 1,
                tail: 3
            }
        );
        assert_eq!(
            Cut::of(32, true, 17, 2),
            Cut {
                head: 0,
                chunks: 2,
                tail: 1
            }
        );
    }

    #[test]
    fn updates_with_three_inputs_equal_the_plain_loop_for_any_lengths_offsets_and_threads() {
        let a = Aligned(core::array::from_fn(|i| 1 + i as u32));
        let b = Aligned(core::array::from_fn(|i| 100 + 3 * i as u32));
        let c = Aligned(core::array::from_fn(|i| 1000 + 7 * i as u32));
        let y0 = Aligned(core::array::from_fn(|i| 50_000 + 11 * i as u32));
        for &threads in THREADS {
            for len in lengths() {
                for y_at in 0..4 {
                    // All aligned alike (inputs as long or longer), then each input off y's phase.
                    for (a_at, b_at, c_at, extra) in [
                        (y_at, y_at, y_at, 0),
                        (y_at + 4, y_at + 8, y_at, 3),
                        (y_at + 1, y_at, y_at, 0),
                        (y_at, y_at + 2, y_at, 1),
                        (y_at, y_at, y_at + 3, 0),
                    ] {
                        let mut y = Aligned(y0.0);
                        let (xa, xb, xc) = (
                            &a.0[a_at..a_at + len + extra],
                            &b.0[b_at..b_at + len],
                            &c.0[c_at..],
                        );
                        as_threads(threads, || {
                            // SAFETY: y is borrowed mutably for the call; the threads run one by one.
                            let mut out = unsafe {
                                WideSlice::from_raw_parts(y.0.as_mut_ptr().add(y_at), len)
                            };
                            out.update_mine_wide((xa, xb, xc), |y, (a, b, c)| y + a * b - c);
                        });
                        for j in 0..24usize {
                            let want = match j.checked_sub(y_at) {
                                Some(i) if i < len => y0.0[j] + xa[i] * xb[i] - xc[i],
                                _ => y0.0[j],
                            };
                            assert_eq!(
                                y.0[j], want,
                                "{threads} threads, len {len}, +{y_at} +{a_at} +{b_at} +{c_at}: {j}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn three_outputs_get_every_element_once_for_any_lengths_offsets_and_threads() {
        let x = Aligned(core::array::from_fn(|i| 1 + i as u32));
        let z = Aligned(core::array::from_fn(|i| 100 + i as u32));
        for &threads in THREADS {
            for len in lengths() {
                for p_at in 0..4 {
                    // Aligned alike with equal and unequal lengths, then an output or the input
                    // off the first output's phase.
                    for (q_at, r_at, x_at, lens) in [
                        (p_at, p_at, p_at, [len, len, len]),
                        (p_at + 4, p_at, p_at + 8, [len + 2, len, len + 5]),
                        (p_at, p_at, p_at, [len, len + 1, len + 3]),
                        (p_at, p_at, p_at, [len + 4, len + 1, len]),
                        (p_at + 1, p_at, p_at, [len, len, len]),
                        (p_at, p_at + 3, p_at, [len, len, len + 1]),
                        (p_at, p_at, p_at + 2, [len, len, len]),
                    ] {
                        let (mut p, mut q, mut r) = (
                            Aligned([u32::MAX; 24]),
                            Aligned([-1.0f32; 24]),
                            Aligned([7i32; 24]),
                        );
                        let xs = &x.0[x_at..x_at + len + 3];
                        as_threads(threads, || {
                            // SAFETY: p, q and r are borrowed mutably for the call; the threads
                            // run one by one.
                            let (mut p, mut q, mut r) = unsafe {
                                (
                                    WideSlice::from_raw_parts(p.0.as_mut_ptr().add(p_at), lens[0]),
                                    WideSlice::from_raw_parts(q.0.as_mut_ptr().add(q_at), lens[1]),
                                    WideSlice::from_raw_parts(r.0.as_mut_ptr().add(r_at), lens[2]),
                                )
                            };
                            (&mut p, &mut q, &mut r).map_mine_wide((xs, &z.0[..]), |(x, z)| {
                                (x + z, (x * 2) as f32, -(x as i32))
                            });
                        });
                        let m = lens[0].min(lens[1]).min(lens[2]);
                        let at =
                            format!("{threads} threads, {lens:?}, +{p_at} +{q_at} +{r_at} +{x_at}");
                        let mine = |j: usize, at: usize| j.checked_sub(at).filter(|&i| i < m);
                        for j in 0..24usize {
                            let want_p = mine(j, p_at).map_or(u32::MAX, |i| xs[i] + z.0[i]);
                            let want_q = mine(j, q_at).map_or(-1.0, |i| (xs[i] * 2) as f32);
                            let want_r = mine(j, r_at).map_or(7, |i| -(xs[i] as i32));
                            assert_eq!(
                                (p.0[j], q.0[j], r.0[j]),
                                (want_p, want_q, want_r),
                                "{at}: {j}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_pair_of_outputs_updates_from_its_own_values() {
        let x = Aligned(core::array::from_fn(|i| i as u32));
        let (mut e, mut p) = (Aligned([5u32; 24]), Aligned([9u32; 24]));
        as_threads(3, || {
            // SAFETY: e and p are borrowed mutably for the call, and the threads run one by one.
            let (mut e, mut p) = unsafe {
                (
                    WideSlice::from_raw_parts(e.0.as_mut_ptr().add(1), 17),
                    WideSlice::from_raw_parts(p.0.as_mut_ptr().add(1), 20),
                )
            };
            (&mut e, &mut p).update_mine_wide(&x.0[1..], |(e, p), x| (e + x, p * x));
        });
        for j in 0..24 {
            let mine = (1..18).contains(&j);
            assert_eq!(e.0[j], if mine { 5 + j as u32 } else { 5 }, "{j}");
            assert_eq!(p.0[j], if mine { 9 * j as u32 } else { 9 }, "{j}");
        }
    }

    #[test]
    fn four_outputs_nested_or_flat_get_every_element_once() {
        let x = Aligned(core::array::from_fn(|i| 1 + i as u32));
        for &threads in THREADS {
            for len in lengths() {
                for at in 0..4 {
                    for misaligned in [false, true] {
                        let d_at = at + misaligned as usize;
                        let mut outs = [
                            Aligned([0u32; 24]),
                            Aligned([0u32; 24]),
                            Aligned([0u32; 24]),
                            Aligned([0u32; 24]),
                        ];
                        let [a, b, c, d] = &mut outs;
                        as_threads(threads, || {
                            // SAFETY: the four arrays are borrowed mutably for the call; the
                            // threads run one by one.
                            let (mut a, mut b, mut c, mut d) = unsafe {
                                (
                                    WideSlice::from_raw_parts(a.0.as_mut_ptr().add(at), len),
                                    WideSlice::from_raw_parts(b.0.as_mut_ptr().add(at), len + 1),
                                    WideSlice::from_raw_parts(c.0.as_mut_ptr().add(at), len + 5),
                                    WideSlice::from_raw_parts(d.0.as_mut_ptr().add(d_at), len),
                                )
                            };
                            // Nested: ((a, b), (c, d)).
                            ((&mut a, &mut b), (&mut c, &mut d))
                                .map_mine_wide(&x.0[at..], |x| ((x, x + 1), (x + 2, x + 3)));
                            // Flat, reading and writing all four.
                            (&mut a, &mut b, &mut c, &mut d)
                                .update_mine_wide(&x.0[at..], |(a, b, c, d), x| {
                                    (a * x, b * x, c * x, d * x)
                                });
                        });
                        for (k, (out, o_at)) in outs.iter().zip([at, at, at, d_at]).enumerate() {
                            for j in 0..24usize {
                                let want = match j.checked_sub(o_at) {
                                    Some(i) if i < len => (x.0[at + i] + k as u32) * x.0[at + i],
                                    _ => 0,
                                };
                                assert_eq!(
                                    out.0[j], want,
                                    "{threads} threads, len {len}, +{at}, output {k}: {j}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
