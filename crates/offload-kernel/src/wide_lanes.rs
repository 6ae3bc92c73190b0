//! What the 16-byte walks of [`WideSlice`](crate::WideSlice) read and write, lane by lane: the
//! inputs of [`WideSlice::map_mine_wide`](crate::WideSlice::map_mine_wide) (a slice, or a tuple of
//! them, nested at will) and the outputs they write (a `WideSlice`, or a tuple of them, nested at
//! will: [`WideOutputs`]).
//!
//! Each read or written slice gives its elements at an index either one at a time or as the
//! 16-byte chunk starting there, one vector access per slice; a tuple does the same for each of
//! its members and hands the caller's function one tuple of elements per lane. Every member must
//! have elements of one size, so that a chunk of each covers the same indices.

use crate::index::{ids_run, GridStride};
use crate::wide_cut::Cut;
use crate::wide_element::{WideElement, WIDE_BYTES};
use core::mem::size_of;

mod sealed {
    pub trait Sealed {}
}

/// The inputs of an element-wise walk in 16-byte chunks
/// ([`WideSlice::map_mine_wide`](crate::WideSlice::map_mine_wide)): a `&[T]` of a [`WideElement`],
/// whose element is a `T`, or a tuple of up to eight inputs, whose element is the tuple of theirs
/// (`(&[f32], &[f32])` gives `(f32, f32)`). All their elements must have one size. (Sealed: the
/// walk relies on each chunk load reading exactly the 16 bytes at its index.)
pub trait WideInputs: sealed::Sealed {
    /// What the walk hands the function for one index.
    type Elements;
    /// Bytes of each element (the same in every member).
    #[doc(hidden)]
    const ELEMENT_SIZE: usize;
    /// The 16-byte chunks of every member at one index.
    #[doc(hidden)]
    type Chunks;
    /// The first member's address.
    #[doc(hidden)]
    fn address(&self) -> usize;
    /// The shortest member's length.
    #[doc(hidden)]
    fn shortest_len(&self) -> usize;
    /// The bits in which some member's address differs from `address` (their xors, or-ed): a
    /// multiple of 16 if every member sits at `address`'s offset from a 16-byte boundary.
    #[doc(hidden)]
    fn differing_bits(&self, address: usize) -> usize;
    /// Every member's chunk at element `at`.
    ///
    /// # Safety
    /// `at..at + 16 / ELEMENT_SIZE` lies within every member, and `at` is 16-byte aligned in
    /// each of them.
    #[doc(hidden)]
    unsafe fn load_chunks(&self, at: usize) -> Self::Chunks;
    /// Lane `k` of the chunks (`k < 16 / ELEMENT_SIZE`).
    #[doc(hidden)]
    fn lane(chunks: &Self::Chunks, k: usize) -> Self::Elements;
    /// Every member's element `i`.
    ///
    /// # Safety
    /// `i` is below [`shortest_len`](Self::shortest_len).
    #[doc(hidden)]
    unsafe fn load(&self, i: usize) -> Self::Elements;
}

impl<T: WideElement> sealed::Sealed for &[T] {}

impl<T: WideElement> WideInputs for &[T] {
    type Elements = T;
    const ELEMENT_SIZE: usize = size_of::<T>();
    type Chunks = T::Chunk;

    #[inline(always)]
    fn address(&self) -> usize {
        self.as_ptr() as usize
    }

    #[inline(always)]
    fn shortest_len(&self) -> usize {
        <[T]>::len(self)
    }

    #[inline(always)]
    fn differing_bits(&self, address: usize) -> usize {
        self.as_ptr() as usize ^ address
    }

    #[inline(always)]
    unsafe fn load_chunks(&self, at: usize) -> T::Chunk {
        // SAFETY: per the contract, the chunk's elements lie within the slice and its first is
        // aligned for the 16-aligned, 16-byte Chunk type.
        unsafe { (self.as_ptr().add(at) as *const T::Chunk).read() }
    }

