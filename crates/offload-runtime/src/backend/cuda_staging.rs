//! Fast host↔device copies for the CUDA plugin: pageable host memory moves through a small pool
//! of reusable pinned buffers, chunk by chunk, so that the DMA of one chunk overlaps the host
//! copy of the next (the driver's own pageable path reaches a fraction of the bus, and pinning
//! the caller's memory with `cuMemHostRegister` costs more per call than the copy).
//!
//! The host side of each chunk is copied by several threads at once (rayon): one core's memcpy
//! is slower than the bus.

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{result, DriverError};
use rayon::prelude::*;
use std::ffi::c_void;

/// MiB per chunk unless `OFFLOAD_STAGING_MIB` says: large enough that the per-copy cost
/// vanishes, small enough that the first chunk (not overlapped) is a small part of a large copy.
const CHUNK_MIB: usize = 8;
/// Pinned buffers in the ring unless `OFFLOAD_STAGING_BUFFERS` says: DMAs queued ahead while the
/// host fills or drains the others.
const BUFFERS: usize = 4;
/// Below this, the driver's own pageable copy is as fast (no pipeline to fill).
pub(super) const STAGE_FROM: usize = 1 << 20;

/// A positive integer from the environment, else `default`.
fn tuning(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

struct Buffer {
    host: *mut u8,
    /// Recorded after the DMA that last used `host`: it is free once the event completed.
    done: sys::CUevent,
}

/// The pinned ring of one device, made on first use. Used with its context bound and under the
/// plugin's lock.
#[derive(Default)]
pub(super) struct Staging {
    buffers: Vec<Buffer>,
    /// Bytes of each buffer.
    chunk: usize,
    /// The driver refused the pinned memory: copies take its pageable path.
    refused: bool,
}

// SAFETY: the pinned buffers and events are driver objects usable from any thread; the plugin
// serialises every use behind a Mutex.
unsafe impl Send for Staging {}

impl Staging {
    /// Whether the ring can be used, allocating it (in the bound context) on first call.
    pub fn ready(&mut self, device: &str) -> bool {
        if self.buffers.is_empty() && !self.refused {
            if let Err(e) = self.allocate() {
                tracing::warn!(%device, "no pinned staging buffers ({e}): copies use pageable memory");
                *self = Staging {
                    buffers: Vec::new(),
                    chunk: 0,
                    refused: true,
                };
            }
        }
        !self.buffers.is_empty()
    }

    fn allocate(&mut self) -> Result<(), DriverError> {
        self.chunk = tuning("OFFLOAD_STAGING_MIB", CHUNK_MIB) << 20;
        for _ in 0..tuning("OFFLOAD_STAGING_BUFFERS", BUFFERS).max(2) {
            // SAFETY: plain pinned host memory in the bound context; freed in Drop.
            let host = unsafe { result::malloc_host(self.chunk, 0) }? as *mut u8;
            let done = match result::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING) {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: just allocated, never used.
                    let _ = unsafe { result::free_host(host as *mut c_void) };
                    return Err(e);
                }
            };
            self.buffers.push(Buffer { host, done });
        }
        Ok(())
    }

    /// Copies `bytes` at `src` to device `dst`, after the work queued on `stream`; complete on
    /// return.
    ///
    /// # Safety
    /// `src..src+bytes` is readable, `dst` holds `bytes` bytes, the context is bound.
    pub unsafe fn upload(
        &mut self,
        stream: sys::CUstream,
        dst: sys::CUdeviceptr,
        src: *const u8,
        bytes: usize,
    ) -> Result<(), DriverError> {
        let (chunk, ring) = (self.chunk, self.buffers.len());
        for (i, offset) in (0..bytes).step_by(chunk).enumerate() {
            let n = chunk.min(bytes - offset);
            let buffer = &self.buffers[i % ring];
            // SAFETY: the event is live (a never-recorded event counts as complete); once it
            // completed no DMA reads the buffer, which holds chunk >= n bytes; `src` holds
            // `offset + n` readable bytes per the contract.
            unsafe {
                result::event::synchronize(buffer.done)?;
                parallel_copy(src.add(offset), buffer.host, n);
                result::memcpy_htod_async(
                    dst + offset as u64,
                    std::slice::from_raw_parts(buffer.host, n),
                    stream,
                )?;
                result::event::record(buffer.done, stream)?;
            }
        }
        // Wait for the last DMAs too, so that a copy's measured time is its own (the caller
        // synchronizes before launching anyway).
        for buffer in &self.buffers {
            // SAFETY: a live event.
            unsafe { result::event::synchronize(buffer.done)? };
        }
        Ok(())
    }

    /// Copies `bytes` at device `src` to `dst` after the work queued on `stream`; complete on
    /// return.
    ///
    /// # Safety
    /// `dst..dst+bytes` is writable, `src` holds `bytes` bytes, the context is bound.
    pub unsafe fn download(
        &mut self,
        stream: sys::CUstream,
        dst: *mut u8,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> Result<(), DriverError> {
        let (chunk, ring) = (self.chunk, self.buffers.len());
        let chunks = bytes.div_ceil(chunk);
        let span = |i: usize| (i * chunk, chunk.min(bytes - i * chunk));
        let issue = |buffers: &[Buffer], i: usize| {
            let (offset, n) = span(i);
            let buffer = &buffers[i % ring];
            // SAFETY: the buffer is free (its previous chunk was drained before this call) and
            // holds n bytes; the device range lies inside `src..src+bytes`.
            unsafe {
                result::memcpy_dtoh_async(
                    std::slice::from_raw_parts_mut(buffer.host, n),
                    src + offset as u64,
                    stream,
                )?;
                result::event::record(buffer.done, stream)
            }
        };
        for i in 0..chunks.min(ring) {
            issue(&self.buffers, i)?;
        }
        for i in 0..chunks {
            let (offset, n) = span(i);
            let buffer = &self.buffers[i % ring];
            // SAFETY: once the event completed the buffer holds chunk i; `dst` holds
            // `offset + n` writable bytes per the contract.
            unsafe {
                result::event::synchronize(buffer.done)?;
                parallel_copy(buffer.host, dst.add(offset), n);
            }
            if i + ring < chunks {
                issue(&self.buffers, i + ring)?;
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        for buffer in self.buffers.drain(..) {
            // SAFETY: the plugin drops the ring with its context bound, no copy in flight.
            unsafe {
                let _ = result::event::synchronize(buffer.done);
                let _ = result::event::destroy(buffer.done);
                let _ = result::free_host(buffer.host as *mut c_void);
            }
        }
    }
}

/// `memcpy` of `n` bytes, one piece per rayon thread.
///
/// # Safety
/// `src..src+n` is readable, `dst..dst+n` writable, and they do not overlap.
unsafe fn parallel_copy(src: *const u8, dst: *mut u8, n: usize) {
    let (src, dst) = (src as usize, dst as usize);
    // Pieces of whole cache lines.
    let piece = n
        .div_ceil(rayon::current_num_threads())
        .next_multiple_of(64);
    (0..n.div_ceil(piece)).into_par_iter().for_each(|p| {
        let start = p * piece;
        let len = piece.min(n - start);
        // SAFETY: pieces are disjoint sub-ranges of the ranges of the contract.
        unsafe {
            std::ptr::copy_nonoverlapping((src + start) as *const u8, (dst + start) as *mut u8, len)
        };
    });
}
