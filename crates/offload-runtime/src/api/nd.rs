//! Array views as kernel arguments: what the launcher of a kernel parameter written
//! `ArrayViewN<T>` (`ArrayViewMutN<T>`) accepts, [`NdIn`] ([`NdOut`]), with the feature
//! `ndarray`: ndarray's `ArrayView` (`ArrayViewMut`) of the same number of dimensions (1 to 3).
//! The elements move as a `&[T]` (`&mut [T]`) argument's do; the extents follow them to the
//! kernel, which sees an `offload::nd` view of that shape.
//!
//! Only views contiguous in row-major order can be passed as they are: any other (a transposed
//! or sliced view, Fortran order) makes the launch `Err(InvalidArgument)` saying so, before
//! anything moves; `as_standard_layout()` gives a contiguous copy.

use crate::mapping::kernel::KernelArg;

/// A host array of `D` dimensions a kernel reads (an `ArrayViewD<T>` parameter).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a {D}-dimensional array view of `{T}`",
    label = "expected an ndarray `ArrayView` of {D} dimensions (feature `ndarray` of offload)"
)]
pub trait NdIn<T, const D: usize> {
    /// The argument, with its extents (or refused, naming why).
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a;
}

/// A host array of `D` dimensions a kernel writes (an `ArrayViewMutD<T>` parameter), copied
/// back after the kernel succeeded.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a {D}-dimensional output array of `{T}`",
    label = "expected an ndarray `ArrayViewMut` of {D} dimensions (feature `ndarray` of offload)"
)]
pub trait NdOut<T, const D: usize> {
    /// The argument, with its extents (or refused, naming why).
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a;
}

/// Why a view that is not row-major contiguous cannot be passed.
#[cfg(feature = "ndarray")]
fn not_contiguous(shape: &[usize], strides: &[isize]) -> String {
    format!(
        "is an array view of shape {shape:?} with strides {strides:?}, not contiguous in \
         row-major order: kernels see arrays as one row-major slice; pass \
         `.as_standard_layout()` (a contiguous copy) instead"
    )
}

#[cfg(feature = "ndarray")]
macro_rules! ndarray_views {
    ($($d:literal => $ix:ty),*) => {$(
        impl<'v, T: offload_kernel::DeviceCopy> NdIn<T, $d> for ndarray::ArrayView<'v, T, $ix> {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a>
            where
                Self: 'a,
            {
                let shape = self.shape().to_vec();
                match self.to_slice() {
                    Some(elements) => KernelArg::slice(elements).with_extents(&shape),
                    None => KernelArg::refused(not_contiguous(&shape, self.strides())),
                }
            }
        }

        impl<'v, T: offload_kernel::DeviceCopy> NdOut<T, $d> for ndarray::ArrayViewMut<'v, T, $ix> {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a>
            where
                Self: 'a,
            {
                let (shape, strides) = (self.shape().to_vec(), self.strides().to_vec());
                match self.into_slice() {
                    Some(elements) => KernelArg::slice_mut(elements).with_extents(&shape),
                    None => KernelArg::refused(not_contiguous(&shape, &strides)),
                }
            }
        }
    )*};
}

#[cfg(feature = "ndarray")]
ndarray_views!(1 => ndarray::Ix1, 2 => ndarray::Ix2, 3 => ndarray::Ix3);
