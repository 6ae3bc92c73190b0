//! What a generated launcher hands the runtime: the kernel's descriptor (its entry name, device
//! images and host build, as plain data) and its arguments, each a value, a host slice with the
//! way it moves, or data already on a device. Nothing here knows the kernel's Rust types.

use crate::backend::HostThread;
use crate::image::ImageSet;
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

/// A kernel's descriptor, one `static` per `#[offload::kernel]`.
pub struct Kernel {
    /// The entry point's name in the device images.
    pub name: &'static str,
    /// The device images of the crate that defines the kernel.
    pub images: &'static ImageSet,
    /// Its host build, which the host CPU plugin runs.
    pub host_thread: HostThread,
    /// Its parameters' names, in launch-argument order (for errors that name an argument).
    pub params: &'static [&'static str],
}

/// One launch argument, borrowed from the caller for the duration of the launch.
pub struct KernelArg<'a> {
    pub(crate) data: ArgData,
    _borrow: PhantomData<&'a mut ()>,
}

#[derive(Clone, Copy)]
pub(crate) enum ArgData {
    /// A `DeviceCopy` value passed by value: where it is, how big and how aligned.
    Value {
        ptr: *const u8,
        size: usize,
        align: usize,
    },
    /// `&[T]`: used where a data region mapped it, else copied to the device for the launch.
    Slice {
        ptr: *const u8,
        len: usize,
        elem_size: usize,
        /// `present(..)`: an error unless a data region mapped it.
        present_only: bool,
    },
    /// `&mut [T]`: moved as `kind` says for the launch.
    SliceMut {
        ptr: *mut u8,
        len: usize,
        elem_size: usize,
        /// Seen by the kernel as `&[Atomic<T>]`, shared by all threads: not an output that
        /// sizes the default grid.
        atomic: bool,
        /// How it moves (map kinds of `crate::map`).
        kind: OutKind,
    },
    /// Data already on a device (`DeviceVec`, a region's mapped handle): passed as is. On the
    /// host device `addr` is a host address.
    Resident {
        device: usize,
        addr: u64,
        len: usize,
        elem_size: usize,
        writable: bool,
    },
}

/// How a `&mut [T]` argument moves (the map kinds of `crate::map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutKind {
    ToFrom,
    From,
    To,
    Alloc,
}

impl ArgData {
    /// Elements of a slice argument (None for values).
    pub(crate) fn slice_len(&self) -> Option<usize> {
        match *self {
            ArgData::Value { .. } => None,
            ArgData::Slice { len, .. }
            | ArgData::SliceMut { len, .. }
            | ArgData::Resident { len, .. } => Some(len),
        }
    }

    /// Bytes of a host slice argument (0 for the others).
    pub(crate) fn slice_bytes(&self) -> usize {
        match *self {
            ArgData::Slice { len, elem_size, .. } | ArgData::SliceMut { len, elem_size, .. } => {
                len * elem_size
            }
            _ => 0,
        }
    }

    /// Whether it is an output split among the threads (a `&mut [T]` parameter; atomics are
    /// shared by all threads, so not one).
    pub(crate) fn is_output(&self) -> bool {
        match *self {
            ArgData::SliceMut { atomic, .. } => !atomic,
            ArgData::Resident { writable, .. } => writable,
            _ => false,
        }
    }
}

impl<'a> KernelArg<'a> {
    /// A by-value argument (a scalar or a `DeviceCopy` struct).
    pub fn value<T: DeviceCopy>(value: &'a T) -> Self {
        Self::new(ArgData::Value {
            ptr: value as *const T as *const u8,
            size: size_of::<T>(),
            align: align_of::<T>(),
        })
    }

    /// A `&[T]` argument: copied to a GPU, read there.
    pub fn slice<T: DeviceCopy>(slice: &'a [T]) -> Self {
        Self::new(ArgData::Slice {
            ptr: slice.as_ptr() as *const u8,
            len: slice.len(),
            elem_size: size_of::<T>(),
            present_only: false,
        })
    }

    /// A `&mut [T]` argument: copied to a GPU and back after the kernel succeeded.
    pub fn slice_mut<T: DeviceCopy>(slice: &'a mut [T]) -> Self {
        Self::new(ArgData::SliceMut {
            ptr: slice.as_mut_ptr() as *mut u8,
            len: slice.len(),
            elem_size: size_of::<T>(),
            atomic: false,
            kind: OutKind::ToFrom,
        })
    }

    /// A `&mut [T]` that the kernel takes as `&[Atomic<T>]`.
    pub fn atomics<T: DeviceCopy>(slice: &'a mut [T]) -> Self {
        Self::new(ArgData::SliceMut {
            ptr: slice.as_mut_ptr() as *mut u8,
            len: slice.len(),
            elem_size: size_of::<T>(),
            atomic: true,
            kind: OutKind::ToFrom,
        })
    }

    /// `len` elements of `T` at `addr` on the device with id `device` (`DeviceVec`, a region's
    /// mapped handle, a stream scope's device slice).
    pub(crate) fn resident<T: DeviceCopy>(
        device: usize,
        addr: u64,
        len: usize,
        writable: bool,
    ) -> Self {
        Self::new(ArgData::Resident {
            device,
            addr,
            len,
            elem_size: size_of::<T>(),
            writable,
        })
    }

    pub(crate) fn new(data: ArgData) -> Self {
        KernelArg {
            data,
            _borrow: PhantomData,
        }
    }
}
