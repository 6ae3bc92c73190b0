//! `DeviceVec<T>`: an array living in one device's memory, passed to kernels as is (`&v` for a
//! `&[T]` parameter, `&mut v` for a `&mut [T]` one) with no transfer. Data moves only when asked:
//! [`DeviceVec::from_slice`], [`DeviceVec::copy_from_host`], [`DeviceVec::copy_to_host`],
//! [`DeviceVec::to_vec`], and for a part of it (halo rows) [`DeviceVec::copy_from_host_at`],
//! [`DeviceVec::copy_to_host_at`]. On the host device it is host memory.
//!
//! It is also what kernels queued on streams take (`enqueue(&stream, …, &v, &mut w)`), borrowed
//! for that call only, so one vector serves a loop of launches, plain or queued, and a stream
//! can copy into it ([`crate::Stream::upload_into`]). Uses on different streams, and on a
//! stream and the host, are ordered automatically (see `crate::mapping::ordering`): a read waits for the
//! last write, a write for the reads and the write before it. Freeing it waits for the queued
//! work that uses it. [`DeviceVec::slice`] and [`DeviceVec::slice_mut`] pass a sub-range.

use crate::api::arg_traits::{sealed::Sealed, InArg, OutArg, StreamArg};
use crate::api::device_view::{DeviceView, DeviceViewMut, ViewArg};
use crate::api::stream_mode::Borrows;
use crate::mapping::device::Device;
use crate::mapping::kernel::KernelArg;
use crate::mapping::ordering::Uses;
use crate::mapping::trace::{self, CopySource};
use crate::plugins::DevicePtr;
use crate::{Error, Result};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Bound, RangeBounds};
use std::time::Instant;

/// `len` elements of `T` in one device's memory, freed on drop (see the module docs).
pub struct DeviceVec<T: DeviceCopy> {
    device: Device,
    /// `len` elements at `ptr` (null when empty).
    ptr: DevicePtr,
    len: usize,
    /// The queues that may still be using it.
    uses: Uses,
    _elements: PhantomData<T>,
}

/// What `Error::OutOfMemory` names when a `DeviceVec` does not fit.
const DEVICE_VEC: &str = "offload::DeviceVec";

