//! The host CPU backend: runs every GPU thread of the grid as a call of the kernel's host entry,
//! blocks in parallel on rayon's pool, the threads of a block as coroutines (`scheduler`) so that
//! barriers and per-block shared memory behave as on a GPU. Inputs are read in place; outputs
//! are written to a copy that replaces the caller's slice only when no thread panicked. Warps
//! have 32 lanes, or 64 (AMD's CDNA wavefronts) under `OFFLOAD_HOST_WARP_SIZE=64`, read at each
//! launch, so warp code is tested at both widths without an AMD GPU.

pub mod scheduler;

use crate::device::{check_resident, Device};
use crate::kernel::{ArgData, Kernel, KernelArg, OutKind};
use crate::launch::{Limits, Shape};
use crate::{Error, Result};
use offload_kernel::Dim3;
use rayon::prelude::*;
use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::copy_nonoverlapping;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct HostBackend {
    name: String,
    /// Set by `release`: the host device then refuses launches, like a released GPU.
    released: AtomicBool,
}

impl HostBackend {
    pub fn new() -> Self {
        HostBackend {
            name: format!("host CPU ({} threads)", rayon::current_num_threads()),
            released: AtomicBool::new(false),
        }
    }

    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
    }

    /// `Err(Released)` once `release` was called.
    pub fn check_live(&self) -> Result<()> {
        if self.released.load(Ordering::Acquire) {
            return Err(Error::Released {
                device: self.name.clone(),
            });
        }
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// CUDA's limits, so that a shape valid on the host is valid on a GPU too.
    pub fn limits(&self) -> Limits {
        Limits {
            max_threads_per_block: 1024,
            max_block: Dim3::new(1024, 1024, 64),
            max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
            multiprocessors: rayon::current_num_threads() as u32,
            threads_per_multiprocessor: 1024,
            // What every CUDA GPU gives without opting in.
            max_shared_per_block: 48 * 1024,
        }
    }
}

impl Default for HostBackend {
    fn default() -> Self {
        Self::new()
    }
}

/// Arguments shared by the worker threads of one launch.
struct SharedArgs<'a, 'b>(&'a [KernelArg<'b>]);

// SAFETY: inputs are only read; each `&mut [T]` is reached by the kernel through a ThreadSlice,
// whose safe API gives every GPU thread (global id) disjoint elements, so the worker threads
// never touch the same bytes. The `unsafe` ThreadSlice API puts the same duty on the kernel.
unsafe impl Sync for SharedArgs<'_, '_> {}

impl<'a, 'b> SharedArgs<'a, 'b> {
    // A method, so that closures capture the Sync wrapper and not its field.
    fn get(&self) -> &'a [KernelArg<'b>] {
        self.0
    }
}

/// A copy of one `&mut [T]` argument that the kernel writes, so that the caller's slice changes
/// only when the whole launch succeeded, as on a GPU.
struct Staged {
    copy: *mut u8,
    layout: Layout,
    original: *mut u8,
    /// Whether the results replace the original (not for `to` and `alloc` outputs).
    commit: bool,
}

impl Staged {
    /// A copy of the `bytes` at `original` (`copy_in`), else zeroed memory of that size.
    fn new(original: *mut u8, bytes: usize, align: usize, copy_in: bool) -> Staged {
        let layout = Layout::from_size_align(bytes, align).expect("a slice's layout is valid");
        // SAFETY: bytes > 0 (callers skip empty slices).
        let copy = unsafe {
            if copy_in {
                alloc(layout)
            } else {
                alloc_zeroed(layout)
            }
        };
        if copy.is_null() {
            handle_alloc_error(layout);
        }
        if copy_in {
            // SAFETY: both regions hold `bytes` bytes and do not overlap.
            unsafe { copy_nonoverlapping(original, copy, bytes) };
        }
        Staged {
            copy,
            layout,
            original,
            commit: true,
        }
    }

    fn commit(&self) {
        if !self.commit {
            return;
        }
        // SAFETY: the original slice is still mutably borrowed by the launch.
        unsafe { copy_nonoverlapping(self.copy, self.original, self.layout.size()) };
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.copy, self.layout) };
    }
}

/// The variable that sets the lanes per warp of host launches.
pub const WARP_SIZE_VAR: &str = "OFFLOAD_HOST_WARP_SIZE";

/// Lanes per warp of a host launch: `OFFLOAD_HOST_WARP_SIZE` (32 or 64), else 32.
pub fn warp_size() -> std::result::Result<u32, String> {
    parse_warp_size(std::env::var(WARP_SIZE_VAR))
}

