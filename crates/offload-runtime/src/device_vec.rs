//! `DeviceVec<T>`: an array living in one device's memory, passed to kernels as is (`&v` for a
//! `&[T]` parameter, `&mut v` for a `&mut [T]` one) with no transfer. Data moves only when asked:
//! [`DeviceVec::from_slice`], [`DeviceVec::copy_from_host`], [`DeviceVec::copy_to_host`],
//! [`DeviceVec::to_vec`], and for a part of it (halo rows) [`DeviceVec::copy_from_host_at`],
//! [`DeviceVec::copy_to_host_at`]. On the host device it is host memory.

use crate::backend::{Backend, DevicePtr};
use crate::kernel::KernelArg;
use crate::{trace, Device, Error, Result};
use offload_kernel::DeviceCopy;
use std::mem::size_of;
use std::time::Instant;

pub struct DeviceVec<T: DeviceCopy> {
    device: Device,
    storage: Storage<T>,
}

enum Storage<T> {
    Host(Vec<T>),
    /// `len` elements at `ptr` (null when empty).
    Gpu {
        ptr: DevicePtr,
        len: usize,
    },
}

/// What `Error::OutOfMemory` names when a `DeviceVec` does not fit.
const DEVICE_VEC: &str = "offload::DeviceVec";

impl<T: DeviceCopy> DeviceVec<T> {
    /// `len` zeroed elements on `device` (all-zero bytes are a valid `T`: see `DeviceCopy`).
    pub fn zeroed(device: &Device, len: usize) -> Result<Self> {
        let storage = match device.offload_backend() {
            // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
            None => Storage::Host(vec![unsafe { std::mem::zeroed() }; len]),
            Some(backend) => {
                let ptr = gpu_alloc::<T>(backend, len)?;
                let v = DeviceVec {
                    device: device.clone(),
                    storage: Storage::Gpu { ptr, len },
                };
                if len > 0 {
                    // SAFETY: `ptr` holds `len` elements.
                    unsafe { backend.fill_zero(ptr, len * size_of::<T>())? };
                }
                return Ok(v);
            }
        };
        Ok(DeviceVec {
            device: device.clone(),
            storage,
        })
    }

    /// A device copy of `data` on `device`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        let Some(backend) = device.offload_backend() else {
            return Ok(DeviceVec {
                device: device.clone(),
                storage: Storage::Host(data.to_vec()),
            });
        };
        let ptr = gpu_alloc::<T>(backend, data.len())?;
        let mut v = DeviceVec {
            device: device.clone(),
            storage: Storage::Gpu {
                ptr,
                len: data.len(),
            },
        };
        v.copy_from_host(data)?;
        Ok(v)
    }

    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Host(v) => v.len(),
            Storage::Gpu { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    fn check_len(&self, other: usize) -> Result<()> {
        if other == self.len() {
            return Ok(());
        }
        Err(Error::LengthMismatch {
            what: "DeviceVec copy",
            expected: self.len(),
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
        let end = self.check_range("DeviceVec::copy_from_host_at", offset, data.len())?;
        let device_id = self.device.id();
        match &mut self.storage {
            Storage::Host(v) => v[offset..end].copy_from_slice(data),
            Storage::Gpu { ptr, .. } if !data.is_empty() => {
                let backend = gpu(&self.device);
                let (host, bytes) = (data.as_ptr() as *const u8, size_of_val(data));
                let start = Instant::now();
                // SAFETY: elements `offset..end` lie within the allocation (checked above);
                // `data` is borrowed until the synchronize below.
                unsafe { backend.copy_to_device(element::<T>(*ptr, offset), host, bytes)? };
                // Complete before `data`'s borrow ends: from page-locked memory the copy is only
                // queued.
                backend.synchronize()?;
                trace::copy_to_device(device_id, backend.name(), host, bytes, start.elapsed());
            }
            Storage::Gpu { .. } => {}
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
        let end = self.check_range("DeviceVec::copy_to_host_at", offset, out.len())?;
        match &self.storage {
            Storage::Host(v) => out.copy_from_slice(&v[offset..end]),
            Storage::Gpu { ptr, .. } if !out.is_empty() => {
                let backend = gpu(&self.device);
                let (host, bytes) = (out.as_mut_ptr() as *mut u8, size_of_val(out));
                let start = Instant::now();
                // SAFETY: elements `offset..end` lie within the allocation (checked above), and
                // `out` holds as many.
                unsafe { backend.copy_from_device(host, element::<T>(*ptr, offset), bytes)? };
                backend.synchronize()?;
                trace::copy_from_device(
                    self.device.id(),
                    backend.name(),
                    host,
                    bytes,
                    start.elapsed(),
                );
            }
            Storage::Gpu { .. } => {}
        }
        Ok(())
    }

    /// The end of elements `offset..offset + count`, if they are all within the array.
    fn check_range(&self, what: &'static str, offset: usize, count: usize) -> Result<usize> {
        let len = self.len();
        match offset.checked_add(count) {
            Some(end) if end <= len => Ok(end),
            end => Err(Error::OutOfRange {
                what,
                start: offset,
                end: end.unwrap_or(usize::MAX),
                len,
            }),
        }
    }

    /// The elements, on the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
        let mut out = vec![unsafe { std::mem::zeroed() }; self.len()];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    pub(crate) fn kernel_arg<'a>(&self, writable: bool) -> KernelArg<'a> {
        let addr = match &self.storage {
            Storage::Host(v) => v.as_ptr() as u64,
            Storage::Gpu { ptr, .. } => ptr.0,
        };
        KernelArg::resident::<T>(self.device.id(), addr, self.len(), writable)
    }
}

impl<T: DeviceCopy> Drop for DeviceVec<T> {
    fn drop(&mut self) {
        if let Storage::Gpu { ptr, len } = self.storage {
            if len > 0 {
                // SAFETY: allocated by `gpu_alloc`; the release is ordered after the queued
                // kernels that use it.
                unsafe { gpu(&self.device).free(ptr) };
            }
        }
    }
}

impl<T: DeviceCopy + std::fmt::Debug> std::fmt::Debug for DeviceVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceVec<{}>[{}] on {}",
            std::any::type_name::<T>(),
            self.len(),
            self.device.name()
        )
    }
}

fn gpu(device: &Device) -> &dyn Backend {
    device
        .offload_backend()
        .expect("a DeviceVec's storage matches its device")
}

/// The device address of element `index` of an array at `base`.
fn element<T>(base: DevicePtr, index: usize) -> DevicePtr {
    DevicePtr(base.0 + (index * size_of::<T>()) as u64)
}

fn gpu_alloc<T>(backend: &dyn Backend, len: usize) -> Result<DevicePtr> {
    let bytes = len
        .checked_mul(size_of::<T>())
        .ok_or_else(|| Error::OutOfMemory {
            kernel: DEVICE_VEC,
            device: backend.name().to_string(),
            bytes: usize::MAX,
        })?;
    if bytes == 0 {
        return Ok(DevicePtr(0));
    }
    backend.alloc(DEVICE_VEC, bytes)
}
