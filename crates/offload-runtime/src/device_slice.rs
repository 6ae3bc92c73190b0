//! `DeviceSlice<'scope, T>`: device memory that a stream made inside an [`crate::scope`]
//! ([`crate::Stream::upload`], [`crate::Stream::alloc_zeroed`]), passed to kernels queued in the
//! scope as is, by value (a `Copy` handle: one slice can be written by one kernel and read by the
//! next), for `&[T]` and `&mut [T]` parameters alike, and copied back with
//! [`crate::Stream::download`]. Its memory is released when the scope ends, after every stream of
//! the scope has finished, so no queued work can outlive it.
//!
//! Work on it is ordered on the stream that queues it; between streams, order it with events
//! ([`crate::Stream::record`], [`crate::Stream::wait`]), as in CUDA (a plain launch inside the
//! scope is ordered with no stream). Unordered uses give unspecified values (`DeviceCopy` types
//! accept any bits), never a freed buffer.
//! On the host device it is host memory, and queued work is done at once.
//!
//! Within one launch, a slice that a parameter writes (`&mut [T]`) may share no element with
//! another argument: read-only `&[T]` parameters are read through the non-coherent cache and may
//! not see the writes, and two writers race. A launch or `enqueue` given overlapping device
//! ranges where one is written is refused with [`crate::Error::InvalidArgument`] naming both
//! parameters, before anything is queued or moved. Read-only uses may overlap freely.

use crate::backend::{Backend, DevicePtr};
use crate::kernel::KernelArg;
use crate::map::{InArg, OutArg};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` elements of `T` in a stream scope's device memory.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'scope, T> {
    pub(crate) device_id: usize,
    /// Device address (host address on the host device); meaningless when `len == 0`.
    pub(crate) addr: u64,
    len: usize,
    /// Invariant: the slice cannot be carried beyond its scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _elem: PhantomData<T>,
}

impl<T: DeviceCopy> DeviceSlice<'_, T> {
    pub(crate) fn new(device_id: usize, addr: u64, len: usize) -> Self {
        DeviceSlice {
            device_id,
            addr,
            len,
            _scope: PhantomData,
            _elem: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn kernel_arg<'a>(&self, writable: bool) -> KernelArg<'a> {
        KernelArg::resident::<T>(self.device_id, self.addr, self.len, writable)
    }
}

impl<'s, T: DeviceCopy> InArg<T> for DeviceSlice<'s, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg(false)
    }
}

impl<'s, T: DeviceCopy> OutArg<T> for DeviceSlice<'s, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg(true)
    }
}

/// Memory behind the device slices of one stream, released when the scope ends.
pub(crate) struct ScopeAllocation {
    queue: Arc<dyn Backend>,
    ptr: DevicePtr,
}

impl ScopeAllocation {
    /// `ptr`, allocated on `queue`, released on it when dropped.
    pub(crate) fn new(queue: Arc<dyn Backend>, ptr: DevicePtr) -> ScopeAllocation {
        ScopeAllocation { queue, ptr }
    }
}

impl Drop for ScopeAllocation {
    fn drop(&mut self) {
        // SAFETY: allocated on this queue; the scope has waited for every stream, so no queued
        // work uses it any more.
        unsafe { self.queue.free(self.ptr) }
    }
}
