//! Bulk tensor copies from global to shared memory (PTX `cp.async.bulk.tensor`, Hopper's copy
//! engine, sm_90 and newer), completing on a transaction barrier (PTX `mbarrier`).
//!
//! One thread asks the copy engine for a whole 2D box of a matrix ([`copy_box_2d`]); the engine
//! reads it, fills what lies outside the matrix with zeros, writes it to shared memory (with the
//! 128-byte swizzle that [`crate::mma::wgmma`] reads, if the map says so) and counts the bytes
//! on a [`TransferBarrier`]. Threads then wait for the barrier's phase ([`TransferBarrier::wait`])
//! and read the tile. The matrix is described by a [`TensorMap`], built on the host by the
//! runtime (`Device::tensor_map_2d`) for device memory and passed to the kernel in a slice
//! parameter (`&[TensorMap]`, so in device memory, where the copy engine may read it). Not by
//! value as CUDA C's `__grid_constant__` parameters: rustc's nvptx kernel ABI refuses by-value
//! parameters aligned to more than 16 bytes (an internal compiler error in rustc 1.97), and a
//! map must be 64-byte aligned.
//!
//! A barrier goes through phases `0, 1, 0, ...`: a phase completes when its expected arrivals
//! have arrived ([`TransferBarrier::arrive_expect_bytes`]) and the bytes they announced have
//! landed.
//!
//! The other way, one thread asks the engine to write a box of shared memory into a matrix
//! ([`store_box_2d`]; what lies outside the matrix is not written). The threads that wrote the
//! box make their writes visible to the engine first ([`fence_shared_for_copies`], then a block
//! barrier); the issuing thread closes its stores into groups ([`commit_stores`]) and waits until
//! the engine has read them ([`wait_stores_read`]) before anyone writes the box again, and before
//! the block exits.
//!
//! # Host backend
//! A copy happens at once and counts its bytes at once; so does a store (waits and fences have
//! nothing to do). The block's threads run one at a time, so a wait cannot block: waiting for a phase that has not completed fails the launch with a
//! message (on the GPU that wait would have to be ended by a thread that runs later; arrange
//! arrivals and copies before a `sync_threads` that precedes the waits).
//!
//! # Tensor maps in device memory
//! The copy engine reads maps through a proxy of its own, which PTX's memory model does not order
//! with the copies that put them into device memory: without a proxy fence, a map at an address
//! where an earlier launch's map was may be read as that one. So a kernel fences its maps for
//! the engine once, at its start ([`acquire_maps`], PTX
//! `fence.proxy.tensormap::generic.acquire`), in every thread that issues copies or stores; a
//! fence before every copy would cost the copies much of their speed.
//!
//! # Architectures
//! The instructions need sm_90 and PTX ISA 8.3 (the fence): offload-build makes sm_90a images
//! PTX 8.3; plain sm_90 images are PTX 7.8 (the oldest for sm_90, what LLVM emits unless told
//! `+ptx83`). Elsewhere (those, older NVIDIA targets, AMD and SPIR-V images) the operations
//! panic when they run, so the launch fails (`Error::KernelFailed`) with a message saying what to
//! build for.

use crate::{DeviceCopy, SharedSlice};

/// A 2D tiled tensor map: the driver's `CUtensorMap` (128 bytes, 64-byte aligned) on a CUDA
/// device, the host backend's own description of the same on the host. Made by the runtime
/// (`Device::tensor_map_2d`), for one device.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct TensorMap {
    words: [u64; 16],
}

// SAFETY: plain bytes, valid on the device they were made for; no pointers the host follows.
unsafe impl DeviceCopy for TensorMap {}

/// Marks a [`TensorMap`] made for the host backend (word 15).
const HOST_MAP: u64 = 0x6f66_666c_6f61_6448;

/// What a 2D tensor map describes: a row-major matrix and the box one copy moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledLayout {
    /// Bytes per element: 1, 2, 4 or 8.
    pub element_bytes: u32,
    /// Elements per row (the inner, contiguous dimension).
    pub cols: u64,
    /// Rows.
    pub rows: u64,
    /// Bytes from one row to the next (a multiple of 16).
    pub row_stride_bytes: u64,
    /// Columns of the box a copy moves (`box_cols · element_bytes` a multiple of 16, at most 128
    /// with the swizzle).
    pub box_cols: u32,
    /// Rows of the box (1 to 256).
    pub box_rows: u32,
    /// Whether shared memory receives the box 128-byte swizzled (as `mma::wgmma` reads it).
    pub swizzle_128: bool,
}

