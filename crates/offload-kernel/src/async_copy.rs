//! Copies from global to shared memory that run while the thread goes on (PTX `cp.async`,
//! sm_80 and newer): a kernel starts the copies of its next tiles, computes on the current ones,
//! and waits only when it needs the next.
//!
//! Each thread starts copies ([`copy_async_chunk`]), closes them into a group
//! ([`commit_async_copies`]), and later waits until at most `N` of its groups are still in flight
//! ([`wait_async_copies`]). A wait covers the calling thread's copies only: the block reads a
//! tile after every thread that copied part of it has waited and the block has met at a barrier.
//!
//! On the host backend a copy happens at once, and commit and wait do nothing: a kernel that
//! keeps to the rule above computes the same on both.

use crate::SharedSlice;
use core::mem::size_of;

/// Bytes of one asynchronous copy.
pub const ASYNC_CHUNK_BYTES: usize = 16;

/// Starts copying the 16 bytes at element `src_offset` of `src` to element `dst_offset` of
/// `dst`: the first `valid` elements come from `src`, the rest of the 16 bytes are zeros (so a
/// tile may overhang the end of a matrix; with `valid == 0` nothing is read).
///
/// # Safety
/// No thread reads or writes the destination chunk from now until this thread has waited for
/// the copy ([`wait_async_copies`]) and the block has then met at a barrier.
///
/// # Panics
/// If the destination chunk is not inside `dst`, the `valid` elements are not inside `src`, more
/// than 16 bytes are valid, or either end is not at a 16-byte boundary.
#[inline(always)]
#[track_caller]
pub unsafe fn copy_async_chunk<T: Copy>(
    dst: SharedSlice<T>,
    dst_offset: usize,
    src: &[T],
    src_offset: usize,
    valid: usize,
) {
    let chunk = ASYNC_CHUNK_BYTES / size_of::<T>();
    let to = dst.as_ptr().wrapping_add(dst_offset);
    let from = src.as_ptr().wrapping_add(src_offset);
    assert!(
        dst_offset + chunk <= dst.len()
            && valid <= chunk
            && (valid == 0 || src_offset + valid <= src.len())
            && (to as usize | from as usize) % ASYNC_CHUNK_BYTES == 0,
        "copy_async_chunk: a chunk outside its slice, or not 16-byte aligned"
    );
    // SAFETY: both ends checked above; the caller keeps other threads off the destination.
    unsafe { copy_async_chunk_unchecked(dst, dst_offset, from, valid) }
}

/// [`copy_async_chunk`] from a raw pointer, without its checks (for copy loops that check a
/// whole tile once): the first `valid` elements at `src` go to element `dst_offset` of `dst`,
/// zeros fill the rest of the 16 bytes.
///
/// # Safety
/// As for [`copy_async_chunk`]; moreover the 16 destination bytes lie inside `dst`, `valid`
/// elements at `src` are readable (device memory), `valid <= 16 / size_of::<T>()`, and `dst`'s
/// chunk and `src` start at 16-byte boundaries.
#[inline(always)]
pub unsafe fn copy_async_chunk_unchecked<T: Copy>(
    dst: SharedSlice<T>,
    dst_offset: usize,
    src: *const T,
    valid: usize,
) {
    crate::mma::require_tensor_cores::<T>();
    // SAFETY: the caller's contract.
    unsafe {
        arch::copy(
            dst.as_ptr() as *const u8,
            dst_offset * size_of::<T>(),
            src as *const u8,
            valid * size_of::<T>(),
        )
    }
}

/// Closes the copies this thread started since the last commit into one group.
#[inline(always)]
pub fn commit_async_copies() {
    arch::commit();
}

/// Waits until at most `PENDING` of this thread's committed groups are unfinished (the newest
/// ones): `wait_async_copies::<0>()` waits for all of them.
#[inline(always)]
pub fn wait_async_copies<const PENDING: u32>() {
    arch::wait::<PENDING>();
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    /// # Safety
    /// `tile + offset` and `from` are 16-byte aligned shared and global addresses; `bytes <= 16`
    /// bytes at `from` are readable.
    #[inline(always)]
    pub(super) unsafe fn copy(tile: *const u8, offset: usize, from: *const u8, bytes: usize) {
        let to = crate::shared_window::shared_address(tile).wrapping_add(offset as u32);
        // SAFETY: the caller's contract; the asm reads `bytes` at `from` and writes 16 at `to`.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u64 offload_s; cvta.to.global.u64 offload_s, {from};",
                "cp.async.cg.shared.global [{to}], [offload_s], 16, {n}; }}",
                to = in(reg32) to,
                from = in(reg64) from,
                n = in(reg32) bytes as u32,
                options(nostack),
            );
        }
    }

    // Before sm_80 there are no copies to commit or wait for (starting one does not compile).
    #[inline(always)]
    pub(super) fn commit() {
        #[cfg(target_feature = "sm_80")]
        // SAFETY: no operands; memory is not declared untouched, so accesses stay on their side.
        unsafe {
            core::arch::asm!("cp.async.commit_group;", options(nostack))
        };
    }

    #[inline(always)]
    pub(super) fn wait<const PENDING: u32>() {
        #[cfg(target_feature = "sm_80")]
        // SAFETY: as in `commit`: afterwards the covered copies have landed in shared memory.
        unsafe {
            core::arch::asm!("cp.async.wait_group {n};", n = const PENDING, options(nostack))
        };
    }
}

#[cfg(any(
    target_arch = "amdgpu",
    all(target_arch = "nvptx64", feature = "spirv")
))]
mod arch {
    pub(super) unsafe fn copy(_: *const u8, _: usize, _: *const u8, _: usize) {
        unreachable!("require_tensor_cores panicked before")
    }
    pub(super) fn commit() {}
    pub(super) fn wait<const PENDING: u32>() {}
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::ASYNC_CHUNK_BYTES;

    /// # Safety
    /// `tile + offset` holds 16 writable bytes, `from` `bytes <= 16` readable ones.
    pub(super) unsafe fn copy(tile: *const u8, offset: usize, from: *const u8, bytes: usize) {
        let to = tile.wrapping_add(offset) as *mut u8;
        // SAFETY: the caller's contract; the ranges are in different memories (shared, global).
        unsafe {
            core::ptr::copy_nonoverlapping(from, to, bytes);
            core::ptr::write_bytes(to.add(bytes), 0, ASYNC_CHUNK_BYTES - bytes);
        }
    }

    pub(super) fn commit() {}

    pub(super) fn wait<const PENDING: u32>() {}
}
