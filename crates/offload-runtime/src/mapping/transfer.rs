//! Data movement for a launch, once for every plugin, as OpenMP maps a target construct's
//! arguments: a slice a data region mapped is present (its count is raised for the launch,
//! nothing moves); device-resident arguments pass as they are; any other slice gets a device copy
//! for this launch as its map kind says (by type: `&[T]` to the device, `&mut [T]` there and
//! back). Host slices are written only after the kernel succeeded, so a failed launch leaves them
//! as they were, and every device copy made for the launch is released on every exit path.
//!
//! On a device whose memory is the host's (the host CPU) host data is used in place: inputs pass
//! as they are, and so do outputs moved both ways (the default), with a backup (saved by the
//! plugin, whole or as the kernel reaches them) that restores the caller's data if the kernel
//! fails, as on a GPU (`output_backup`); outputs moved one way only
//! get a copy, written back (`from`) once the kernel succeeded. Nothing is traced there: nothing
//! moves.

use crate::mapping::bounce::Bounce;
use crate::mapping::device::{check_resident, Device};
use crate::mapping::kernel::{claim_uses, ArgData, KernelArg, OutKind};
use crate::mapping::loaded::Entry;
use crate::mapping::output_backup::OutputBackups;
use crate::mapping::present::{self, Key};
use crate::mapping::report::{device_time_measured, LaunchReport};
use crate::mapping::trace::{self, CopySource, LaunchSummary};
use crate::plugins::{Backend, DevicePtr, PackedArgs, SavedOutputs, Shape};
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// Device memory of one launch: its own copies, its bounce buffer for the small ones, and the
/// present entries it holds a count on. Released (after the queue drains) on every exit path.
struct Buffers<'b> {
    backend: &'b dyn Backend,
    device_id: usize,
    /// Whether its maps are traced (not on a host-memory device).
    traced: bool,
    /// Copies made for this launch: device address, host address, bytes.
    own: Vec<(DevicePtr, usize, usize)>,
    retained: Vec<Key>,
    /// Whether the queue has completed everything queued so far (the launch succeeded and its
    /// results are back): then there is nothing to wait for before releasing.
    drained: bool,
    /// Page-locked room for the small copies; given back once the queue has drained (a field:
    /// dropped after `drop` waited).
    bounce: Bounce<'b>,
    /// Whether a copy in went straight from the caller's memory (not through `bounce`).
    direct_copy_in: bool,
}

impl Drop for Buffers<'_> {
    fn drop(&mut self) {
        // Queued copies and the kernel may still use these buffers after an error: drain the
        // queue before giving memory back and returning to the caller.
        if !self.drained {
            let _ = self.backend.synchronize();
        }
        for &(device, host, bytes) in &self.own {
            // SAFETY: allocated by this launch from this backend, and no longer in use.
            unsafe { self.backend.free(device) };
            // A reduction's scratch maps no host bytes.
            if self.traced && bytes > 0 {
                trace::unmap(self.backend.name(), host, bytes);
            }
        }
        for &key in &self.retained {
            let last = present::table().release(key);
            if let Some(entry) = last {
                // This launch outlived the region that mapped the data (another thread's).
                let _ = present::unmap(self.backend, self.device_id, entry, true);
            }
        }
    }
}

impl Buffers<'_> {
    /// Device memory of `bytes` for this launch alone, its first `zeroed` bytes zeroed (a
    /// reduction's scratch).
    fn scratch(&mut self, kernel: &'static str, bytes: usize, zeroed: usize) -> Result<DevicePtr> {
        let device = self.backend.alloc(kernel, bytes)?;
        // Not traced: no host data is mapped.
        self.own.push((device, 0, 0));
        // SAFETY: `device` holds `bytes` >= `zeroed`.
        unsafe { self.backend.fill_zero(device, zeroed)? };
        Ok(device)
    }

    /// A device copy of host bytes for this launch: copied in for `copy_in`, zeroed otherwise;
    /// with its bounce slot when it is small (`copy_back`: one is wanted for the copy back too).
    fn map(
        &mut self,
        kernel: &'static str,
        host: *const u8,
        bytes: usize,
        copy_in: bool,
        copy_back: bool,
        report: &mut LaunchReport,
    ) -> Result<(DevicePtr, Option<*mut u8>)> {
        let backend = self.backend;
        let device = backend.alloc(kernel, bytes)?;
        self.own.push((device, host as usize, bytes));
        if self.traced {
            let kind = if copy_in { "to" } else { "alloc" };
            trace::map(backend.name(), kind, host as usize, bytes);
        }
        // Not on a host-memory device, where a copy is a memcpy already.
        let slot = if self.traced && (copy_in || copy_back) {
            self.bounce.slot(bytes)
        } else {
            None
        };
        if copy_in {
            let start = Instant::now();
            let source = match slot {
                Some(slot) => {
                    // SAFETY: the host slice holds `bytes` readable bytes, the slot has room for
                    // them, and they are distinct allocations.
                    unsafe { std::ptr::copy_nonoverlapping(host, slot, bytes) };
                    slot as *const u8
                }
                None => {
                    self.direct_copy_in = true;
                    host
                }
            };
            // SAFETY: the source (the host slice, borrowed for the launch, or its bounce slot,
            // kept until the queue drained) holds `bytes`, and `device` holds `bytes`.
            unsafe { backend.copy_to_device(device, source, bytes)? };
            if self.traced {
                let time = start.elapsed();
                trace::copy_to_device(
                    self.device_id,
                    backend.name(),
                    host,
                    bytes,
                    time,
                    CopySource::LaunchArgument,
                );
                report.bytes_to_device += bytes;
            }
        } else {
            // SAFETY: `device` holds `bytes`.
            unsafe { backend.fill_zero(device, bytes)? };
        }
        Ok((device, slot))
    }
}