fn parse_warp_size(
    value: std::result::Result<String, std::env::VarError>,
) -> std::result::Result<u32, String> {
    match value {
        Err(std::env::VarError::NotPresent) => Ok(32),
        Ok(v) if v.trim() == "32" => Ok(32),
        Ok(v) if v.trim() == "64" => Ok(64),
        Ok(v) => Err(format!(
            "{WARP_SIZE_VAR}={v:?}: the host backend runs warps of 32 or 64 lanes"
        )),
        Err(e) => Err(format!("{WARP_SIZE_VAR}: {e}")),
    }
}

pub(crate) fn run(
    kernel: &Kernel,
    device: &Device,
    shape: Shape,
    args: &mut [KernelArg<'_>],
) -> Result<()> {
    // Here, where plain and stream launches meet, so that neither runs on a released host.
    device.check_host_live()?;
    let warp_size = warp_size().map_err(|reason| Error::InvalidLaunch {
        kernel: kernel.name,
        device: device.name().to_string(),
        reason,
    })?;
    let mut staged = Vec::new();
    let mut staged_args = Vec::with_capacity(args.len());
    for arg in args.iter() {
        let data = match arg.data {
            // Resident data of the host device is host memory: an output is written back.
            ArgData::Resident {
                device: resident,
                addr,
                len,
                elem_size,
                elem_align,
                writable,
            } => {
                check_resident(kernel.name, device.id(), device.name(), resident)?;
                if writable {
                    ArgData::SliceMut {
                        ptr: addr as *mut u8,
                        len,
                        elem_size,
                        elem_align,
                        atomic: false,
                        kind: OutKind::ToFrom,
                    }
                } else {
                    ArgData::Slice {
                        ptr: addr as *const u8,
                        len,
                        elem_size,
                        present_only: false,
                    }
                }
            }
            data => data,
        };
        let data = match data {
            ArgData::SliceMut {
                ptr,
                len,
                elem_size,
                elem_align,
                atomic,
                kind,
            } if len * elem_size > 0 => {
                // As on a GPU: `from` and `alloc` start from zeroed memory, and `to` and
                // `alloc` results stay "on the device" (the host keeps its data).
                let copy_in = matches!(kind, OutKind::ToFrom | OutKind::To);
                let mut stage = Staged::new(ptr, len * elem_size, elem_align, copy_in);
                stage.commit = matches!(kind, OutKind::ToFrom | OutKind::From);
                let data = ArgData::SliceMut {
                    ptr: stage.copy,
                    len,
                    elem_size,
                    elem_align,
                    atomic,
                    kind,
                };
                staged.push(stage);
                data
            }
            data => data,
        };
        staged_args.push(KernelArg::new(data));
    }
    run_grid(kernel, device, shape, warp_size, &staged_args)?;
    staged.iter().for_each(Staged::commit);
    Ok(())
}

fn run_grid(
    kernel: &Kernel,
    device: &Device,
    shape: Shape,
    warp_size: u32,
    args: &[KernelArg<'_>],
) -> Result<()> {
    let Shape {
        grid,
        block,
        dynamic_shared,
    } = shape;
    let shared = SharedArgs(args);
    // SAFETY: `shared` holds this kernel's arguments, built by its generated launcher.
    let thread = || unsafe { (kernel.host_thread)(shared.get()) };
    let run_block = |b: u64| {
        scheduler::run_block(
            scheduler::unlinear(b, grid),
            grid,
            block,
            dynamic_shared as usize,
            warp_size,
            &thread,
        )
    };
    catch_unwind(AssertUnwindSafe(|| {
        (0..grid.count()).into_par_iter().for_each(run_block)
    }))
    .map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic with a non-string payload".to_string());
        Error::KernelFailed {
            kernel: kernel.name,
            device: device.name().to_string(),
            message: format!("panicked: {message}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::env::VarError;

    #[test]
    fn warp_size_setting() {
        assert_eq!(parse_warp_size(Err(VarError::NotPresent)), Ok(32));
        assert_eq!(parse_warp_size(Ok("64".into())), Ok(64));
        assert_eq!(parse_warp_size(Ok(" 32 ".into())), Ok(32));
        let e = parse_warp_size(Ok("48".into())).unwrap_err();
        assert_eq!(
            e,
            "OFFLOAD_HOST_WARP_SIZE=\"48\": the host backend runs warps of 32 or 64 lanes"
        );
    }
}
