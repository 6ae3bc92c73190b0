//! `DeviceSlice<'scope, T>`: device memory that a stream made inside an [`crate::scope`]
//! ([`crate::Stream::upload`], [`crate::Stream::alloc_zeroed`]), passed to kernels queued in the
//! scope as is, by value (a `Copy` handle: one slice can be written by one kernel and read by the
//! next), for `&[T]` and `&mut [T]` parameters alike, and copied back with
//! [`crate::Stream::download`]. Its memory is released when the scope ends, after every stream of
//! the scope has finished, so no queued work can outlive it.
//!
//! Work on it is ordered on the stream that queues it, and across streams (and plain launches)
//! automatically: a use on another stream waits for the conflicting ones (a read for the last
//! write, a write for the reads and the write before it; see `crate::mapping::ordering`). Explicit events
//! ([`crate::Stream::record`], [`crate::Stream::wait`]) remain for ordering anything else.
//! On the host device it is host memory, and queued work is done at once.
//!
//! Within one launch, a slice that a parameter writes (`&mut [T]`) may share no element with
//! another argument: read-only `&[T]` parameters are read through the non-coherent cache and may
//! not see the writes, and two writers race. A launch or `enqueue` given overlapping device
//! ranges where one is written is refused with [`crate::Error::InvalidArgument`] naming both
//! parameters, before anything is queued or moved. Read-only uses may overlap freely.

use crate::api::arg_traits::{sealed::Sealed, InArg, OutArg, StreamArg};
use crate::api::stream_mode::StreamMode;
use crate::mapping::kernel::KernelArg;
use crate::mapping::ordering::Uses;
use crate::plugins::{Backend, DevicePtr};
use crate::{Error, Result};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Arc;

/// `len` elements of `T` in a stream scope's device memory.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'scope, T> {
    pub(crate) device_id: usize,
    /// Device address (host address on the host device); meaningless when `len == 0`.
    pub(crate) addr: u64,
    len: usize,
    /// The queues using its memory (`None` when it has none).
    uses: Option<&'scope Uses>,
    /// Invariant: the slice cannot be carried beyond its scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _elem: PhantomData<T>,
}

impl<'scope, T: DeviceCopy> DeviceSlice<'scope, T> {
    pub(crate) fn new(device_id: usize, addr: u64, len: usize, uses: Option<&'scope Uses>) -> Self {
        DeviceSlice {
            device_id,
            addr,
            len,
            uses,
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

    /// The device address of the first element (a `CUdeviceptr` on a CUDA device, a host
    /// address on the host device), for vendor libraries to read or write the elements in
    /// stream order ([`crate::Stream::native_queue`]). The memory stays valid until the scope
    /// ends, after every stream of it has finished; work on it by vendor libraries is not
    /// tracked, so from two streams it is ordered only by events.
    pub fn device_ptr(&self) -> u64 {
        self.addr
    }

    /// Elements `range` of it, as a slice of the same scope (a dot product's one-element result,
    /// a block of a vector), ordered across streams with the whole allocation. Past the end is
    /// `Err(OutOfRange)` (a `DeviceVec`'s views, [`crate::DeviceVec::slice`], panic instead, as
    /// slicing does).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<Self> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::OutOfRange {
                what: "DeviceSlice::slice",
                start: range.start,
                end: range.end,
                len: self.len,
            });
        }
        let offset = (range.start * size_of::<T>()) as u64;
        Ok(DeviceSlice::new(
            self.device_id,
            self.addr + offset,
            range.end - range.start,
            self.uses,
        ))
    }

    fn kernel_arg(self, writable: bool) -> KernelArg<'scope> {
        KernelArg::resident::<T>(self.device_id, self.addr, self.len, writable, self.uses)
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

impl<T> Sealed for DeviceSlice<'_, T> {}
impl<'s, T, M: StreamMode> StreamArg<'s, M> for DeviceSlice<'s, T> {}

/// Memory behind the device slices of one stream, released when the scope ends, with the queues
/// using it.
pub(crate) struct ScopeAllocation {
    queue: Arc<dyn Backend>,
    ptr: DevicePtr,
    pub(crate) uses: Uses,
}

impl ScopeAllocation {
    /// `ptr`, allocated on `queue`, released on it when dropped.
    pub(crate) fn new(queue: Arc<dyn Backend>, ptr: DevicePtr) -> ScopeAllocation {
        ScopeAllocation {
            queue,
            ptr,
            uses: Uses::default(),
        }
    }
}

impl Drop for ScopeAllocation {
    fn drop(&mut self) {
        // SAFETY: allocated on this queue; the scope has waited for every stream, so no queued
        // work uses it any more.
        unsafe { self.queue.free(self.ptr) }
    }
}
