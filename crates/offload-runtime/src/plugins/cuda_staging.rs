//! Fast host↔device copies for the CUDA plugin: pageable host memory moves through a small pool
//! of reusable pinned buffers, chunk by chunk, so that the DMA of one chunk overlaps the host
//! copy of the next (the driver's own pageable path reaches a fraction of the bus, and pinning
//! the caller's memory with `cuMemHostRegister` costs more per call than the copy).
//!
//! The host copy is the bottleneck (one core's memcpy is slower than the bus), so the rayon
//! pool and the calling thread copy small pieces claimed in order, with no barrier between
//! chunks: a chunk's DMA starts once its last piece is copied, while the threads go on with the
//! next chunks (a barrier per chunk made every thread wait for the slowest, each time).
//! Streaming stores were measured slower: the ring stays in the last-level cache, which the DMA
//! reads and fills.

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{result, DriverError};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
        let mut dma = CudaDma {
            stream,
            device: dst,
            buffers: &self.buffers,
            way: Way::Upload,
        };
        let ring = self.host_buffers();
        // SAFETY: `src` per the contract (an upload only reads `host`, hence the cast); the
        // ring's buffers hold `chunk` bytes each and the DMA reaches them through `dma` only.
        unsafe {
            pipeline(
                &mut dma,
                &ring,
                self.chunk,
                src as *mut u8,
                bytes,
                Way::Upload,
            )
        }
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
        let mut dma = CudaDma {
            stream,
            device: src,
            buffers: &self.buffers,
            way: Way::Download,
        };
        let ring = self.host_buffers();
        // SAFETY: `dst` per the contract; the ring's buffers hold `chunk` bytes each and the
        // DMA reaches them through `dma` only.
        unsafe { pipeline(&mut dma, &ring, self.chunk, dst, bytes, Way::Download) }
    }

    fn host_buffers(&self) -> Vec<SharedPtr> {
        self.buffers.iter().map(|b| SharedPtr(b.host)).collect()
    }
}

/// The DMA side of a staged copy: the driver here, a stand-in in the tests.
trait Dma {
    /// Queues the DMA of `len` bytes at `offset` of the copy through ring buffer `slot`
    /// (its start), after the DMAs queued before.
    fn start(&mut self, slot: usize, offset: usize, len: usize) -> Result<(), DriverError>;
    /// Blocks until the DMA last started through `slot` completed (at once if none was).
    fn wait(&mut self, slot: usize) -> Result<(), DriverError>;
}

struct CudaDma<'a> {
    stream: sys::CUstream,
    /// The device side of the whole copy.
    device: sys::CUdeviceptr,
    buffers: &'a [Buffer],
    way: Way,
}

impl Dma for CudaDma<'_> {
    fn start(&mut self, slot: usize, offset: usize, len: usize) -> Result<(), DriverError> {
        let buffer = &self.buffers[slot];
        let device = self.device + offset as u64;
        // SAFETY: `pipeline` starts a DMA only on a buffer that no host thread touches until
        // the DMA completed (`wait`), with `len` <= its size and the device range inside the
        // copy's; the stream and event are live.
        unsafe {
            if self.way == Way::Upload {
                let host = std::slice::from_raw_parts(buffer.host, len);
                result::memcpy_htod_async(device, host, self.stream)?;
            } else {
                let host = std::slice::from_raw_parts_mut(buffer.host, len);
                result::memcpy_dtoh_async(host, device, self.stream)?;
            }
            result::event::record(buffer.done, self.stream)
        }
    }

    fn wait(&mut self, slot: usize) -> Result<(), DriverError> {
        // SAFETY: a live event (a never-recorded one counts as complete).
        unsafe { result::event::synchronize(self.buffers[slot].done) }
    }
}

/// A pointer shared by the copy threads, each using a disjoint part of what it points to.
#[derive(Clone, Copy)]
struct SharedPtr(*mut u8);

// SAFETY: `pipeline` hands each byte behind these pointers to one thread at a time, ordered by
// its atomics.
unsafe impl Send for SharedPtr {}
// SAFETY: as for Send.
unsafe impl Sync for SharedPtr {}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Way {
    /// Host memory → ring → device.
    Upload,
    /// Device → ring → host memory.
    Download,
}

/// Pieces a chunk is split into for the copy threads: small enough that threads finishing
/// early take over the work of a slow one (a preempted core), large enough that claiming a
/// piece costs nothing.
const PIECES_PER_CHUNK: usize = 32;