impl TiledLayout {
    /// Bytes of one box in shared memory (what a copy counts on its barrier).
    pub fn box_bytes(&self) -> u32 {
        self.box_cols * self.box_rows * self.element_bytes
    }

    /// Why a CUDA device would refuse it, if it would (checked before encoding on any device,
    /// so that the host backend refuses what a GPU would).
    pub fn problem(&self) -> Option<&'static str> {
        let row_bytes = self.box_cols as u64 * self.element_bytes as u64;
        if ![1, 2, 4, 8].contains(&self.element_bytes) {
            Some("element size must be 1, 2, 4 or 8 bytes")
        } else if self.cols == 0 || self.rows == 0 || self.cols >= 1 << 32 || self.rows >= 1 << 32 {
            Some("dimensions must be between 1 and 2^32 - 1")
        } else if self.row_stride_bytes % 16 != 0 || self.row_stride_bytes >= 1 << 40 {
            Some("the row stride must be a multiple of 16 bytes (below 2^40)")
        } else if self.row_stride_bytes < self.cols * self.element_bytes as u64 {
            Some("the row stride is shorter than a row")
        } else if self.box_cols == 0
            || self.box_rows == 0
            || self.box_cols > 256
            || self.box_rows > 256
        {
            Some("box sides must be between 1 and 256")
        } else if row_bytes % 16 != 0 {
            Some("a box row must be a multiple of 16 bytes")
        } else if self.swizzle_128 && row_bytes > 128 {
            Some("with the 128-byte swizzle a box row is at most 128 bytes")
        } else {
            None
        }
    }
}

impl TensorMap {
    /// A map from its 16 words, as the runtime encoded them.
    #[doc(hidden)]
    pub const fn from_words(words: [u64; 16]) -> TensorMap {
        TensorMap { words }
    }

    /// The host backend's map of `layout` at host address `address` (the runtime calls this
    /// for its host device).
    #[doc(hidden)]
    pub fn for_host(address: u64, layout: &TiledLayout) -> TensorMap {
        let mut words = [0u64; 16];
        words[..8].copy_from_slice(&[
            address,
            layout.cols,
            layout.rows,
            layout.row_stride_bytes,
            layout.box_cols as u64,
            layout.box_rows as u64,
            layout.element_bytes as u64,
            layout.swizzle_128 as u64,
        ]);
        words[15] = HOST_MAP;
        TensorMap { words }
    }
}

/// A transaction barrier (PTX `mbarrier`): 8 bytes of shared memory.
#[derive(Clone, Copy)]
pub struct TransferBarrier {
    at: *mut u64,
}

impl TransferBarrier {
    /// Barrier `index` of `slots` (one `u64` each).
    ///
    /// # Panics
    /// If `index` is outside `slots`.
    #[inline(always)]
    #[track_caller]
    pub fn at(slots: SharedSlice<u64>, index: usize) -> TransferBarrier {
        assert!(
            index < slots.len(),
            "TransferBarrier::at: index outside the slots"
        );
        TransferBarrier {
            at: slots.as_ptr().wrapping_add(index),
        }
    }

    /// Sets the barrier up for `arrivals` arrivals per phase, in phase 0. One thread calls it,
    /// then the block meets at a barrier (`sync_threads`) before anyone uses it.
    ///
    /// # Safety
    /// No thread uses the barrier between this call and that `sync_threads`, nor a copy still
    /// counts on it.
    #[inline(always)]
    pub unsafe fn init(&self, arrivals: u32) {
        assert!(
            (1..1 << 11).contains(&arrivals),
            "TransferBarrier::init: 1 to 2047 arrivals"
        );
        // SAFETY: the caller's contract.
        unsafe { arch::init(self.at, arrivals) }
    }

    /// One arrival, announcing `bytes` that copies will count on this phase.
    #[inline(always)]
    pub fn arrive_expect_bytes(&self, bytes: u32) {
        // SAFETY: `at` is this block's shared memory (from `at`); the barrier was initialised
        // (else the GPU's behaviour is undefined: `init`'s contract asks for it before use).
        unsafe { arch::arrive_expect(self.at, bytes) }
    }

