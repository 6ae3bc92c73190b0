//! What a typed launcher's parameters accept, as traits: [`InArg`] for a `&[T]` parameter,
//! [`OutArg`] for a `&mut [T]` one, [`ReduceInto`] for a `#[reduce]` one, and on a stream
//! [`StreamArg`] (and [`ReduceOnDevice`]). Host data and the map kinds implement them in
//! `crate::api::map`, which also names them for users; device data in its own files.

use crate::api::stream_mode::{Runs, StreamMode};
use crate::mapping::kernel::KernelArg;
use offload_kernel::DeviceCopy;

/// What a `&[T]` kernel parameter accepts (see [`crate::map`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a `&[{T}]` kernel parameter",
    label = "expected `&[{T}]`, `&Vec<{T}>`, `to(&..)`, `present(&..)`, `&DeviceVec<{T}>` or a region's mapped handle",
    note = "`from`, `tofrom` and `alloc` are for `&mut [T]` parameters (outputs)"
)]
pub trait InArg<T: DeviceCopy> {
    #[doc(hidden)]
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a;
}

/// What a `&mut [T]` kernel parameter accepts (see [`crate::map`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a `&mut [{T}]` kernel parameter",
    label = "expected `&mut [{T}]`, `&mut Vec<{T}>`, `from(..)`, `tofrom(..)`, `alloc(..)`, `to(&mut ..)`, `&mut DeviceVec<{T}>` or a mutable mapped handle",
    note = "a kernel's outputs need a mutable borrow: `&mut x`, not `&x`"
)]
pub trait OutArg<T: DeviceCopy> {
    #[doc(hidden)]
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a;
}

/// What a stream's `enqueue` accepts besides the map kind: data that outlives the work queued on
/// it. Host data and a region's handles are borrowed for the stream's scope `'s` (the copies back
/// land after the call returns); a scope's `DeviceSlice` lives as long as the scope; a
/// `DeviceVec` and its views are borrowed as the stream handle's mode `M` says
/// ([`crate::Borrows`]): on a running stream for the call only, since the vector orders its later
/// uses after the queued work and waits for it before it is freed (see `crate::mapping::ordering`); on the
/// handle recording a graph, for the graph's lifetime.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not live as long as the stream's scope",
    label = "borrow it for the whole `offload::scope` (or use a `DeviceVec`)"
)]
pub trait StreamArg<'s, M: StreamMode = Runs>: sealed::Sealed {}

pub(crate) mod sealed {
    /// Only the runtime's argument types can promise what [`super::StreamArg`] needs.
    pub trait Sealed {}
}

/// What a `#[reduce]` kernel parameter accepts: the value the launch's total is folded into.
/// A host value (`&mut total`) is copied to the device and back once the kernel succeeded; one
/// element of device memory (a `DeviceVec` of length 1, a one-element view or stream-scope
/// slice) stays there, so that a loop of launches on a stream reads nothing back.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a `#[reduce]` parameter of `{T}`",
    label = "expected `&mut {T}`, `&mut DeviceVec<{T}>` of length 1 or a one-element device view",
    note = "on a stream, a reduction goes to device memory: a `DeviceVec` of length 1, say"
)]
pub trait ReduceInto<T: DeviceCopy> {
    #[doc(hidden)]
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a;
}

/// A reduction's target in device memory, which a stream's `enqueue` requires (a host value
/// would need a copy back on the stream).
#[diagnostic::on_unimplemented(
    message = "on a stream, a `#[reduce]` parameter takes device memory, not `{Self}`",
    label = "expected `&mut DeviceVec<_>` of length 1, a one-element view or device slice",
    note = "the result stays on the device; read it with `DeviceVec::to_vec` when needed"
)]
pub trait ReduceOnDevice: sealed::Sealed {}
