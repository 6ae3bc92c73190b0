//! Map kinds at the call site, OpenMP's `map(to: …)`, `map(from: …)` and friends, as wrappers
//! that the typed launchers accept through [`InArg`] and [`OutArg`]:
//!
//! | kernel parameter | accepts |
//! | --- | --- |
//! | `&[T]` | `&[T]`, `&Vec<T>`, `&[T; N]`, [`to`]`(&x)`, [`present`]`(&x)`, `&DeviceVec<T>`, `dv.slice(a..b)`, a `DeviceSlice`, `&Mapped`, `&MappedMut` |
//! | `&mut [T]` | `&mut [T]`, `&mut Vec<T>`, `&mut [T; N]`, [`tofrom`]`(..)`, [`from`]`(..)`, [`to`]`(&mut ..)`, [`alloc`]`(..)`, `&mut DeviceVec<T>`, `dv.slice_mut(a..b)`, a `DeviceSlice`, `&mut MappedMut` |
//!
//! A stream's `enqueue` also asks for [`StreamArg`]: host data and region handles borrowed for
//! the stream's scope, a `DeviceVec` (and its views) for the call only, or for the graph's
//! lifetime while recording one.
//!
//! A plain reference takes its type's default (`&` is `to`, `&mut` is `tofrom`), so
//! `saxpy(a, &x, from(&mut y))` skips copying `y` in, and `from` on an input does not compile.
//! Data a region mapped is found present whatever the spelling, and moves nothing.
//!
//! On the host backend mapping is a no-op: kernels read and write host memory, except that
//! `to(&mut ..)` and `alloc(..)` results are discarded, as on a GPU.

pub use crate::api::arg_traits::{InArg, OutArg, ReduceInto, ReduceOnDevice, StreamArg};

use crate::api::arg_traits::sealed;
use crate::api::stream_mode::StreamMode;
use crate::mapping::kernel::{ArgData, KernelArg, OutKind};
use offload_kernel::DeviceCopy;
use std::mem::size_of;

/// Host data of `T` elements that a map kind or a region can borrow: `&[T]`, `&Vec<T>`, `&[T; N]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a shared borrow of host `{T}` elements",
    label = "expected `&[{T}]`, `&Vec<{T}>` or `&[{T}; N]`"
)]
pub trait HostSlice<'a, T> {
    /// The elements.
    fn host_slice(self) -> &'a [T];
}

/// Host data of `T` elements borrowed mutably: `&mut [T]`, `&mut Vec<T>`, `&mut [T; N]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a mutable borrow of host `{T}` elements",
    label = "expected `&mut [{T}]`, `&mut Vec<{T}>` or `&mut [{T}; N]`"
)]
pub trait HostSliceMut<'a, T> {
    /// The elements.
    fn host_slice_mut(self) -> &'a mut [T];
}

impl<'a, T> HostSlice<'a, T> for &'a [T] {
    fn host_slice(self) -> &'a [T] {
        self
    }
}
impl<'a, T> HostSlice<'a, T> for &'a Vec<T> {
    fn host_slice(self) -> &'a [T] {
        self
    }
}
impl<'a, T, const N: usize> HostSlice<'a, T> for &'a [T; N] {
    fn host_slice(self) -> &'a [T] {
        self
    }
}
impl<'a, T> HostSliceMut<'a, T> for &'a mut [T] {
    fn host_slice_mut(self) -> &'a mut [T] {
        self
    }
}
impl<'a, T> HostSliceMut<'a, T> for &'a mut Vec<T> {
    fn host_slice_mut(self) -> &'a mut [T] {
        self
    }
}
impl<'a, T, const N: usize> HostSliceMut<'a, T> for &'a mut [T; N] {
    fn host_slice_mut(self) -> &'a mut [T] {
        self
    }
}

macro_rules! host_stream_args {
    ($($ty:ty $(, $n:ident)?);*) => {$(
        impl<'a, T $(, const $n: usize)?> sealed::Sealed for $ty {}
        impl<'s, 'a: 's, M: StreamMode, T $(, const $n: usize)?> StreamArg<'s, M> for $ty {}
    )*};
}
host_stream_args!(&'a [T]; &'a Vec<T>; &'a [T; N], N; &'a mut [T]; &'a mut Vec<T>; &'a mut [T; N], N);

macro_rules! wrapped_stream_args {
    ($($wrapper:ident),*) => {$(
        impl<S: sealed::Sealed> sealed::Sealed for $wrapper<S> {}
        impl<'s, M: StreamMode, S: StreamArg<'s, M>> StreamArg<'s, M> for $wrapper<S> {}
    )*};
}
wrapped_stream_args!(To, From, ToFrom, Alloc, Present);