    /// Waits until the phase of parity `phase` (0 or 1) has completed. On a GPU, a wait that
    /// finds a panic recorded in the launch returns at once instead (the copy it waits for may
    /// have been the panicking thread's), so the launch fails rather than hangs.
    ///
    /// # Panics
    /// On the host backend, if that phase has not completed (see the module docs).
    #[inline(always)]
    pub fn wait(&self, phase: u32) {
        // SAFETY: as in `arrive_expect_bytes`.
        unsafe { arch::wait(self.at, phase & 1) }
    }
}

/// Starts the copy engine on the box of `map` whose first column is `col` and first row `row`
/// (either may be negative or past the end: elements outside the matrix arrive as zeros), into
/// `dst` from element `dst_offset`, counting its bytes (`map`'s box bytes) on `barrier`.
///
/// # Panics
/// If `col` is off a 16-byte boundary of the row (`col` times `T`'s size is no multiple of 16):
/// the copy engine of an H200 stops the kernel with an illegal instruction there.
///
/// # Safety
/// `map` was made for this device, describes memory that stays valid and unwritten during the
/// launch, has elements of `T`'s size, and the calling thread passed it to [`acquire_maps`] in
/// this launch; the destination, `box_bytes` from `dst_offset`, lies inside `dst`, at a 128-byte
/// boundary (1024 with the swizzle), and nobody reads or writes it until `barrier`'s phase that
/// counts this copy has completed; that phase expects the bytes (`arrive_expect_bytes`).
#[inline(always)]
#[track_caller]
pub unsafe fn copy_box_2d<T: Copy>(
    dst: SharedSlice<T>,
    dst_offset: usize,
    map: &TensorMap,
    (col, row): (i32, i32),
    barrier: &TransferBarrier,
) {
    box_column_checked::<T>(col, "copy_box_2d");
    // SAFETY: the caller's contract.
    unsafe {
        arch::copy_2d(
            dst.as_ptr().wrapping_add(dst_offset) as *mut u8,
            map,
            (col, row),
            barrier.at,
            core::mem::size_of::<T>(),
        )
    }
}

/// Fences `maps` for the copy engine (PTX `fence.proxy.tensormap::generic.acquire.gpu`), so that
/// its reads of them see what the runtime copied there for this launch, not a map that an
/// earlier launch had at the same address: each thread that issues [`copy_box_2d`] or
/// [`store_box_2d`] calls this on their maps before its first (once per launch: it is not free).
#[inline(always)]
pub fn acquire_maps(maps: &[TensorMap]) {
    for map in maps {
        arch::acquire(map);
    }
}

/// Makes the calling thread's earlier writes to shared memory visible to the copy engine (PTX
/// `fence.proxy.async.shared::cta`): each thread that wrote a box calls it before the block
/// barrier after which [`store_box_2d`] reads the box.
#[inline(always)]
pub fn fence_shared_for_copies() {
    arch::fence_async();
}

/// Starts the copy engine on writing the box at element `src_offset` of `src` into `map`'s
/// matrix, at the box whose first column is `col` and first row `row` (elements of the box
/// outside the matrix are not written). The store joins the calling thread's open group of
/// stores ([`commit_stores`] closes it).
///
/// # Panics
/// As [`copy_box_2d`], if `col` is off a 16-byte boundary of the row.
///
/// # Safety
/// `map` was made for this device, describes memory that this launch may write and that nobody
/// else reads or writes during the launch, has elements of `T`'s size, and the calling thread
/// passed it to [`acquire_maps`] in this launch; the box, `box_bytes` from `src_offset`, lies
/// inside `src` at a 128-byte boundary (1024 with the swizzle), laid out as [`copy_box_2d`]
/// would write it; every thread that wrote it called [`fence_shared_for_copies`] and then met
/// this one at a block barrier; nobody writes it until this thread has returned from a
/// [`wait_stores_read`] that covers the store, and the block does not exit before this thread
/// has returned from `wait_stores_read::<0>()`. Stores whose boxes overlap in the matrix land in
/// no defined order.
#[inline(always)]
#[track_caller]
pub unsafe fn store_box_2d<T: Copy>(
    src: SharedSlice<T>,
    src_offset: usize,
    map: &TensorMap,
    (col, row): (i32, i32),
) {
    box_column_checked::<T>(col, "store_box_2d");
    // SAFETY: the caller's contract.
    unsafe {
        arch::store_2d(
            src.as_ptr().wrapping_add(src_offset) as *const u8,
            map,
            (col, row),
            core::mem::size_of::<T>(),
        )
    }
}