    #[inline(always)]
    fn lane(chunks: &T::Chunk, k: usize) -> T {
        chunks.as_ref()[k]
    }

    #[inline(always)]
    unsafe fn load(&self, i: usize) -> T {
        // SAFETY: i < len, per the contract.
        unsafe { *self.get_unchecked(i) }
    }
}

/// The element size that every member of a tuple has (a compile-time error otherwise).
const fn one_size(sizes: &[usize]) -> usize {
    let mut k = 1;
    while k < sizes.len() {
        assert!(
            sizes[k] == sizes[0],
            "wide walks: every input and output must have elements of one size"
        );
        k += 1;
    }
    sizes[0]
}

macro_rules! tuple_inputs {
    ($($member:ident $k:tt),+) => {
        impl<$($member: WideInputs),+> sealed::Sealed for ($($member,)+) {}

        impl<$($member: WideInputs),+> WideInputs for ($($member,)+) {
            type Elements = ($($member::Elements,)+);
            const ELEMENT_SIZE: usize = one_size(&[$($member::ELEMENT_SIZE),+]);
            type Chunks = ($($member::Chunks,)+);

            #[inline(always)]
            fn address(&self) -> usize {
                self.0.address()
            }

            #[inline(always)]
            fn shortest_len(&self) -> usize {
                usize::MAX $(.min(self.$k.shortest_len()))+
            }

            #[inline(always)]
            fn differing_bits(&self, address: usize) -> usize {
                0 $(| self.$k.differing_bits(address))+
            }

            #[inline(always)]
            unsafe fn load_chunks(&self, at: usize) -> Self::Chunks {
                // SAFETY: the contract holds for every member.
                unsafe { ($(self.$k.load_chunks(at),)+) }
            }

            #[inline(always)]
            fn lane(chunks: &Self::Chunks, k: usize) -> Self::Elements {
                ($($member::lane(&chunks.$k, k),)+)
            }

            #[inline(always)]
            unsafe fn load(&self, i: usize) -> Self::Elements {
                // SAFETY: i is below every member's length.
                unsafe { ($(self.$k.load(i),)+) }
            }
        }
    };
}
tuple_inputs!(A 0);
tuple_inputs!(A 0, B 1);
tuple_inputs!(A 0, B 1, C 2);
tuple_inputs!(A 0, B 1, C 2, D 3);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// A [`WideSlice`](crate::WideSlice)'s own elements read as an input, through its raw pointer (not
/// a shared slice: the walk writes them), for
/// [`WideSlice::update_mine_wide`](crate::WideSlice::update_mine_wide).
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct OldValues<T> {
    pub(crate) ptr: *const T,
    pub(crate) len: usize,
}

impl<T> sealed::Sealed for OldValues<T> {}

impl<T: WideElement> WideInputs for OldValues<T> {
    type Elements = T;
    const ELEMENT_SIZE: usize = size_of::<T>();
    type Chunks = T::Chunk;

    #[inline(always)]
    fn address(&self) -> usize {
        self.ptr as usize
    }

    #[inline(always)]
    fn shortest_len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn differing_bits(&self, address: usize) -> usize {
        self.ptr as usize ^ address
    }

    #[inline(always)]
    unsafe fn load_chunks(&self, at: usize) -> T::Chunk {
        // SAFETY: as for slices; the walk writes the chunk only after reading it.
        unsafe { (self.ptr.add(at) as *const T::Chunk).read() }
    }

    #[inline(always)]
    fn lane(chunks: &T::Chunk, k: usize) -> T {
        chunks.as_ref()[k]
    }

    #[inline(always)]
    unsafe fn load(&self, i: usize) -> T {
        // SAFETY: i < len, per the contract.
        unsafe { self.ptr.add(i).read() }
    }
}

mod sealed_outputs {
    pub trait Sealed {}
}
pub(crate) use sealed_outputs::Sealed as OutputsSealed;