fn input<'a, T: DeviceCopy>(data: &[T], present_only: bool) -> KernelArg<'a> {
    KernelArg::new(ArgData::Slice {
        ptr: data.as_ptr() as *const u8,
        len: data.len(),
        elem_size: size_of::<T>(),
        present_only,
    })
}

fn output<'a, T: DeviceCopy>(data: &mut [T], kind: OutKind) -> KernelArg<'a> {
    KernelArg::new(ArgData::SliceMut {
        ptr: data.as_mut_ptr() as *mut u8,
        len: data.len(),
        elem_size: size_of::<T>(),
        atomic: false,
        kind,
    })
}

macro_rules! plain_inputs {
    ($($ty:ty $(, $n:ident)?);*) => {$(
        impl<T: DeviceCopy $(, const $n: usize)?> InArg<T> for $ty {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a> where Self: 'a {
                input(self, false)
            }
        }
    )*};
}
plain_inputs!(&[T]; &Vec<T>; &[T; N], N);

macro_rules! plain_outputs {
    ($($ty:ty $(, $n:ident)?);*) => {$(
        impl<T: DeviceCopy $(, const $n: usize)?> OutArg<T> for $ty {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a> where Self: 'a {
                output(self, OutKind::ToFrom)
            }
        }
    )*};
}
plain_outputs!(&mut [T]; &mut Vec<T>; &mut [T; N], N);

/// `map(to: …)`: copied to the device (the default for `&[T]`); on a `&mut [T]` parameter, the
/// kernel's writes stay on the device and are discarded.
pub struct To<S>(S);
/// `map(from: …)`: the device copy starts zeroed, not copied in, and is copied back (outputs).
pub struct From<S>(S);
/// `map(tofrom: …)`: copied in and back (the default for `&mut [T]`).
pub struct ToFrom<S>(S);
/// `map(alloc: …)`: device scratch of the same length, zeroed; nothing is copied either way and
/// the host data is left as it was.
pub struct Alloc<S>(S);
/// `present`: the data must be mapped already (by a data region); otherwise the launch fails
/// with `Error::NotPresent` before anything moves.
pub struct Present<S>(S);

/// Copy to the device only (see [`To`]).
pub fn to<S>(data: S) -> To<S> {
    To(data)
}
/// Copy back from the device only (see [`From`]).
pub fn from<S>(data: S) -> From<S> {
    From(data)
}
/// Copy to the device and back (see [`ToFrom`]).
pub fn tofrom<S>(data: S) -> ToFrom<S> {
    ToFrom(data)
}
/// Device scratch, no copies (see [`Alloc`]).
pub fn alloc<S>(data: S) -> Alloc<S> {
    Alloc(data)
}
/// Already mapped, or an error (see [`Present`]).
pub fn present<S>(data: S) -> Present<S> {
    Present(data)
}

impl<'s, T: DeviceCopy, S: HostSlice<'s, T>> InArg<T> for To<S> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        input(self.0.host_slice(), false)
    }
}
impl<'s, T: DeviceCopy, S: HostSlice<'s, T>> InArg<T> for Present<S> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        input(self.0.host_slice(), true)
    }
}

macro_rules! wrapped_outputs {
    ($($wrapper:ident => $kind:ident),*) => {$(
        impl<'s, T: DeviceCopy, S: HostSliceMut<'s, T>> OutArg<T> for $wrapper<S> {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a> where Self: 'a {
                output(self.0.host_slice_mut(), OutKind::$kind)
            }
        }
    )*};
}
wrapped_outputs!(To => To, From => From, ToFrom => ToFrom, Alloc => Alloc);

impl<T: DeviceCopy> ReduceInto<T> for &mut T {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        output(std::slice::from_mut(self), OutKind::ToFrom).into_reduction_target()
    }
}

macro_rules! device_reduce_targets {
    ($($ty:ty),*) => {$(
        impl<T: DeviceCopy> ReduceInto<T> for $ty {
            fn into_kernel_arg<'a>(self) -> KernelArg<'a> where Self: 'a {
                OutArg::<T>::into_kernel_arg(self).into_reduction_target()
            }
        }
    )*};
}
device_reduce_targets!(
    &mut crate::DeviceVec<T>,
    crate::DeviceViewMut<'_, T>,
    crate::DeviceSlice<'_, T>
);

impl<T: DeviceCopy> ReduceOnDevice for &mut crate::DeviceVec<T> {}
impl<T: DeviceCopy> ReduceOnDevice for crate::DeviceViewMut<'_, T> {}
impl<T: DeviceCopy> ReduceOnDevice for crate::DeviceSlice<'_, T> {}
