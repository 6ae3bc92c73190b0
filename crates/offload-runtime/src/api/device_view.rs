//! Views of part of a [`crate::DeviceVec`], from [`crate::DeviceVec::slice`] (read-only, for a
//! `&[T]` kernel parameter) and [`crate::DeviceVec::slice_mut`] (for a `&mut [T]` one): plain
//! launches and `enqueue` see only those elements. They borrow the vector as `&v` and `&mut v`
//! do, so the vector orders and outlives their uses in the same way.

use crate::api::arg_traits::{sealed::Sealed, InArg, OutArg, StreamArg};
use crate::api::stream_mode::Borrows;
use crate::mapping::kernel::KernelArg;
use crate::mapping::ordering::Uses;
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;

/// Elements of a `DeviceVec`, read-only (see the module docs).
#[derive(Clone, Copy)]
pub struct DeviceView<'v, T> {
    arg: ViewArg<'v>,
    _elements: PhantomData<&'v [T]>,
}

/// Elements of a `DeviceVec`, writable (see the module docs).
pub struct DeviceViewMut<'v, T> {
    arg: ViewArg<'v>,
    _elements: PhantomData<&'v mut [T]>,
}

/// Where the viewed elements are, and the vector's uses.
#[derive(Clone, Copy)]
pub(crate) struct ViewArg<'v> {
    pub device: usize,
    pub addr: u64,
    pub len: usize,
    pub uses: Option<&'v Uses>,
}

impl<'v> ViewArg<'v> {
    pub(crate) fn kernel_arg<T: DeviceCopy>(self, writable: bool) -> KernelArg<'v> {
        KernelArg::resident::<T>(self.device, self.addr, self.len, writable, self.uses)
    }
}

/// What both views have: construction from a `ViewArg` and their length.
macro_rules! view_basics {
    ($($view:ident),*) => {$(
        impl<'v, T: DeviceCopy> $view<'v, T> {
            pub(crate) fn new(arg: ViewArg<'v>) -> Self {
                $view {
                    arg,
                    _elements: PhantomData,
                }
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                self.arg.len
            }

            /// Whether it holds no element.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }
    )*};
}
view_basics!(DeviceView, DeviceViewMut);

impl<T: DeviceCopy> InArg<T> for DeviceView<'_, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.arg.kernel_arg::<T>(false)
    }
}

impl<T: DeviceCopy> OutArg<T> for DeviceViewMut<'_, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.arg.kernel_arg::<T>(true)
    }
}

impl<T> Sealed for DeviceView<'_, T> {}
impl<T> Sealed for DeviceViewMut<'_, T> {}
impl<'v, T, M: Borrows<'v>> StreamArg<'_, M> for DeviceView<'v, T> {}
impl<'v, T, M: Borrows<'v>> StreamArg<'_, M> for DeviceViewMut<'v, T> {}
