//! A crate's device image loaded on one liboffload device (`olCreateProgram`): the image chosen
//! for the device, its kernel symbols, and where its kernels report panics.

use super::result::{Ol, OlError};
use super::sys;
use super::Handle;
use crate::backend::Platform;
use crate::image::{sm_number, DeviceImage, ImageFormat, ImageSet};
use offload_kernel::panic_record::PanicRecord;
use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::size_of;

pub struct Program {
    handle: Handle<sys::ol_program_impl_t>,
    kernels: HashMap<&'static str, Handle<sys::ol_symbol_impl_t>>,
    /// Where its kernels report panics; `None` for an image built without panic reporting.
    pub panics: Option<PanicSlot>,
}

/// An image's `OFFLOAD_PANIC_RECORD` on the device, and the word of page-locked host memory its
/// panic handler sets once the record is written (null when liboffload gave none: then the
/// record's flag is copied back after every launch instead).
pub struct PanicSlot {
    pub record: u64,
    pub host_flag: *mut u32,
}

// SAFETY: the flag is page-locked host memory owned by the program; it is only read and
// written under the device's program lock (or by the device, which liboffload orders).
unsafe impl Send for PanicSlot {}

/// What loading needs of a device: its handles and the queue that orders the panic setup.
pub struct Target {
    pub ol: Ol,
    pub device: sys::ol_device_handle_t,
    pub host: sys::ol_device_handle_t,
    pub queue: sys::ol_queue_handle_t,
    pub platform: Platform,
}

impl Program {
    /// Loads the best of `images` the device accepts: binaries liboffload calls valid for it
    /// (a cubin of its architecture, an HSA code object of its GPU), then on CUDA GPUs PTX,
    /// newest architecture first (the driver compiles it, refusing what the GPU is too old for).
    /// `Err` is the reason for `Error::NoImage`: every rejection, with liboffload's message.
    ///
    /// # Safety
    /// The handles of `target` are live, of one GPU device.
    pub unsafe fn load(target: &Target, images: &ImageSet) -> Result<Program, String> {
        if images.images.is_empty() {
            return Err(match images.unavailable {
                Some(why) => format!("no device image was built ({why})"),
                None => "no device image was built".to_string(),
            });
        }
        let ol = target.ol;
        let mut rejected = Vec::new();
        let mut unfit = Vec::new();
        for image in candidates(images, target.platform) {
            let fits = image.format == ImageFormat::Ptx
                // SAFETY: per this function's contract.
                || unsafe { ol.is_valid_binary(target.device, image.bytes) } == Ok(true);
            if !fits {
                unfit.push(format!("the {:?} image for {}", image.format, image.target));
                continue;
            }
            let bytes = image.loadable_bytes();
            // SAFETY: per this function's contract.
            match unsafe { ol.create_program(target.device, &bytes) } {
                Ok(handle) => {
                    tracing::debug!(format = ?image.format, target = image.target, "liboffload loaded a device image");
                    let mut program = Program {
                        handle: Handle(handle),
                        kernels: HashMap::new(),
                        panics: None,
                    };
                    // SAFETY: the program was just created on the target's device.
                    unsafe { program.watch_panics(target) };
                    return Ok(program);
                }
                Err(e) => rejected.push(format!(
                    "the driver rejected the {:?} image for {}: liboffload: {}",
                    image.format, image.target, e
                )),
            }
        }
        if !unfit.is_empty() {
            rejected.push(format!(
                "liboffload says {} cannot run on this device",
                unfit.join(" and ")
            ));
        }
        Err(rejected.join("; "))
    }

    /// The kernel's symbol, looked up on first use.
    ///
    /// # Safety
    /// The program is live.
    pub unsafe fn kernel(
        &mut self,
        ol: Ol,
        name: &'static str,
    ) -> Result<sys::ol_symbol_handle_t, OlError> {
        if let Some(symbol) = self.kernels.get(name) {
            return Ok(symbol.0);
        }
        // SAFETY: per this function's contract.
        let symbol = unsafe { ol.get_symbol(self.handle.0, name, sys::OL_SYMBOL_KIND_KERNEL) }?;
        self.kernels.insert(name, Handle(symbol));
        Ok(symbol)
    }