/// Panics (in `what`) unless the box's first column, `col` elements of `T`, lies at a 16-byte
/// boundary of its row, as the copy engine's chunks do. On the H200 a box off that boundary
/// stops the kernel with an illegal instruction, which leaves the context unusable; the host
/// backend refuses it alike.
#[inline(always)]
#[track_caller]
fn box_column_checked<T>(col: i32, what: &str) {
    let byte = col.wrapping_mul(core::mem::size_of::<T>() as i32);
    assert!(
        byte & 15 == 0,
        "{what}: the box's first column must lie at a 16-byte boundary of the row"
    );
}

/// Closes the calling thread's open group of [`store_box_2d`] stores (PTX
/// `cp.async.bulk.commit_group`).
#[inline(always)]
pub fn commit_stores() {
    arch::commit();
}

/// Waits until at most `PENDING` of the calling thread's committed groups of stores still read
/// shared memory (PTX `cp.async.bulk.wait_group.read`): the boxes of the others may be written
/// again.
#[inline(always)]
pub fn wait_stores_read<const PENDING: u32>() {
    arch::wait_read::<PENDING>();
}

#[cfg(all(
    target_arch = "nvptx64",
    target_feature = "sm_90",
    target_feature = "ptx83",
    not(feature = "spirv")
))]
mod arch {
    use super::TensorMap;
    use crate::shared_window::shared_address;

    pub(super) unsafe fn init(at: *mut u64, arrivals: u32) {
        // SAFETY: the caller's contract; the fences make the initialised barrier visible to the
        // copy engine.
        unsafe {
            core::arch::asm!(
                "mbarrier.init.shared::cta.b64 [{a}], {n};",
                "fence.mbarrier_init.release.cluster;",
                "fence.proxy.async.shared::cta;",
                a = in(reg32) shared_address(at as *const u8),
                n = in(reg32) arrivals,
                options(nostack),
            )
        };
    }

    #[inline(always)]
    pub(super) unsafe fn arrive_expect(at: *mut u64, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {n};",
                a = in(reg32) shared_address(at as *const u8),
                n = in(reg32) bytes,
                options(nostack),
            )
        };
    }

    #[inline(always)]
    pub(super) unsafe fn wait(at: *mut u64, phase: u32) {
        let a = shared_address(at as *const u8);
        loop {
            let done: u32;
            // SAFETY: the caller's contract; reads the barrier only. Not `nomem`: the tile's
            // reads must stay after the wait.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred offload_p; mbarrier.try_wait.parity.shared::cta.b64 offload_p, [{a}], {p}; selp.u32 {d}, 1, 0, offload_p; }}",
                    a = in(reg32) a,
                    p = in(reg32) phase,
                    d = out(reg32) done,
                    options(nostack),
                )
            };
            // The copy this waits for will not come if the thread that was to issue it
            // panicked (and ended): stop waiting then, rather than spin until the launch is
            // killed. The launch has failed, and nothing it computes reaches the caller. Not
            // an end of the thread here: an exit on this path makes ptxas serialize the
            // warpgroup MMAs of a kernel that waits between them.
            if done != 0 || crate::panic_record::launch_panicked() {
                break;
            }
        }
    }

    #[inline(always)]
    pub(super) unsafe fn copy_2d(
        to: *mut u8,
        map: &TensorMap,
        (col, row): (i32, i32),
        barrier: *mut u64,
        _element_bytes: usize,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c}, {r}}}], [{b}];",
                d = in(reg32) shared_address(to),
                m = in(reg64) map as *const TensorMap,
                c = in(reg32) col,
                r = in(reg32) row,
                b = in(reg32) shared_address(barrier as *const u8),
                options(nostack),
            )
        };
    }

    #[inline(always)]
    pub(super) fn acquire(map: &TensorMap) {
        // SAFETY: a fence on the map's 128 bytes, which the reference keeps valid.
        unsafe {
            core::arch::asm!(
                "fence.proxy.tensormap::generic.acquire.gpu [{m}], 128;",
                m = in(reg64) map as *const TensorMap,
                options(nostack),
            )
        };
    }

    #[inline(always)]
    pub(super) fn fence_async() {
        // SAFETY: a fence; not `nomem`, so the shared writes before it stay before it.
        unsafe { core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack)) };
    }

    #[inline(always)]
    pub(super) unsafe fn store_2d(
        from: *const u8,
        map: &TensorMap,
        (col, row): (i32, i32),
        _element_bytes: usize,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{m}, {{{c}, {r}}}], [{s}];",
                m = in(reg64) map as *const TensorMap,
                c = in(reg32) col,
                r = in(reg32) row,
                s = in(reg32) shared_address(from),
                options(nostack),
            )
        };
    }

    #[inline(always)]
    pub(super) fn commit() {
        // SAFETY: closes this thread's bulk group; touches no memory itself.
        unsafe { core::arch::asm!("cp.async.bulk.commit_group;", options(nostack)) };
    }

    #[inline(always)]
    pub(super) fn wait_read<const PENDING: u32>() {
        // SAFETY: waits for the copy engine; not `nomem`, so later writes of the boxes stay
        // after it.
        unsafe {
            core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const PENDING, options(nostack))
        };
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(
        target_arch = "nvptx64",
        any(
            feature = "spirv",
            not(target_feature = "sm_90"),
            not(target_feature = "ptx83")
        )
    )
))]
mod arch {
    use super::TensorMap;

