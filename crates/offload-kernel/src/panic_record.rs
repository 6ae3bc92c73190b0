//! How a kernel panic on the GPU reaches the host.
//!
//! A GPU thread cannot unwind, and formatting the panic message there would pull `core::fmt`
//! into every image. So the device panic handler stores only the panic's location and the ids of
//! the panicking thread into [`PanicRecord`], a device global of each image named
//! `OFFLOAD_PANIC_RECORD`. The first thread to panic claims it; the others just exit. The runtime
//! reads it after the launch, turns it into an error and zeroes it for the next launch.
//!
//! To spare the runtime a device-to-host copy after every launch, the claiming thread also
//! stores 1 through `OFFLOAD_PANIC_FLAG_PTR`, which the runtime points at a word of pinned host
//! memory when it loads the image (null: no such word, the runtime reads the record instead).

/// Bytes of the panic location's file name that are kept (the end of longer names).
pub const PANIC_FILE_BYTES: usize = 256;

/// `flag` value while the claiming thread is still writing.
pub const PANIC_CLAIMED: u32 = 1;
/// `flag` value once the record is complete.
pub const PANIC_COMPLETE: u32 = 2;

/// The first panic of a launch, as the device wrote it. All zeroes: no panic.
///
/// Its layout is shared by the device code and the runtime, which copies it from the device as
/// bytes: keep it `repr(C)` with integer fields only, so that every bit pattern is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct PanicRecord {
    /// 0: free; [`PANIC_CLAIMED`]; [`PANIC_COMPLETE`].
    pub flag: u32,
    pub line: u32,
    pub column: u32,
    /// Bytes used in `file`.
    pub file_len: u32,
    pub block: [u32; 3],
    pub thread: [u32; 3],
    pub file: [u8; PANIC_FILE_BYTES],
}

impl PanicRecord {
    pub const ZERO: PanicRecord = PanicRecord {
        flag: 0,
        line: 0,
        column: 0,
        file_len: 0,
        block: [0; 3],
        thread: [0; 3],
        file: [0; PANIC_FILE_BYTES],
    };

    /// The record's bytes, for copying it from the device.
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: repr(C), integers only (no padding: every field is 4-aligned and its size a
        // multiple of 4), so any bytes make a valid value.
        unsafe {
            core::slice::from_raw_parts_mut(
                self as *mut Self as *mut u8,
                core::mem::size_of::<Self>(),
            )
        }
    }
}

/// `panicked at FILE:LINE:COL (block (x, y, z), thread (x, y, z))`.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl core::fmt::Display for PanicRecord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.flag != PANIC_COMPLETE {
            // Only a thread killed halfway through its record leaves this.
            return f.write_str("panicked (the panic location was not recorded)");
        }
        let file = &self.file[..(self.file_len as usize).min(PANIC_FILE_BYTES)];
        let file = std::string::String::from_utf8_lossy(file);
        write!(f, "panicked at {file}:{}:{}", self.line, self.column)?;
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, " (block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}))")
    }
}

#[cfg(all(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    not(offload_panic_reporting_off)
))]
mod device {
    use super::*;
    use core::ptr::{addr_of_mut, copy_nonoverlapping};
    use core::sync::atomic::{fence, AtomicU32, Ordering};

    /// This image's panic record. Its name is looked up by the runtime.
    #[no_mangle]
    pub static mut OFFLOAD_PANIC_RECORD: PanicRecord = PanicRecord::ZERO;

    /// Where to store 1 once the record is complete (a pinned host word), or null.
    #[no_mangle]
    pub static mut OFFLOAD_PANIC_FLAG_PTR: *mut u32 = core::ptr::null_mut();

    /// Whether a thread of the running launch has panicked (claimed the record).
    pub fn launch_panicked() -> bool {
        // SAFETY: the flag is only accessed atomically (see `record_panic`).
        let flag = unsafe { AtomicU32::from_ptr(addr_of_mut!(OFFLOAD_PANIC_RECORD.flag)) };
        flag.load(Ordering::Relaxed) != 0
    }