/// A non-empty host slice argument that needs a place on the device, for the caller of
/// [`pack`] to put there.
pub(crate) enum HostData {
    /// `&[T]`; `present_only` for `present(..)`.
    Input {
        ptr: *const u8,
        bytes: usize,
        present_only: bool,
    },
    /// `&mut [T]`, moved as `kind` says.
    Output {
        ptr: *mut u8,
        bytes: usize,
        kind: OutKind,
    },
    /// A reduction's scratch of `bytes` (see `ArgData::Scratch`): device memory for this launch,
    /// its header zeroed.
    Scratch { bytes: usize },
}

/// The packed parameters of a launch of `kernel` on `device`, and how many arguments were
/// already on it: values by value, device-resident data as it is, inputs in place on a device
/// whose memory is the host's, empty slices as null elsewhere, other host slices where `place`
/// put them. Slices pass as (address, length), a reduction's scratch for a grid of `blocks` as
/// (address, `blocks`).
pub(crate) fn pack(
    device: &Device,
    kernel: &'static str,
    args: &[KernelArg<'_>],
    blocks: u64,
    place: impl FnMut(HostData) -> Result<DevicePtr>,
) -> Result<(PackedArgs, usize)> {
    let mut params = PackedArgs::with_capacity(args.len() * 2);
    let resident = pack_into(&mut params, device, kernel, args, blocks, place)?;
    Ok((params, resident))
}

/// [`pack`] appending to `params`; the count of device-resident arguments.
pub(crate) fn pack_into(
    params: &mut PackedArgs,
    device: &Device,
    kernel: &'static str,
    args: &[KernelArg<'_>],
    blocks: u64,
    mut place: impl FnMut(HostData) -> Result<DevicePtr>,
) -> Result<usize> {
    let host_memory = device.memory_is_host();
    let in_place = |ptr: *const u8| DevicePtr(ptr as usize as u64);
    let mut resident = 0;
    for arg in args {
        let (device_ptr, len) = match arg.data {
            ArgData::Value { ptr, size, align } => {
                // SAFETY: a `DeviceCopy` value of `size` bytes, borrowed for the launch.
                unsafe { params.push_raw(ptr, size, align) };
                continue;
            }
            ArgData::Resident {
                device: on,
                addr,
                len,
                ..
            } => {
                check_resident(kernel, device, on)?;
                resident += 1;
                (DevicePtr(addr), len)
            }
            ArgData::Scratch { elem_size } => {
                let bytes = offload_kernel::reduce::SCRATCH_HEADER + blocks as usize * elem_size;
                (place(HostData::Scratch { bytes })?, blocks as usize)
            }
            ArgData::Slice { ptr, len, .. } if host_memory => (in_place(ptr), len),
            ArgData::SliceMut { ptr, len, .. } if host_memory && arg.data.slice_bytes() == 0 => {
                (in_place(ptr), len)
            }
            ArgData::Slice { len, .. } | ArgData::SliceMut { len, .. }
                if arg.data.slice_bytes() == 0 =>
            {
                (DevicePtr(0), len)
            }
            ArgData::Slice {
                ptr,
                len,
                elem_size,
                present_only,
            } => {
                let bytes = len * elem_size;
                let input = HostData::Input {
                    ptr,
                    bytes,
                    present_only,
                };
                (place(input)?, len)
            }
            ArgData::SliceMut {
                ptr,
                len,
                elem_size,
                kind,
                ..
            } => {
                let bytes = len * elem_size;
                (place(HostData::Output { ptr, bytes, kind })?, len)
            }
        };
        params.push_address(device_ptr.0);
        params.push_word(len as u64);
        for &extent in &arg.extents {
            params.push_word(extent);
        }
    }
    Ok(resident)
}

/// Run `entry` (of `kernel`) on `device` in `shape` with `args`: place the data, launch, wait,
/// report a panic, copy the results back.
pub(crate) fn launch(
    device: &Device,
    kernel: &'static str,
    entry: &Entry,
    shape: Shape,
    args: &mut [KernelArg<'_>],
    report: &mut LaunchReport,
) -> Result<()> {
    let backend = device.backend();
    let device_id = device.id();
    let host_memory = device.memory_is_host();
    let traced = !host_memory;
    // When the first copy to the device began; a launch on device data reads no clock for it.
    let mut copies_began: Option<Instant> = None;
    // Reductions' scratch on a device whose memory is the host's, dropped after `backups` (which
    // puts back its zeroed header if the host plugin runs the kernel again another way).
    let mut host_scratch: Vec<Vec<u128>> = Vec::new();
    // Declared before `buffers`, so dropped (restoring the outputs of a failed launch) after it
    // drained the queue.
    let mut backups = OutputBackups::default();
    let mut buffers = Buffers {
        backend,
        device_id,
        traced,
        // Allocated only by launches that copy.
        own: Vec::new(),
        retained: Vec::new(),
        drained: false,
        bounce: device.bounce(),
        direct_copy_in: false,
    };
    let mut summary = LaunchSummary::default();
    let mut copy_back = Vec::new();
    // Whether an output is worked on in a copy (not saved in `backups`).
    let mut outputs_copied = false;
    let (params, resident) = pack(
        device,
        kernel,
        args,
        shape.grid.count(),
        |data| match data {
            HostData::Scratch { bytes } if host_memory => {
                let mut memory = vec![0u128; bytes.div_ceil(16)];
                let ptr = memory.as_mut_ptr() as *mut u8;
                host_scratch.push(memory);
                // SAFETY: zeroed bytes of this launch, which `backups` does not outlive; only the
                // kernel writes them meanwhile.
                unsafe { backups.add(ptr, offload_kernel::reduce::SCRATCH_HEADER) };
                Ok(DevicePtr(ptr as usize as u64))
            }
            HostData::Scratch { bytes } => {
                let header = offload_kernel::reduce::SCRATCH_HEADER;
                Ok(buffers.scratch(kernel, bytes, header)?)
            }
            HostData::Input {
                ptr,
                bytes,
                present_only,
            } => {
                let found =
                    present::table().retain(device_id, backend.name(), ptr as usize, bytes)?;
                match found {
                    Some(found) => {
                        buffers.retained.push(found.key);
                        trace::present(backend.name(), ptr as usize, bytes, found.refs);
                        summary.present += 1;
                        Ok(found.device)
                    }
                    None if present_only => Err(Error::NotPresent {
                        device: backend.name().to_string(),
                        host: ptr as usize,
                        bytes,
                    }),
                    None => {
                        summary.copied += 1;
                        copies_began.get_or_insert_with(Instant::now);
                        Ok(buffers.map(kernel, ptr, bytes, true, false, report)?.0)
                    }
                }
            }
            // A `&mut` borrow cannot alias mapped data (every map holds a borrow of its host
            // bytes), so outputs are never present: each gets its own device copy.
            HostData::Output {
                ptr,
                bytes,
                kind: OutKind::ToFrom,
            } if host_memory => {
                // SAFETY: a `&mut` host slice borrowed for the launch, which `backups` does not
                // outlive; only the kernel writes it meanwhile.
                unsafe { backups.add(ptr, bytes) };
                Ok(DevicePtr(ptr as usize as u64))
            }
            HostData::Output { ptr, bytes, kind } => {
                outputs_copied = true;
                let copy_in = matches!(kind, OutKind::ToFrom | OutKind::To);
                let back = matches!(kind, OutKind::ToFrom | OutKind::From);
                copies_began.get_or_insert_with(Instant::now);
                let (device, slot) = buffers.map(kernel, ptr, bytes, copy_in, back, report)?;
                if back {
                    copy_back.push((ptr, device, bytes, slot));
                }
                summary.copied += 1;
                Ok(device)
            }
        },
    )?;
    summary.resident += resident;
    if host_memory {
        // Device data on the host CPU is host memory too: saved like the outputs, so that a
        // launch the plugin runs again another way starts from the same data.
        for arg in args.iter() {
            if let ArgData::Resident {
                addr,
                len,
                elem_size,
                writable: true,
                ..
            } = arg.data
            {
                // SAFETY: writable device data of this launch, which no other argument writes
                // (`check_arguments`) and nothing else reaches while the launch runs.
                unsafe { backups.add(addr as usize as *mut u8, len * elem_size) };
            }
        }
    }
    // Device data that streams use: after their conflicting work, and noted as done below.
    let claim = claim_uses(args);
    claim.order_on(device.queue())?;
    // Drain the copies first, so that the kernel's time is its own; not for copies from the
    // bounce buffer (small: waiting for them apart would cost as much as they do) or when nothing
    // was copied (the queue holds no work of this launch).
    if buffers.direct_copy_in {
        backend.synchronize()?;
    }
    // Launch to panic check, one launch at a time: otherwise another thread's synchronize could
    // take this launch's panic (one queue, one panic record per image).
    let collecting = entry.image.reports_panics().then(|| device.launch_lock());
    let launched = Instant::now();
    report.time_to_device = copies_began.map_or(Duration::ZERO, |began| launched - began);
    let failed = |e: Error| kernel_failed(kernel, e);
    // Timed while `measure_device_time` or the trace is on. Timing is a diagnostic: a device
    // without events just reports none.
    let timed = device_time_measured() || trace::enabled();
    let begin = timed.then(|| backend.record_event().ok()).flatten();
    // SAFETY: `params` were packed from the arguments of this kernel's launcher, and the device
    // copies they name live until `buffers` is dropped, after the queue drained. The kernel may
    // run again only when every output is one that `backups` saves and puts back.
    unsafe {
        if outputs_copied {
            backups.save_all();
            backend.launch(entry.handle, shape, &params)
        } else {
            backend.launch_restartable(entry.handle, shape, &params, &backups)
        }
    }
    .map_err(failed)?;
    let end = begin.as_ref().and_then(|_| backend.record_event().ok());
    // Small results go to their bounce slots right behind the kernel, and reach the caller only
    // once the kernel is known to have succeeded.
    for &(_, device, bytes, slot) in &copy_back {
        if let Some(slot) = slot {
            // SAFETY: the slot has room for `bytes` and is not used otherwise until the queue
            // drained; `device` holds `bytes`.
            unsafe { backend.copy_from_device(slot, device, bytes)? };
        }
    }
    // A faulting kernel shows at the first synchronizing call after it: wait before copying back
    // so that the error names the kernel and no result bytes reach the host.
    backend.synchronize().map_err(failed)?;
    let finished = Instant::now();
    report.kernel_time = finished - launched;
    if let (Some(begin), Some(end)) = (begin, end) {
        report.device_time = end.elapsed_since(&*begin).ok();
    }
    // A panicking GPU thread just ends, without faulting: its image's panic record tells.
    if let Some(message) = entry.image.take_panic(backend)? {
        return Err(Error::KernelFailed {
            kernel,
            device: backend.name().to_string(),
            message,
        });
    }
    drop(collecting);
    backups.keep_results();
    // The large copies back queued, then one wait, unless the trace prints each copy's own time.
    let wait_each = trace::enabled();
    let last_direct = copy_back.iter().rposition(|c| c.3.is_none());
    let mut waited = finished;
    for (i, &(host, device, bytes, slot)) in copy_back.iter().enumerate() {
        match slot {
            // SAFETY: the slot holds the result (the queue drained); the `&mut` host slice is
            // borrowed until this function returns; distinct allocations.
            Some(slot) => unsafe { std::ptr::copy_nonoverlapping(slot, host, bytes) },
            None => {
                // SAFETY: the `&mut` host slice is borrowed until this function returns.
                unsafe { backend.copy_from_device(host, device, bytes)? };
                if wait_each || Some(i) == last_direct {
                    backend.synchronize()?;
                }
            }
        }
        if traced {
            let now = Instant::now();
            trace::copy_from_device(device_id, backend.name(), host, bytes, now - waited);
            report.bytes_from_device += bytes;
            waited = now;
        }
    }
    buffers.drained = true;
    if !copy_back.is_empty() {
        report.time_from_device = finished.elapsed();
    }
    claim.completed();
    drop(buffers);
    if traced {
        trace::launch(backend.name(), report, &summary);
    } else {
        trace::host_launch(backend.name(), kernel, report.kernel_time);
    }
    Ok(())
}

/// A launch's or its queue's driver error as the failure of `kernel`.
pub(crate) fn kernel_failed(kernel: &'static str, e: Error) -> Error {
    match e {
        Error::Driver {
            device, message, ..
        } => Error::KernelFailed {
            kernel,
            device,
            message,
        },
        other => other,
    }
}