    const MISSING: &str = "offload::tensor_copy needs an NVIDIA GPU of sm_90 or newer (Hopper's \
                           copy engine) and PTX ISA 8.3: build the kernels for sm_90a \
                           (OFFLOAD_CUDA_ARCH=sm_90a, whose images are PTX 8.3), or for sm_90 with \
                           PTX 8.3 (-C target-feature=+ptx83; plain sm_90 images are PTX 7.8)";

    pub(super) unsafe fn init(_: *mut u64, _: u32) {
        panic!("{}", MISSING)
    }
    pub(super) unsafe fn arrive_expect(_: *mut u64, _: u32) {
        panic!("{}", MISSING)
    }
    pub(super) unsafe fn wait(_: *mut u64, _: u32) {
        panic!("{}", MISSING)
    }
    pub(super) unsafe fn copy_2d(_: *mut u8, _: &TensorMap, _: (i32, i32), _: *mut u64, _: usize) {
        panic!("{}", MISSING)
    }
    pub(super) fn acquire(_: &TensorMap) {
        panic!("{}", MISSING)
    }
    pub(super) fn fence_async() {
        panic!("{}", MISSING)
    }
    pub(super) unsafe fn store_2d(_: *const u8, _: &TensorMap, _: (i32, i32), _: usize) {
        panic!("{}", MISSING)
    }
    pub(super) fn commit() {
        panic!("{}", MISSING)
    }
    pub(super) fn wait_read<const PENDING: u32>() {
        panic!("{}", MISSING)
    }
}

