//! What a generated launcher hands the runtime: the kernel's descriptor (its entry name, device
//! images and host build, as plain data) and its arguments, each a value, a host slice with the
//! way it moves, or data already on a device. Nothing here knows the kernel's Rust types.

use crate::mapping::ordering::{Claim, Uses};
use crate::plugins::image::ImageSet;
use crate::plugins::{HostThread, HostThreads};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

/// A kernel's descriptor, one `static` per `#[offload::kernel]`.
pub struct Kernel {
    /// The entry point's name in the device images.
    pub name: &'static str,
    /// The device images of the crate that defines the kernel.
    pub images: &'static ImageSet,
    /// Its host build, which the host CPU plugin runs: one GPU thread per call.
    pub host_thread: HostThread,
    /// The same for a range of threads, which the host CPU plugin runs instead when the
    /// kernel's threads never wait for one another.
    pub host_threads: HostThreads,
    /// Its parameters' names, in launch-argument order (for errors that name an argument).
    pub params: &'static [&'static str],
    /// How much of its longest output each thread of a default launch covers.
    pub share: ThreadShare,
}

/// How much of a kernel's longest output each thread of a default GPU launch covers (`Launch`;
/// on the host CPU every thread gets one element, or one strip of a `#[grid]` output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadShare {
    /// `DEFAULT_ELEMENTS_PER_THREAD` elements, and at least `DEFAULT_BYTES_PER_THREAD` bytes.
    Batched,
    /// One element: a `#[scatter(index)]` output, each of whose stores waits for its index's load.
    OneElement,
    /// At least this many bytes: a `#[grid]` output's strip of rows
    /// (`offload_kernel::STRIP_BYTES`, or `STRIP_BYTES_3D` for 3D outputs).
    Strip(u64),
    /// A kernel with `#[reduce]` parameters: the grid is sized from its longest data (inputs
    /// too; the reductions' targets are not data to split) and fills the device once, its
    /// threads walking the rest grid-stride, so that few per-block totals remain to combine.
    Reduction,
}

impl Kernel {
    /// Whether the kernel's threads never wait for one another (no barrier, warp operation or
    /// shared memory, read from its PTX image), so that the host backend runs them as plain
    /// calls without the block model. `false` without a PTX image.
    pub fn threads_independent(&self) -> bool {
        crate::mapping::independent_threads::threads_independent(self.images, self.name)
    }
}

/// One launch argument, borrowed from the caller for the duration of the launch.
pub struct KernelArg<'a> {
    pub(crate) data: ArgData,
    /// The queues using device-resident data that outlives the launch (see `crate::mapping::ordering`).
    pub(crate) uses: Option<&'a Uses>,
    /// An array view's extents, passed after its address and length (one word each); empty for
    /// other arguments.
    pub(crate) extents: Vec<u64>,
    /// Why the argument cannot be passed (a non-contiguous array view): the launch refuses it
    /// before anything moves.
    pub(crate) refused: Option<String>,
    /// A `#[reduce]` parameter's target: one value that the launch's last block writes, not data
    /// that sizes the default grid.
    pub(crate) reduction_target: bool,
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
        /// How it moves (map kinds of `crate::api::map`).
        kind: OutKind,
    },
    /// A `#[reduce]` parameter's scratch: device memory the launch allocates, its first
    /// `offload_kernel::reduce::SCRATCH_HEADER` bytes zeroed, then one slot of `elem_size` bytes
    /// per block; passed as (address, block count).
    Scratch { elem_size: usize },
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

/// How a `&mut [T]` argument moves (the map kinds of `crate::api::map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutKind {
    ToFrom,
    From,
    To,
    Alloc,
}

impl ArgData {
    /// Elements of a slice argument and the bytes of one (None for values).
    fn slice_parts(&self) -> Option<(usize, usize)> {
        match *self {
            ArgData::Value { .. } | ArgData::Scratch { .. } => None,
            ArgData::Slice { len, elem_size, .. }
            | ArgData::SliceMut { len, elem_size, .. }
            | ArgData::Resident { len, elem_size, .. } => Some((len, elem_size)),
        }
    }

    /// Elements of a slice argument (None for values).
    pub(crate) fn slice_len(&self) -> Option<usize> {
        self.slice_parts().map(|(len, _)| len)
    }

    /// Bytes of one element of a slice argument (None for values).
    pub(crate) fn elem_size(&self) -> Option<usize> {
        self.slice_parts().map(|(_, size)| size)
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

/// The tracked device data among `args` (see `crate::mapping::ordering`), each with whether it is written.
pub(crate) fn uses_of<'u>(
    args: &'u [KernelArg<'_>],
) -> impl Iterator<Item = (&'u Uses, bool)> + Clone {
    let written = |a: &KernelArg<'_>| matches!(a.data, ArgData::Resident { writable: true, .. });
    args.iter()
        .filter_map(move |a| a.uses.map(|u| (u, written(a))))
}

/// The tracked device data among `args`, claimed for one launch.
#[inline]
pub(crate) fn claim_uses<'u>(args: &'u [KernelArg<'_>]) -> Claim<'u> {
    Claim::of(uses_of(args))
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
    /// mapped handle, a stream scope's device slice), with its `uses` where they are tracked.
    pub(crate) fn resident<T: DeviceCopy>(
        device: usize,
        addr: u64,
        len: usize,
        writable: bool,
        uses: Option<&'a Uses>,
    ) -> Self {
        KernelArg {
            uses,
            ..Self::new(ArgData::Resident {
                device,
                addr,
                len,
                elem_size: size_of::<T>(),
                writable,
            })
        }
    }

    /// The same argument with an array view's extents, which the kernel receives after the
    /// slice (see `offload::nd`).
    pub fn with_extents(mut self, extents: &[usize]) -> Self {
        self.extents = extents.iter().map(|&e| e as u64).collect();
        self
    }

    /// A `#[reduce]` parameter's scratch for values of `T` (see `ArgData::Scratch`).
    pub fn reduction_scratch<T: DeviceCopy>() -> Self {
        Self::new(ArgData::Scratch {
            elem_size: size_of::<T>(),
        })
    }

    /// The same argument as a `#[reduce]` parameter's target, refused unless it is one element.
    pub(crate) fn into_reduction_target(mut self) -> Self {
        if self.data.slice_len() != Some(1) && self.refused.is_none() {
            self.refused = Some(format!(
                "is a reduction's target of {} elements: it must hold exactly one (a DeviceVec of \
                 length 1, or a one-element view)",
                self.data.slice_len().unwrap_or(0)
            ));
        }
        self.reduction_target = true;
        self
    }

    /// An argument the launch refuses with `Err(InvalidArgument)` giving `reason`, before
    /// anything moves (an array view that is not contiguous, say).
    pub fn refused(reason: String) -> Self {
        KernelArg {
            refused: Some(reason),
            ..Self::slice::<u8>(&[])
        }
    }

    pub(crate) fn new(data: ArgData) -> Self {
        KernelArg {
            data,
            uses: None,
            extents: Vec::new(),
            refused: None,
            reduction_target: false,
            _borrow: PhantomData,
        }
    }
}
