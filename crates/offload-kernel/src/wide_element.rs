//! The element types that 16-byte walks move a whole chunk at a time, and their chunks.

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

/// Element types that the walks of [`WideSlice`](crate::WideSlice) move 16 bytes at a time: the
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