    /// The device panic handler's body: record the first panic of the launch, end this thread.
    pub fn record_panic(info: &core::panic::PanicInfo<'_>) -> ! {
        // SAFETY: the record's fields are written only by the thread that won the flag, and read
        // by the host after the launch; the flag itself is only accessed atomically.
        unsafe {
            let record = addr_of_mut!(OFFLOAD_PANIC_RECORD);
            let flag = AtomicU32::from_ptr(addr_of_mut!((*record).flag));
            if flag
                .compare_exchange(0, PANIC_CLAIMED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                if let Some(location) = info.location() {
                    let file = location.file().as_bytes();
                    // The end of a long path holds the file name: keep that.
                    let file = &file[file.len().saturating_sub(PANIC_FILE_BYTES)..];
                    copy_nonoverlapping(
                        file.as_ptr(),
                        addr_of_mut!((*record).file) as *mut u8,
                        file.len(),
                    );
                    (*record).file_len = file.len() as u32;
                    (*record).line = location.line();
                    (*record).column = location.column();
                }
                let (block, thread) = (crate::block_idx(), crate::thread_idx());
                (*record).block = [block.x, block.y, block.z];
                (*record).thread = [thread.x, thread.y, thread.z];
                // The record before the flags, for any reader that sees a flag.
                fence(Ordering::SeqCst);
                flag.store(PANIC_COMPLETE, Ordering::Relaxed);
                let host_flag = *addr_of_mut!(OFFLOAD_PANIC_FLAG_PTR);
                if !host_flag.is_null() {
                    host_flag.write_volatile(1);
                }
            }
        }
        end_thread()
    }
}

/// Images built with panic reporting off (`offload_build::Kernels::panic_reporting(false)`): no
/// record, nothing for the runtime to check; a panicking thread just ends, unreported.
#[cfg(all(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    offload_panic_reporting_off
))]
mod device {
    pub fn record_panic(_: &core::panic::PanicInfo<'_>) -> ! {
        super::end_thread()
    }

    /// Nothing records a panic in these images.
    pub fn launch_panicked() -> bool {
        false
    }
}

/// Ends the calling GPU thread: the work-item returns from the kernel (the device pass turns the
/// marker into returns).
#[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
fn end_thread() -> ! {
    // SAFETY: the marker ends the work-item; nothing after it runs.
    unsafe { crate::spirv::__offload_spirv_end_thread() }
}

/// Ends the calling GPU thread. `exit`, not `trap`: a trap kills the CUDA context, this ends
/// only this thread.
#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
fn end_thread() -> ! {
    // SAFETY: `exit` ends the thread; nothing after it runs.
    unsafe { core::arch::asm!("exit;", options(noreturn)) }
}

/// Ends the calling thread's whole wavefront (`s_endpgm`): amdgcn cannot end one lane, and a
/// trap would take the queue down. The launch reports the panic either way, and its outputs are
/// not copied back; the wavefront's other lanes just stop early.
#[cfg(target_arch = "amdgpu")]
fn end_thread() -> ! {
    core::arch::amdgpu::endpgm()
}

/// Whether a thread of the running launch has panicked: a thread that spins until another has
/// done something (a transfer barrier's phase) stops waiting then, as the thread it waits for
/// may be the one that ended. Always false in images built with panic reporting off.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub(crate) use device::launch_panicked;
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
pub use device::record_panic;

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use std::string::ToString;

    fn record(file: &str) -> PanicRecord {
        let mut r = PanicRecord::ZERO;
        r.flag = PANIC_COMPLETE;
        r.line = 12;
        r.column = 9;
        r.file[..file.len()].copy_from_slice(file.as_bytes());
        r.file_len = file.len() as u32;
        r.block = [3, 0, 0];
        r.thread = [17, 1, 0];
        r
    }

    #[test]
    fn decodes_location_and_ids() {
        assert_eq!(
            record("src/kernels.rs").to_string(),
            "panicked at src/kernels.rs:12:9 (block (3, 0, 0), thread (17, 1, 0))"
        );
    }

    #[test]
    fn incomplete_or_corrupt_records_still_decode() {
        let mut r = record("src/kernels.rs");
        r.flag = PANIC_CLAIMED;
        assert_eq!(
            r.to_string(),
            "panicked (the panic location was not recorded)"
        );
        // A length past the array is clamped, bad UTF-8 replaced.
        let mut r = record("");
        r.file = [0xff; PANIC_FILE_BYTES];
        r.file_len = u32::MAX;
        let s = r.to_string();
        assert!(s.starts_with("panicked at \u{fffd}\u{fffd}"), "{s}");
        assert!(
            s.ends_with(":12:9 (block (3, 0, 0), thread (17, 1, 0))"),
            "{s}"
        );
    }

    #[test]
    fn layout_is_fixed() {
        // The device writes and the host reads the same bytes: no padding, these offsets.
        assert_eq!(
            core::mem::size_of::<PanicRecord>(),
            4 * 10 + PANIC_FILE_BYTES
        );
        assert_eq!(core::mem::align_of::<PanicRecord>(), 4);
        assert_eq!(core::mem::offset_of!(PanicRecord, block), 16);
        assert_eq!(core::mem::offset_of!(PanicRecord, file), 40);
        let mut r = PanicRecord::ZERO;
        r.as_bytes_mut()[0] = 2;
        assert_eq!(r.flag, 2);
    }
}
