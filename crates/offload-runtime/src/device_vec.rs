//! `DeviceVec<T>`: an array living in one device's memory, passed to kernels as is (`&v` for a
//! `&[T]` parameter, `&mut v` for a `&mut [T]` one) with no transfer. Data moves only when asked:
//! [`DeviceVec::from_slice`], [`DeviceVec::copy_from_host`], [`DeviceVec::copy_to_host`],
//! [`DeviceVec::to_vec`], and for a part of it (halo rows) [`DeviceVec::copy_from_host_at`],
//! [`DeviceVec::copy_to_host_at`]. On the host device it is host memory.

use crate::backend::DevicePtr;
use crate::device::Device;
use crate::kernel::KernelArg;
use crate::map::{InArg, OutArg};
use crate::trace::{self, CopySource};
use crate::{Error, Result};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::size_of;
use std::time::Instant;

/// `len` elements of `T` in one device's memory, freed on drop (see the module docs).
pub struct DeviceVec<T: DeviceCopy> {
    device: Device,
    /// `len` elements at `ptr` (null when empty).
    ptr: DevicePtr,
    len: usize,
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
        // SAFETY: elements `offset..offset + data.len()` lie within the allocation (checked
        // above); `data` is borrowed until the synchronize below.
        unsafe { backend.copy_to_device(self.element(offset), host, bytes)? };
        // Complete before `data`'s borrow ends: from page-locked memory the copy is only queued.
        backend.synchronize()?;
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
        // SAFETY: elements `offset..offset + out.len()` lie within the allocation (checked
        // above), and `out` holds as many.
        unsafe { backend.copy_from_device(host, self.element(offset), bytes)? };
        backend.synchronize()?;
        if !self.device.memory_is_host() {
            let id = self.device.id();
            trace::copy_from_device(id, backend.name(), host, bytes, start.elapsed());
        }
        Ok(())
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

    fn kernel_arg<'a>(&self, writable: bool) -> KernelArg<'a> {
        KernelArg::resident::<T>(self.device.id(), self.ptr.0, self.len, writable)
    }
}

impl<T: DeviceCopy> Drop for DeviceVec<T> {
    fn drop(&mut self) {
        if self.bytes() > 0 {
            // SAFETY: allocated by `uninit`; the release is ordered after the queued kernels
            // that use it.
            unsafe { self.device.backend().free(self.ptr) };
        }
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
        self.kernel_arg(false)
    }
}

impl<T: DeviceCopy> OutArg<T> for &mut DeviceVec<T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg(true)
    }
}
