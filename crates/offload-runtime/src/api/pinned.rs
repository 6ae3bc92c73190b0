//! `PinnedVec<T>`: host memory that GPUs copy from and to directly (page-locked), so that copies
//! queued on a stream run asynchronously and overlap with kernels; from ordinary (pageable) memory
//! the driver stages every copy through its own buffer, synchronously. Without a GPU it is an
//! ordinary heap allocation.

use crate::plugins::Backend;
use crate::{devices, Device, Result};
use offload_kernel::DeviceCopy;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::mem::size_of;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A fixed-length array in page-locked host memory; derefs to `[T]`.
pub struct PinnedVec<T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    /// The GPU backend that allocated it; `None` for the heap (no GPU, or nothing to allocate).
    pinned_by: Option<&'static dyn Backend>,
}

// SAFETY: it owns its elements as a `Vec<T>` does; `DeviceCopy` types are Send and Sync.
unsafe impl<T: DeviceCopy> Send for PinnedVec<T> {}
// SAFETY: as above; shared access only reads.
unsafe impl<T: DeviceCopy> Sync for PinnedVec<T> {}

impl<T: DeviceCopy> PinnedVec<T> {
    /// `len` copies of `value`.
    pub fn filled(value: T, len: usize) -> Result<Self> {
        let v = Self::uninit(len)?;
        for i in 0..len {
            // SAFETY: `i < len`, inside the allocation.
            unsafe { v.ptr.as_ptr().add(i).write(value) };
        }
        Ok(v)
    }

    /// A pinned copy of `data`.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        let v = Self::uninit(data.len())?;
        // SAFETY: the allocation holds `data.len()` elements and is fresh (no overlap).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), v.ptr.as_ptr(), data.len()) };
        Ok(v)
    }

    /// Room for `len` elements, not yet initialised: callers write every element.
    fn uninit(len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .expect("PinnedVec size overflows usize");
        if bytes == 0 {
            return Ok(PinnedVec {
                ptr: NonNull::dangling(),
                len,
                pinned_by: None,
            });
        }
        let gpu = devices()
            .iter()
            .find(|d| !d.memory_is_host())
            .map(Device::backend);
        let (ptr, pinned_by) = match gpu {
            // Page-locked allocations are page aligned, which suits any `T`.
            Some(backend) => (backend.alloc_pinned(bytes)? as *mut T, Some(backend)),
            None => {
                // SAFETY: `bytes > 0`.
                let p = unsafe { alloc(Self::layout(len)) } as *mut T;
                (p, None)
            }
        };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(Self::layout(len)));
        Ok(PinnedVec {
            ptr,
            len,
            pinned_by,
        })
    }

    fn layout(len: usize) -> Layout {
        Layout::array::<T>(len).expect("PinnedVec size overflows isize")
    }

    /// Whether the memory is page-locked (false without a GPU).
    pub fn is_pinned(&self) -> bool {
        self.pinned_by.is_some()
    }
}

impl<T: DeviceCopy> Deref for PinnedVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements (or dangling and empty), owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for PinnedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> Drop for PinnedVec<T> {
    fn drop(&mut self) {
        if self.len * size_of::<T>() == 0 {
            return;
        }
        match self.pinned_by {
            // SAFETY: allocated by this backend; no copy can use it any more (copies borrow the
            // vector, and streams wait for theirs before their scope ends).
            Some(backend) => unsafe { backend.free_pinned(self.ptr.as_ptr() as *mut u8) },
            // SAFETY: allocated in `uninit` with this layout.
            None => unsafe { dealloc(self.ptr.as_ptr() as *mut u8, Self::layout(self.len)) },
        }
    }
}

impl<T: DeviceCopy + std::fmt::Debug> std::fmt::Debug for PinnedVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
