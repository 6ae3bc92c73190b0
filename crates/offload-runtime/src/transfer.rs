//! Automatic data movement for a launch on a GPU backend, as rustc's offload maps by type:
//! `&[T]` to the device, `&mut [T]` to the device and back, values by value. Host slices are
//! written only after the kernel succeeded, so a failed launch leaves them as they were.

use crate::backend::{Backend, DevicePtr, Param};
use crate::kernel::{ArgData, Kernel, KernelArg};
use crate::launch::Shape;
use crate::report::LaunchReport;
use crate::{Error, Result};
use std::time::Instant;

/// Device buffers of one launch, released (after the queue drains) on every exit path.
struct Buffers<'b> {
    backend: &'b dyn Backend,
    ptrs: Vec<DevicePtr>,
}

impl Buffers<'_> {
    fn alloc(&mut self, kernel: &'static str, bytes: usize) -> Result<DevicePtr> {
        let ptr = self.backend.alloc(kernel, bytes)?;
        self.ptrs.push(ptr);
        Ok(ptr)
    }
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        // Queued copies may still read or write these buffers (and their host slices) after an
        // error: drain the queue before giving memory back and returning to the caller.
        let _ = self.backend.synchronize();
        for &ptr in &self.ptrs {
            // SAFETY: allocated by this launch from this backend, and no longer in use.
            unsafe { self.backend.free(ptr) };
        }
    }
}

pub(crate) fn launch_mapped(
    backend: &dyn Backend,
    kernel: &Kernel,
    shape: Shape,
    args: &mut [KernelArg<'_>],
    report: &mut LaunchReport,
) -> Result<()> {
    let start = Instant::now();
    let mut buffers = Buffers {
        backend,
        ptrs: Vec::with_capacity(args.len()),
    };
    let mut params = Vec::with_capacity(args.len() * 2);
    let mut copy_back = Vec::new();
    for arg in args.iter() {
        let (host, len, elem_size, back_to) = match arg.data {
            ArgData::Value { ptr, size } => {
                params.push(Param::Value { ptr, size });
                continue;
            }
            ArgData::Slice {
                ptr,
                len,
                elem_size,
            } => (ptr, len, elem_size, None),
            ArgData::SliceMut {
                ptr,
                len,
                elem_size,
                ..
            } => (ptr as *const u8, len, elem_size, Some(ptr)),
        };
        let bytes = len * elem_size;
        let device_ptr = if bytes == 0 {
            DevicePtr(0)
        } else {
            let d = buffers.alloc(kernel.name, bytes)?;
            // SAFETY: the host slice is borrowed for the launch and `d` holds `bytes`.
            unsafe { backend.copy_to_device(d, host, bytes)? };
            report.bytes_to_device += bytes;
            if let Some(back_to) = back_to {
                copy_back.push((back_to, d, bytes));
            }
            d
        };
        params.push(Param::Word(device_ptr.0));
        params.push(Param::Word(len as u64));
    }
    // Drain the copies first, so that the kernel's time is its own.
    backend.synchronize()?;
    // Launch to panic check, one launch at a time: otherwise another thread's synchronize could
    // take this launch's panic (one queue, one panic record per image).
    let collecting = backend.launch_lock();
    let launched = Instant::now();
    report.time_to_device = launched - start;
    backend.launch(kernel, shape, &params)?;
    let failed = |e: Error| match e {
        Error::Driver {
            device, message, ..
        } => Error::KernelFailed {
            kernel: kernel.name,
            device,
            message,
        },
        other => other,
    };
    // A faulting kernel shows at the first synchronizing call after it: wait before copying back
    // so that the error names the kernel and no result bytes reach the host.
    backend.synchronize().map_err(failed)?;
    let finished = Instant::now();
    report.kernel_time = finished - launched;
    // A panicking GPU thread just ends, without faulting: its image's panic record tells.
    if let Some(message) = backend.take_panic(kernel)? {
        return Err(Error::KernelFailed {
            kernel: kernel.name,
            device: backend.name().to_string(),
            message,
        });
    }
    drop(collecting);
    for (host, device, bytes) in copy_back {
        report.bytes_from_device += bytes;
        // SAFETY: the `&mut` host slice is borrowed until this function returns, after the sync
        // in `Buffers::drop` or below.
        unsafe { backend.copy_from_device(host, device, bytes)? };
    }
    backend.synchronize()?;
    report.time_from_device = finished.elapsed();
    Ok(())
}