    /// Finds the image's panic record and points its panic handler at a new word of page-locked
    /// host memory, which the device reaches at the same address (CUDA's unified addressing;
    /// AMDGPU host allocations are granted to the GPUs). Panics go unreported, with a warning,
    /// where liboffload cannot find the record.
    ///
    /// # Safety
    /// The program and the target's handles are live.
    unsafe fn watch_panics(&mut self, target: &Target) {
        let ol = target.ol;
        let global = |name: &str| {
            // SAFETY: the program is live; a global symbol's info is its address and size.
            unsafe {
                let symbol =
                    ol.get_symbol(self.handle.0, name, sys::OL_SYMBOL_KIND_GLOBAL_VARIABLE)?;
                ol.global_address_and_size(symbol)
            }
        };
        let (record, bytes) = match global("OFFLOAD_PANIC_RECORD") {
            Ok(found) => found,
            Err(e) if e.code == sys::OL_ERRC_NOT_FOUND => return,
            Err(e) => {
                tracing::warn!("liboffload cannot find the image's panic record ({e}): kernel panics go unreported");
                return;
            }
        };
        if bytes != size_of::<PanicRecord>() {
            tracing::warn!(
                bytes,
                "the image's panic record has an unknown layout: kernel panics go unreported"
            );
            return;
        }
        let mut slot = PanicSlot {
            record: record as u64,
            host_flag: std::ptr::null_mut(),
        };
        let flag_ptr = global("OFFLOAD_PANIC_FLAG_PTR")
            .ok()
            .filter(|&(_, b)| b == size_of::<u64>());
        if let Some((flag_ptr, _)) = flag_ptr {
            // SAFETY: a fresh host allocation on a GPU device.
            let host_flag =
                unsafe { ol.mem_alloc(target.device, sys::OL_ALLOC_TYPE_HOST, size_of::<u32>()) };
            match host_flag {
                Ok(host_flag) => {
                    let host_flag = host_flag as *mut u32;
                    // SAFETY: a live, aligned allocation of 4 bytes; the copy reads `address`,
                    // which outlives it (the queue is synchronized below).
                    let pointed = unsafe {
                        host_flag.write_volatile(0);
                        let address = host_flag as u64;
                        ol.memcpy(
                            target.queue,
                            flag_ptr,
                            target.device,
                            &address as *const u64 as *const c_void,
                            target.host,
                            size_of::<u64>(),
                        )
                        .and_then(|()| ol.sync_queue(target.queue))
                    };
                    slot.host_flag = host_flag;
                    if let Err(e) = pointed {
                        tracing::debug!("pointing the panic flag at host memory failed ({e}): panics are checked by a copy per launch");
                        // SAFETY: the host word is not in use (the copy failed or completed).
                        let _ = unsafe { ol.mem_free(host_flag as *mut c_void) };
                        slot.host_flag = std::ptr::null_mut();
                    }
                }
                Err(e) => tracing::debug!(
                    "no page-locked host word ({e}): panics are checked by a copy per launch"
                ),
            }
        }
        self.panics = Some(slot);
    }

    /// Unloads the program and frees its panic flag.
    ///
    /// # Safety
    /// Nothing queued uses the program or its flag, and neither is used afterwards.
    pub unsafe fn destroy(self, ol: Ol) {
        // SAFETY: per this function's contract.
        unsafe {
            if let Err(e) = ol.destroy_program(self.handle.0) {
                tracing::warn!("liboffload failed to unload a program: {e}");
            }
            if let Some(slot) = self.panics {
                if !slot.host_flag.is_null() {
                    let _ = ol.mem_free(slot.host_flag as *mut c_void);
                }
            }
        }
    }
}

/// The images worth trying on a device of `platform`, in order of preference: compiled binaries
/// (liboffload checks each fits), then on CUDA PTX of the newest architecture first.
fn candidates(images: &ImageSet, platform: Platform) -> Vec<&DeviceImage> {
    let mut binaries: Vec<&DeviceImage> = images
        .images
        .iter()
        .filter(|i| i.format != ImageFormat::Ptx)
        .collect();
    if platform == Platform::Cuda {
        let mut ptx: Vec<&DeviceImage> = images
            .images
            .iter()
            .filter(|i| i.format == ImageFormat::Ptx)
            .collect();
        ptx.sort_by_key(|i| std::cmp::Reverse(sm_number(i.target)));
        binaries.extend(ptx);
    }
    binaries
}

#[cfg(test)]
mod tests {
    use super::*;

    static IMAGES: [DeviceImage; 3] = [
        DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_70",
            bytes: b"ptx70",
        },
        DeviceImage {
            format: ImageFormat::Cubin,
            target: "sm_90",
            bytes: b"cubin90",
        },
        DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_90",
            bytes: b"ptx90\0",
        },
    ];
    static SET: ImageSet = ImageSet {
        images: &IMAGES,
        kernels: &["k"],
        unavailable: None,
    };

    #[test]
    fn binaries_first_then_the_newest_ptx_and_ptx_only_on_cuda() {
        let order: Vec<&[u8]> = candidates(&SET, Platform::Cuda)
            .iter()
            .map(|i| i.bytes)
            .collect();
        assert_eq!(order, [&b"cubin90"[..], b"ptx90\0", b"ptx70"]);
        let order: Vec<&[u8]> = candidates(&SET, Platform::Amdgpu)
            .iter()
            .map(|i| i.bytes)
            .collect();
        assert_eq!(order, [&b"cubin90"[..]]);
    }
}