impl<T: DeviceCopy> DeviceVec<T> {
    /// Room for `len` elements on `device`, not yet written.
    fn uninit(device: &Device, len: usize) -> Result<Self> {
        let backend = device.backend();
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::OutOfMemory {
                kernel: DEVICE_VEC,
                device: backend.name().to_string(),
                bytes: usize::MAX,
            })?;
        let ptr = match bytes {
            0 => DevicePtr(0),
            _ => backend.alloc(DEVICE_VEC, bytes)?,
        };
        Ok(DeviceVec {
            device: device.clone(),
            ptr,
            len,
            uses: Uses::default(),
            _elements: PhantomData,
        })
    }

    fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// `len` zeroed elements on `device` (all-zero bytes are a valid `T`: see `DeviceCopy`).
    pub fn zeroed(device: &Device, len: usize) -> Result<Self> {
        let v = Self::uninit(device, len)?;
        if v.bytes() > 0 {
            // SAFETY: `ptr` holds `len` elements.
            unsafe { device.backend().fill_zero(v.ptr, v.bytes())? };
            // Queued, not waited for: streams that use it first wait for the device's queue.
            v.uses.claim(true).queued_on(device.queue());
        }
        Ok(v)
    }

    /// A device copy of `data` on `device`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        let mut v = Self::uninit(device, data.len())?;
        v.copy_from_host(data)?;
        Ok(v)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device whose memory holds it.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device address of the first element (a `CUdeviceptr` on a CUDA device, a host
    /// address on the host device; 0 when empty), for vendor libraries (cuBLAS, cuFFT, ...) to
    /// read the elements. It stays valid while `self` lives. Work offload queued on the vector
    /// has completed when the call that queued it returned, except launches enqueued on a
    /// [`crate::Stream`], which are ordered on that stream only: queue the library's work on
    /// that stream ([`crate::Stream::native_queue`]) or wait for it first. Writing through it
    /// needs [`DeviceVec::device_ptr_mut`].
    pub fn device_ptr(&self) -> u64 {
        self.ptr.0
    }

    /// As [`DeviceVec::device_ptr`], for a library that writes the elements: the exclusive
    /// borrow makes sure no kernel argument of offload's reads them meanwhile. Write only
    /// `len()` elements of `T`, with valid values of `T` (any bits for `DeviceCopy` numbers).
    pub fn device_ptr_mut(&mut self) -> u64 {
        self.ptr.0
    }

    fn check_len(&self, other: usize) -> Result<()> {
        if other == self.len {
            return Ok(());
        }
        Err(Error::LengthMismatch {
            what: "DeviceVec copy",
            expected: self.len,
            found: other,
        })
    }

    /// Overwrites the elements with `data` (of the same length).
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.check_len(data.len())?;
        self.copy_from_host_at(0, data)
    }

    /// Overwrites the elements from index `offset` on with `data` (a halo row, say), leaving the
    /// others as they are. Past the end is `Err(OutOfRange)`, with nothing copied.
    pub fn copy_from_host_at(&mut self, offset: usize, data: &[T]) -> Result<()> {
        self.check_range("DeviceVec::copy_from_host_at", offset, data.len())?;
        let bytes = size_of_val(data);
        if bytes == 0 {
            return Ok(());
        }
        let backend = self.device.backend();
        let host = data.as_ptr() as *const u8;
        let start = Instant::now();
        let claim = self.uses.claim(true);
        claim.order_on(self.device.queue())?;
        // SAFETY: elements `offset..offset + data.len()` lie within the allocation (checked
        // above); `data` is borrowed until the synchronize below.
        unsafe { backend.copy_to_device(self.element(offset), host, bytes)? };
        // Complete before `data`'s borrow ends: from page-locked memory the copy is only queued.
        backend.synchronize()?;
        claim.completed();
        if !self.device.memory_is_host() {
            let id = self.device.id();
            trace::copy_to_device(
                id,
                backend.name(),
                host,
                bytes,
                start.elapsed(),
                CopySource::DeviceVec,
            );
        }
        Ok(())
    }

    /// Copies the elements into `out` (of the same length), after the kernels queued before.
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        self.check_len(out.len())?;
        self.copy_to_host_at(0, out)
    }

    /// Copies `out.len()` elements from index `offset` on into `out`, after the kernels queued
    /// before. Past the end is `Err(OutOfRange)`, with `out` untouched.
    pub fn copy_to_host_at(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.check_range("DeviceVec::copy_to_host_at", offset, out.len())?;
        let bytes = size_of_val(out);
        if bytes == 0 {
            return Ok(());
        }
        let backend = self.device.backend();
        let host = out.as_mut_ptr() as *mut u8;
        let start = Instant::now();
        let claim = self.uses.claim(false);
        claim.order_on(self.device.queue())?;
        // SAFETY: elements `offset..offset + out.len()` lie within the allocation (checked
        // above), and `out` holds as many.
        unsafe { backend.copy_from_device(host, self.element(offset), bytes)? };
        backend.synchronize()?;
        claim.completed();
        if !self.device.memory_is_host() {
            let id = self.device.id();
            trace::copy_from_device(id, backend.name(), host, bytes, start.elapsed());
        }
        Ok(())
    }

    /// A read-only view of the elements in `range`, for a `&[T]` kernel parameter.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, as slicing does.
    #[track_caller]
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'_, T> {
        let (start, len) = self.bounds(range);
        DeviceView::new(self.view(start, len))
    }

    /// A writable view of the elements in `range`, for a `&mut [T]` kernel parameter (only that
    /// part is written). Uses are ordered per vector, not per range: two streams writing
    /// different ranges of one vector run one after the other.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, as slicing does.
    #[track_caller]
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        let (start, len) = self.bounds(range);
        DeviceViewMut::new(self.view(start, len))
    }

    /// Start and length of `range` within the elements.
    #[track_caller]
    fn bounds(&self, range: impl RangeBounds<usize>) -> (usize, usize) {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        assert!(
            start <= end && end <= self.len,
            "range {start}..{end} out of bounds of a DeviceVec of {} elements",
            self.len
        );
        (start, end - start)
    }

    /// `Err(OutOfRange)` unless elements `offset..offset + count` are all within the array.
    fn check_range(&self, what: &'static str, offset: usize, count: usize) -> Result<()> {
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(()),
            end => Err(Error::OutOfRange {
                what,
                start: offset,
                end: end.unwrap_or(usize::MAX),
                len: self.len,
            }),
        }
    }

    /// The device address of element `index`.
    fn element(&self, index: usize) -> DevicePtr {
        DevicePtr(self.ptr.0 + (index * size_of::<T>()) as u64)
    }

    /// The elements, on the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
        let mut out = vec![unsafe { std::mem::zeroed() }; self.len];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Elements `start..start + len`, with the vector's uses.
    fn view(&self, start: usize, len: usize) -> ViewArg<'_> {
        ViewArg {
            device: self.device.id(),
            addr: self.element(start).0,
            len,
            uses: (self.bytes() > 0).then_some(&self.uses),
        }
    }
}

impl<T: DeviceCopy> Drop for DeviceVec<T> {
    fn drop(&mut self) {
        if self.bytes() == 0 {
            return;
        }
        // Streams may still use it (it was borrowed only while their work was queued).
        if self.uses.wait_all().is_err() {
            // The device failed under queued work that may still touch the memory: leave it.
            return;
        }
        // SAFETY: allocated by `uninit`; no queue uses it any more (waited for above, and the
        // device's own queue orders the release after its work).
        unsafe { self.device.backend().free(self.ptr) };
    }
}

impl<T: DeviceCopy + std::fmt::Debug> std::fmt::Debug for DeviceVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceVec<{}>[{}] on {}",
            std::any::type_name::<T>(),
            self.len,
            self.device.name()
        )
    }
}

impl<T: DeviceCopy> InArg<T> for &DeviceVec<T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.view(0, self.len).kernel_arg::<T>(false)
    }
}

impl<T: DeviceCopy> OutArg<T> for &mut DeviceVec<T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.view(0, self.len).kernel_arg::<T>(true)
    }
}

impl<T: DeviceCopy> Sealed for &DeviceVec<T> {}
impl<T: DeviceCopy> Sealed for &mut DeviceVec<T> {}
impl<'v, T: DeviceCopy, M: Borrows<'v>> StreamArg<'_, M> for &'v DeviceVec<T> {}
impl<'v, T: DeviceCopy, M: Borrows<'v>> StreamArg<'_, M> for &'v mut DeviceVec<T> {}
