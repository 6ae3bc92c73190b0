//! The element types that can be exchanged and summed: the primitive numbers both MPI and NCCL
//! name.

use mpi::traits::Equivalence;
use offload::DeviceCopy;
use std::ffi::c_int;

/// An element type of [`crate::Comm::exchange`] and [`crate::Comm::all_reduce_sum`]: `f32`,
/// `f64`, `i32`, `u32`, `i64`, `u64`.
pub trait Element: DeviceCopy + Equivalence + sealed::Sealed {
    /// NCCL's `ncclDataType_t` for it.
    #[doc(hidden)]
    const NCCL_TYPE: c_int;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! elements {
    ($($ty:ty => $nccl:expr),*) => {$(
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const NCCL_TYPE: c_int = $nccl;
        }
    )*};
}

// The values of nccl.h's `ncclDataType_t`.
elements!(i32 => 2, u32 => 3, i64 => 4, u64 => 5, f32 => 7, f64 => 8);