/// Where the host copy of a staged transfer stands, shared by its threads.
struct Progress {
    /// Pieces claimed so far, in order (may run past the last).
    claimed: AtomicUsize,
    /// Chunks whose ring buffer the host copy may use: free of DMAs (upload), or filled by
    /// its DMA (download).
    usable: AtomicUsize,
    /// Per ring buffer: pieces of its current chunk copied.
    copied: Vec<AtomicUsize>,
    /// The transfer failed: threads waiting for a chunk give up.
    stopped: AtomicBool,
}

/// The geometry of one staged transfer and the host side of its copies.
struct Staged<'a> {
    host: SharedPtr,
    ring: &'a [SharedPtr],
    bytes: usize,
    chunk: usize,
    piece: usize,
    way: Way,
    progress: Progress,
}

impl Staged<'_> {
    fn chunks(&self) -> usize {
        self.bytes.div_ceil(self.chunk)
    }

    fn chunk_len(&self, chunk: usize) -> usize {
        self.chunk.min(self.bytes - chunk * self.chunk)
    }

    fn pieces_in(&self, chunk: usize) -> usize {
        self.chunk_len(chunk).div_ceil(self.piece)
    }

    fn pieces(&self) -> usize {
        let chunks = self.chunks();
        (chunks - 1) * self.chunk.div_ceil(self.piece) + self.pieces_in(chunks - 1)
    }

    fn chunk_of(&self, piece: usize) -> usize {
        piece / self.chunk.div_ceil(self.piece)
    }

    /// Copies piece `piece` between the host memory and its chunk's ring buffer, then counts it.
    ///
    /// # Safety
    /// The piece's chunk is usable and no other thread copies this piece.
    unsafe fn copy(&self, piece: usize) {
        let chunk = self.chunk_of(piece);
        let within = (piece - chunk * self.chunk.div_ceil(self.piece)) * self.piece;
        let len = self.piece.min(self.chunk_len(chunk) - within);
        let slot = chunk % self.ring.len();
        // SAFETY: the host range lies inside the copy's (`chunk_len`), the ring range inside
        // the buffer (`within + len <= chunk`); usable means no DMA uses the buffer now, and
        // pieces are disjoint.
        unsafe {
            let host = self.host.0.add(chunk * self.chunk + within);
            let ring = self.ring[slot].0.add(within);
            match self.way {
                Way::Upload => std::ptr::copy_nonoverlapping(host, ring, len),
                Way::Download => std::ptr::copy_nonoverlapping(ring, host, len),
            }
        }
        // Release: the copy happens before whoever sees the count.
        self.progress.copied[slot].fetch_add(1, Ordering::Release);
    }

    /// A copy thread: claims pieces in order and copies each once its chunk is usable.
    fn work(&self) {
        let pieces = self.pieces();
        while !self.progress.stopped.load(Ordering::Relaxed) {
            let piece = self.progress.claimed.fetch_add(1, Ordering::Relaxed);
            if piece >= pieces {
                return;
            }
            let chunk = self.chunk_of(piece);
            while self.progress.usable.load(Ordering::Acquire) <= chunk {
                if self.progress.stopped.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::yield_now();
            }
            // SAFETY: claimed by this thread alone; its chunk is usable.
            unsafe { self.copy(piece) };
        }
    }

    /// Waits until every piece of `chunk` is copied, copying usable pieces meanwhile (so that
    /// the transfer progresses even when no pool thread is free to help).
    fn finish(&self, chunk: usize) {
        let (pieces, slot) = (self.pieces(), chunk % self.ring.len());
        while self.progress.copied[slot].load(Ordering::Acquire) < self.pieces_in(chunk) {
            let piece = self.progress.claimed.load(Ordering::Relaxed);
            let claimable = piece < pieces
                && self.chunk_of(piece) < self.progress.usable.load(Ordering::Acquire)
                && self
                    .progress
                    .claimed
                    .compare_exchange(piece, piece + 1, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            if claimable {
                // SAFETY: claimed by this thread alone; its chunk is usable.
                unsafe { self.copy(piece) };
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Makes chunks `..chunks` usable by the host copy.
    fn usable_up_to(&self, chunks: usize) {
        // Release: the DMA wait before happens before the host copy uses the buffer.
        self.progress
            .usable
            .store(chunks.min(self.chunks()), Ordering::Release);
    }

    /// The calling thread's part: starts each chunk's DMA once the host side allows it.
    fn drive(&self, dma: &mut impl Dma) -> Result<(), DriverError> {
        let (ring, chunks) = (self.ring.len(), self.chunks());
        let start = |dma: &mut dyn Dma, chunk: usize| {
            dma.start(chunk % ring, chunk * self.chunk, self.chunk_len(chunk))
        };
        match self.way {
            Way::Upload => {
                self.usable_up_to(ring);
                for chunk in 0..chunks {
                    self.finish(chunk);
                    // Only this thread reads the count of the buffer's next chunk before it is
                    // usable, which the store of `usable` below orders after this reset.
                    self.progress.copied[chunk % ring].store(0, Ordering::Relaxed);
                    start(dma, chunk)?;
                    // The previous chunk's buffer is free once its DMA completed: it takes the
                    // chunk `ring` further.
                    if let Some(previous) = chunk.checked_sub(1) {
                        dma.wait(previous % ring)?;
                        self.usable_up_to(previous + ring + 1);
                    }
                }
            }
            Way::Download => {
                for chunk in 0..chunks.min(ring) {
                    start(dma, chunk)?;
                }
                for chunk in 0..chunks {
                    dma.wait(chunk % ring)?;
                    self.usable_up_to(chunk + 1);
                    // The previous chunk's buffer is refilled with the chunk `ring` further once
                    // copied out (while the threads copy out this chunk).
                    if let Some(previous) = chunk.checked_sub(1) {
                        if previous + ring < chunks {
                            self.finish(previous);
                            self.progress.copied[previous % ring].store(0, Ordering::Relaxed);
                            start(dma, previous + ring)?;
                        }
                    }
                }
                for chunk in chunks.saturating_sub(ring)..chunks {
                    self.finish(chunk);
                }
            }
        }
        // Complete on return: the last DMAs too.
        (0..ring).try_for_each(|slot| dma.wait(slot))
    }
}

/// Copies `bytes` between `host` and the device through the pinned `ring` (buffers of `chunk`
/// bytes): the calling thread drives the DMAs through `dma`, the rayon pool and the calling
/// thread copy pieces between `host` and the ring. Complete on return, also on error (no DMA
/// or thread uses `host` or the ring afterwards).
///
/// # Safety
/// `host..host+bytes` is readable (upload) or writable (download) and no other code uses it
/// meanwhile; each ring buffer holds `chunk` bytes and is reached by `dma` only as `Dma` says.
unsafe fn pipeline(
    dma: &mut impl Dma,
    ring: &[SharedPtr],
    chunk: usize,
    host: *mut u8,
    bytes: usize,
    way: Way,
) -> Result<(), DriverError> {
    debug_assert!(ring.len() >= 2 && chunk > 0);
    // The buffers may still be in a DMA of an earlier transfer that failed midway.
    (0..ring.len()).try_for_each(|slot| dma.wait(slot))?;
    if bytes == 0 {
        return Ok(());
    }
    let staged = Staged {
        host: SharedPtr(host),
        ring,
        bytes,
        chunk,
        // Whole cache lines.
        piece: chunk.div_ceil(PIECES_PER_CHUNK).next_multiple_of(64),
        way,
        progress: Progress {
            claimed: AtomicUsize::new(0),
            usable: AtomicUsize::new(0),
            copied: ring.iter().map(|_| AtomicUsize::new(0)).collect(),
            stopped: AtomicBool::new(false),
        },
    };
    rayon::in_place_scope(|scope| {
        // The calling thread copies too (while it waits for a chunk).
        for _ in 1..rayon::current_num_threads() {
            scope.spawn(|_| staged.work());
        }
        let driven = staged.drive(dma);
        if driven.is_err() {
            staged.progress.stopped.store(true, Ordering::Relaxed);
            // No DMA may outlive the call: wait for those queued (errors already reported).
            for slot in 0..ring.len() {
                let _ = dma.wait(slot);
            }
        }
        driven
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A DMA that may touch its buffer at any time between start and wait: an upload reads the
    /// buffer at start and checks at wait that no one wrote it meanwhile; a download scribbles
    /// over the buffer at start and fills it at wait.
    struct CheckingDma {
        device: Vec<u8>,
        ring: Vec<SharedPtr>,
        way: Way,
        /// Per buffer: the DMA in flight (offset, and the bytes an upload read).
        in_flight: Vec<Option<(usize, Vec<u8>)>>,
        /// Fails the start of this many-th DMA.
        fail_start: Option<usize>,
        started: usize,
    }

    impl Dma for CheckingDma {
        fn start(&mut self, slot: usize, offset: usize, len: usize) -> Result<(), DriverError> {
            assert!(
                self.in_flight[slot].is_none(),
                "a DMA started on a busy buffer"
            );
            if self.fail_start == Some(self.started) {
                return Err(DriverError(sys::CUresult::CUDA_ERROR_UNKNOWN));
            }
            self.started += 1;
            // SAFETY: test buffers of at least `len` bytes.
            let buffer = unsafe { std::slice::from_raw_parts_mut(self.ring[slot].0, len) };
            let read = match self.way {
                Way::Upload => buffer.to_vec(),
                Way::Download => {
                    buffer.fill(0xEE);
                    vec![0; len]
                }
            };
            self.in_flight[slot] = Some((offset, read));
            Ok(())
        }

        fn wait(&mut self, slot: usize) -> Result<(), DriverError> {
            if let Some((offset, read)) = self.in_flight[slot].take() {
                let len = read.len();
                // SAFETY: as in `start`.
                let buffer = unsafe { std::slice::from_raw_parts_mut(self.ring[slot].0, len) };
                match self.way {
                    Way::Upload => {
                        assert_eq!(buffer, &read[..], "the host wrote a buffer in a DMA");
                        self.device[offset..offset + len].copy_from_slice(&read);
                    }
                    Way::Download => buffer.copy_from_slice(&self.device[offset..offset + len]),
                }
            }
            Ok(())
        }
    }

    /// Runs a staged copy of `bytes` bytes with a ring of `buffers` buffers of `chunk` bytes;
    /// returns its result and what arrived (the device's bytes, or the host's).
    fn staged(
        way: Way,
        bytes: usize,
        chunk: usize,
        buffers: usize,
        fail_start: Option<usize>,
    ) -> (Result<(), DriverError>, Vec<u8>, Vec<u8>) {
        let pattern: Vec<u8> = (0..bytes).map(|i| (i * 13 + 5) as u8).collect();
        let mut ring_memory = vec![vec![0u8; chunk]; buffers];
        let ring: Vec<SharedPtr> = ring_memory
            .iter_mut()
            .map(|b| SharedPtr(b.as_mut_ptr()))
            .collect();
        let (mut host, device) = match way {
            Way::Upload => (pattern.clone(), vec![0; bytes]),
            Way::Download => (vec![0; bytes], pattern.clone()),
        };
        let mut dma = CheckingDma {
            device,
            ring: ring.clone(),
            way,
            in_flight: vec![None; buffers],
            fail_start,
            started: 0,
        };
        // SAFETY: `host` holds `bytes` bytes, each ring buffer `chunk`, all outliving the call.
        let result = unsafe { pipeline(&mut dma, &ring, chunk, host.as_mut_ptr(), bytes, way) };
        let arrived = match way {
            Way::Upload => dma.device,
            Way::Download => host,
        };
        (result, arrived, pattern)
    }

    #[test]
    fn staged_copies_arrive_whole_in_both_ways() {
        let chunk = 1024;
        // Fewer cases under Miri, which is slow (it checks the threads' accesses for races).
        let (sizes, rings): (&[usize], &[usize]) = if cfg!(miri) {
            (&[1, chunk + 1, 3 * chunk + 37], &[2])
        } else {
            (&[0, 1, 64, 1000, chunk, chunk + 1, 7 * chunk + 37], &[2, 3])
        };
        for way in [Way::Upload, Way::Download] {
            for &buffers in rings {
                for &bytes in sizes {
                    let (result, arrived, sent) = staged(way, bytes, chunk, buffers, None);
                    result.unwrap();
                    assert!(arrived == sent, "{bytes} bytes, {buffers} buffers");
                }
            }
        }
    }

    #[test]
    fn a_failed_dma_ends_the_copy_with_its_error() {
        for way in [Way::Upload, Way::Download] {
            for fail_start in [0, 1, 4] {
                let (result, _, _) = staged(way, 6 * 256 + 5, 256, 2, Some(fail_start));
                assert!(result.is_err(), "start {fail_start} failed");
            }
        }
    }
}