/// The outputs of a 16-byte walk: a `&mut` [`WideSlice`](crate::WideSlice), or a tuple of up to
/// eight outputs (nested at will), whose value at an index is the tuple of theirs. A tuple of
/// outputs is written by [`map_mine_wide`](Self::map_mine_wide) and
/// [`update_mine_wide`](Self::update_mine_wide), the general forms of the `WideSlice` methods
/// of those names: `(&mut a, &mut b, &mut c).map_mine_wide((x, y), |(x, y)| (x + y, x - y, x * y))`.
///
/// One ownership rule for all of them: the walk cuts the first output into 16-byte chunks and
/// unaligned ends, below the shortest output's (and input's) length, and every output's chunk
/// and end element at an index goes to the one thread that owns that index in the first. All
/// outputs and inputs must have elements of one size; chunks are used only when all of them sit
/// at the same offset from a 16-byte boundary, else the launch goes element by element, with the
/// same results. (Sealed: the walk relies on each chunk store writing exactly the 16 bytes at its
/// index.)
pub trait WideOutputs: sealed_outputs::Sealed + Sized {
    /// What the function returns for one index: an element, or a tuple of them.
    type Values;
    /// Bytes of each element (the same in every member).
    #[doc(hidden)]
    const ELEMENT_SIZE: usize;
    /// The 16-byte chunks of every member at one index, being filled.
    #[doc(hidden)]
    type Chunks;
    /// The members' own elements read as inputs (for updates).
    #[doc(hidden)]
    type Old: WideInputs<Elements = Self::Values>;
    /// The shortest member's length.
    #[doc(hidden)]
    fn shortest_len(&self) -> usize;
    /// The first member's address, which the walk's cut follows.
    #[doc(hidden)]
    fn address(&self) -> usize;
    /// As [`WideInputs::differing_bits`].
    #[doc(hidden)]
    fn differing_bits(&self, address: usize) -> usize;
    /// Names to the host backend's output saving the elements that this thread's `chunks` and
    /// `ends` of `cut` will write in every member (`save_cut`).
    #[doc(hidden)]
    fn before_writing(&self, chunks: &GridStride, ends: &GridStride, cut: Cut);
    /// Chunks to fill lane by lane (every lane is set before they are stored).
    #[doc(hidden)]
    fn new_chunks() -> Self::Chunks;
    /// Lane `k` of the chunks becomes `values`.
    #[doc(hidden)]
    fn set_lane(chunks: &mut Self::Chunks, k: usize, values: Self::Values);
    /// Every member's chunk at element `at` becomes `chunks`.
    ///
    /// # Safety
    /// As [`WideInputs::load_chunks`], and no other thread reaches these elements.
    #[doc(hidden)]
    unsafe fn store_chunks(&mut self, at: usize, chunks: Self::Chunks);
    /// Every member's element `i` becomes `values`.
    ///
    /// # Safety
    /// `i` is below [`shortest_len`](Self::shortest_len), and no other thread reaches this element.
    #[doc(hidden)]
    unsafe fn store(&mut self, i: usize, values: Self::Values);
    /// The members' elements as inputs of the walk that writes them (each element is read, then
    /// written, by the one thread that owns it).
    #[doc(hidden)]
    fn old_values(&self) -> Self::Old;

    /// `(a[i], b[i], …) = f(inputs[i])` for every index `i` this thread owns below the shortest
    /// output's length: [`WideSlice::map_mine_wide`](crate::WideSlice::map_mine_wide) over every
    /// member of the tuple, each chunk of each written with one 16-byte store. `inputs` is a
    /// slice or a tuple of them ([`WideInputs`]).
    ///
    /// # Panics
    /// If an input is shorter than the shortest output: the threads that own output indices past
    /// its end panic with an index out of bounds, as the plain loop over
    /// [`ThreadSlice::iter_mine`](crate::ThreadSlice::iter_mine) would, at the caller's
    /// location. At compile time, if the inputs' elements and the outputs' differ in size.
    #[inline(always)]
    #[track_caller]
    fn map_mine_wide<I: WideInputs>(self, inputs: I, f: impl Fn(I::Elements) -> Self::Values) {
        walk_mine(self, inputs, f);
    }