/// The host backend's barrier word: bits 0–31 the bytes still to land (signed), 32–51 the
/// arrivals still to come, 52–62 the arrivals per phase, 63 the phase.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::{TensorMap, HOST_MAP};

    const PHASE: u64 = 1 << 63;

    fn parts(word: u64) -> (i32, u64, u64, u64) {
        (
            word as u32 as i32,
            (word >> 32) & 0xf_ffff,
            (word >> 52) & 0x7ff,
            word >> 63,
        )
    }

    /// The word after `bytes` more are announced (`arrive`: and one arrival), completing the
    /// phase when nothing is missing any more.
    fn step(word: u64, arrive: bool, bytes: i64) -> u64 {
        let (pending, arrivals, count, phase) = parts(word);
        let pending = pending as i64 + bytes;
        let arrivals = arrivals - arrive as u64;
        if arrivals == 0 && pending == 0 {
            (count << 32) | (count << 52) | ((phase ^ 1) << 63)
        } else {
            (pending as i32 as u32 as u64) | (arrivals << 32) | (count << 52) | (phase << 63)
        }
    }

    pub(super) unsafe fn init(at: *mut u64, arrivals: u32) {
        let a = arrivals as u64;
        // SAFETY: the caller's contract: `at` is this block's shared memory.
        unsafe { *at = (a << 32) | (a << 52) };
    }

    pub(super) unsafe fn arrive_expect(at: *mut u64, bytes: u32) {
        // SAFETY: as in `init`; the block's threads run one at a time.
        unsafe { *at = step(*at, true, bytes as i64) };
    }

    pub(super) unsafe fn wait(at: *mut u64, phase: u32) {
        // SAFETY: as in `arrive_expect`.
        let current = unsafe { *at } & PHASE != 0;
        assert!(
            current != (phase == 1),
            "TransferBarrier::wait: phase {phase} has not completed, and on the host backend \
             nothing can complete it while this thread waits (the block's threads run one at a \
             time: arrive and copy before a sync_threads that precedes the wait)"
        );
    }

    /// Calls `each(box_byte, element)` for every element of `map`'s box at `(col, row)`: its
    /// byte offset in the box as shared memory holds it (swizzled if the map says so), and its
    /// address in the matrix, `None` outside it. Returns the box's bytes.
    fn for_box(
        map: &TensorMap,
        (col, row): (i32, i32),
        element_bytes: usize,
        what: &str,
        mut each: impl FnMut(usize, Option<usize>),
    ) -> usize {
        let w = &map.words;
        assert!(
            w[15] == HOST_MAP,
            "{what}: this tensor map was not made for the host device"
        );
        let [address, cols, rows, stride, box_cols, box_rows, bytes, swizzle] =
            [w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]];
        assert_eq!(
            bytes as usize, element_bytes,
            "{what}: the map's elements are {bytes} bytes, shared memory's {element_bytes}"
        );
        let row_bytes = (box_cols * bytes) as usize;
        for r in 0..box_rows as i64 {
            for c in 0..box_cols as i64 {
                let (gr, gc) = (row as i64 + r, col as i64 + c);
                let inside = (0..rows as i64).contains(&gr) && (0..cols as i64).contains(&gc);
                let byte = c as usize * bytes as usize;
                let chunk = if swizzle != 0 {
                    (byte / 16) ^ (r as usize % 8)
                } else {
                    byte / 16
                };
                let global = inside.then(|| {
                    address as usize + gr as usize * stride as usize + gc as usize * bytes as usize
                });
                each(r as usize * row_bytes + chunk * 16 + byte % 16, global);
            }
        }
        row_bytes * box_rows as usize
    }

    pub(super) unsafe fn copy_2d(
        to: *mut u8,
        map: &TensorMap,
        at: (i32, i32),
        barrier: *mut u64,
        element_bytes: usize,
    ) {
        let moved = for_box(map, at, element_bytes, "copy_box_2d", |dst, src| {
            // SAFETY: the caller's contract: the matrix is readable where inside, the
            // destination box writable.
            unsafe {
                match src {
                    Some(src) => {
                        core::ptr::copy_nonoverlapping(src as *const u8, to.add(dst), element_bytes)
                    }
                    None => core::ptr::write_bytes(to.add(dst), 0, element_bytes),
                }
            }
        });
        // SAFETY: as in `arrive_expect`.
        unsafe { *barrier = step(*barrier, false, -(moved as i64)) };
    }

    pub(super) fn acquire(_: &TensorMap) {}
    pub(super) fn fence_async() {}

    pub(super) unsafe fn store_2d(
        from: *const u8,
        map: &TensorMap,
        at: (i32, i32),
        element_bytes: usize,
    ) {
        for_box(map, at, element_bytes, "store_box_2d", |src, dst| {
            if let Some(dst) = dst {
                // SAFETY: the caller's contract: the source box is readable, the matrix
                // writable where inside.
                unsafe {
                    core::ptr::copy_nonoverlapping(from.add(src), dst as *mut u8, element_bytes)
                };
            }
        });
    }

    pub(super) fn commit() {}

    pub(super) fn wait_read<const PENDING: u32>() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> TiledLayout {
        TiledLayout {
            element_bytes: 2,
            cols: 1000,
            rows: 300,
            row_stride_bytes: 2000,
            box_cols: 64,
            box_rows: 128,
            swizzle_128: true,
        }
    }

    #[test]
    fn layouts_a_gpu_refuses_are_refused() {
        assert_eq!(layout().problem(), None);
        assert_eq!(layout().box_bytes(), 64 * 128 * 2);
        let odd_stride = TiledLayout {
            row_stride_bytes: 2002,
            ..layout()
        };
        assert!(odd_stride.problem().unwrap().contains("multiple of 16"));
        let wide = TiledLayout {
            box_cols: 128,
            ..layout()
        };
        assert!(wide.problem().unwrap().contains("swizzle"));
        let short = TiledLayout {
            row_stride_bytes: 1984,
            ..layout()
        };
        assert!(short.problem().unwrap().contains("shorter"));
    }
}