    /// `(a[i], b[i], …) = f((a[i], b[i], …), inputs[i])` for every index `i` this thread owns
    /// below the shortest output's length, 16 bytes at a time as in
    /// [`map_mine_wide`](Self::map_mine_wide), the outputs read as well as written:
    /// `(&mut a, &mut b).update_mine_wide((x, y), |(a, b), (x, y)| (a + x, b * y))`.
    ///
    /// # Panics
    /// As [`map_mine_wide`](Self::map_mine_wide).
    #[inline(always)]
    #[track_caller]
    fn update_mine_wide<I: WideInputs>(
        self,
        inputs: I,
        f: impl Fn(Self::Values, I::Elements) -> Self::Values,
    ) {
        let old = self.old_values();
        walk_mine(self, (old, inputs), |(y, x)| f(y, x));
    }
}

macro_rules! tuple_outputs {
    ($($member:ident $k:tt),+) => {
        impl<$($member: WideOutputs),+> sealed_outputs::Sealed for ($($member,)+) {}

        impl<$($member: WideOutputs),+> WideOutputs for ($($member,)+) {
            type Values = ($($member::Values,)+);
            const ELEMENT_SIZE: usize = one_size(&[$($member::ELEMENT_SIZE),+]);
            type Chunks = ($($member::Chunks,)+);
            type Old = ($($member::Old,)+);

            #[inline(always)]
            fn shortest_len(&self) -> usize {
                usize::MAX $(.min(self.$k.shortest_len()))+
            }

            #[inline(always)]
            fn address(&self) -> usize {
                self.0.address()
            }

            #[inline(always)]
            fn differing_bits(&self, address: usize) -> usize {
                0 $(| self.$k.differing_bits(address))+
            }

            #[inline(always)]
            fn before_writing(&self, chunks: &GridStride, ends: &GridStride, cut: Cut) {
                $(self.$k.before_writing(chunks, ends, cut);)+
            }

            #[inline(always)]
            fn new_chunks() -> Self::Chunks {
                ($($member::new_chunks(),)+)
            }

            #[inline(always)]
            fn set_lane(chunks: &mut Self::Chunks, k: usize, values: Self::Values) {
                $($member::set_lane(&mut chunks.$k, k, values.$k);)+
            }

            #[inline(always)]
            unsafe fn store_chunks(&mut self, at: usize, chunks: Self::Chunks) {
                // SAFETY: the contract holds for every member.
                unsafe { $(self.$k.store_chunks(at, chunks.$k);)+ }
            }

            #[inline(always)]
            unsafe fn store(&mut self, i: usize, values: Self::Values) {
                // SAFETY: the contract holds for every member.
                unsafe { $(self.$k.store(i, values.$k);)+ }
            }

            #[inline(always)]
            fn old_values(&self) -> Self::Old {
                ($(self.$k.old_values(),)+)
            }
        }
    };
}
tuple_outputs!(A 0);
tuple_outputs!(A 0, B 1);
tuple_outputs!(A 0, B 1, C 2);
tuple_outputs!(A 0, B 1, C 2, D 3);
tuple_outputs!(A 0, B 1, C 2, D 3, E 4);
tuple_outputs!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_outputs!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_outputs!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// `outputs[i] = f(inputs[i])` for every index `i` this thread owns: the walk behind
/// [`WideSlice`](crate::WideSlice)'s methods and [`WideOutputs`]'.
#[inline(always)]
#[track_caller]
pub(crate) fn walk_mine<O: WideOutputs, I: WideInputs>(
    mut outputs: O,
    inputs: I,
    f: impl Fn(I::Elements) -> O::Values,
) {
    const {
        assert!(
            O::ELEMENT_SIZE == I::ELEMENT_SIZE,
            "wide walks: the inputs' and the outputs' elements must have the same size"
        )
    };
    let size = O::ELEMENT_SIZE;
    let len = outputs.shortest_len();
    let paired = len.min(inputs.shortest_len());
    let out = outputs.address();
    let alike = (outputs.differing_bits(out) | inputs.differing_bits(out)) % WIDE_BYTES == 0;
    let cut = Cut::of(out, alike, paired, size);
    let lanes = WIDE_BYTES / size;
    let (chunks, ends) = (GridStride::mine(cut.chunks, 0), cut.head + cut.tail);
    let end_indices = GridStride::mine(ends, 0);
    outputs.before_writing(&chunks, &end_indices, cut);
    for c in chunks {
        let at = cut.head + c * lanes;
        // SAFETY: elements at..at+lanes lie within every slice (at + lanes <= head + chunks *
        // lanes <= paired); `at` is 16-byte aligned in the first output (head reaches the first
        // boundary) and so in every slice (same offset from a boundary). Chunk c is this
        // thread's alone (c ≡ global_id mod global_threads) and the ends below hold no chunk
        // element, so no other thread touches these elements.
        unsafe {
            let xs = inputs.load_chunks(at);
            let mut ys = O::new_chunks();
            for k in 0..lanes {
                O::set_lane(&mut ys, k, f(I::lane(&xs, k)));
            }
            outputs.store_chunks(at, ys);
        }
    }
    // The head and tail, numbered one after the other and shared out grid-stride too: a
    // launch of fewer threads than end elements must still reach all of them.
    for j in end_indices {
        let i = if j < cut.head { j } else { paired - ends + j };
        // SAFETY: i < paired, within every slice; end element j (hence i) is this thread's
        // alone and no chunk contains it.
        unsafe { outputs.store(i, f(inputs.load(i))) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(16))]
    struct Aligned([u32; 12]);

    #[test]
    fn tuples_are_as_short_and_as_aligned_as_their_members() {
        let x = Aligned(core::array::from_fn(|i| i as u32));
        let (a, b, c) = (&x.0[1..], &x.0[5..12], &x.0[2..]);
        let inputs = (a, (b, a));
        assert_eq!(inputs.shortest_len(), 7);
        // a and b both start 4 bytes past a boundary, c 8.
        let base = x.0.as_ptr() as usize;
        assert_eq!(inputs.differing_bits(base + 4) % 16, 0);
        assert_ne!(inputs.differing_bits(base) % 16, 0);
        assert_ne!((a, c).differing_bits(base + 4) % 16, 0);
        assert_ne!((c, a).differing_bits(base + 8) % 16, 0);
        // SAFETY: elements 3..7 of each member lie within it and start at a 16-byte boundary of
        // `x` (its element 4 for a, 8 for b); index 5 is below every length.
        let (chunks, one) = unsafe { (inputs.load_chunks(3), inputs.load(5)) };
        assert_eq!(<(&[u32], (&[u32], &[u32]))>::lane(&chunks, 3), (7, (11, 7)));
        assert_eq!(one, (6, (10, 6)));
    }

    #[test]
    fn old_values_read_the_output_itself() {
        let x = Aligned(core::array::from_fn(|i| 10 * i as u32));
        let old = OldValues {
            ptr: x.0[4..].as_ptr(),
            len: 8,
        };
        let base = x.0.as_ptr() as usize;
        assert_eq!(old.differing_bits(base) % 16, 0);
        assert_ne!(old.differing_bits(base + 4) % 16, 0);
        // SAFETY: elements 4..8 of the view lie within it, 16-byte aligned; 7 < len.
        let (chunks, one) = unsafe { (old.load_chunks(4), old.load(7)) };
        assert_eq!(OldValues::<u32>::lane(&chunks, 1), 90);
        assert_eq!(one, 110);
    }
}
