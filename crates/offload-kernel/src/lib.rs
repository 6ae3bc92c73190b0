//! The device-side half of `offload`: what a kernel body can call.
//!
//! Everything here compiles for `nvptx64-nvidia-cuda` (reading PTX special registers), for
//! `amdgcn-amd-amdhsa` (work-item ids, the dispatch packet, and a few operations offload-build's
//! AMD link step defines: see `amdgpu`) and for the host (reading the thread context that the host
//! backend sets before it runs each GPU thread), so one kernel body gives the same results on
//! all of them.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, asm_experimental_arch, core_intrinsics)
)]
#![cfg_attr(
    target_arch = "amdgpu",
    feature(stdarch_amdgpu, core_intrinsics, gpu_intrinsics)
)]
#![cfg_attr(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    allow(internal_features)
)]

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
extern crate std;

#[cfg(target_arch = "amdgpu")]
mod amdgpu;
mod arith;
mod atomic;
mod device_copy;
mod fence;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod host_block;
mod index;
pub mod math;
#[doc(hidden)]
pub mod panic_record;
mod shared;
mod sync;
mod thread_slice;
mod warp;
mod wide;

pub use atomic::Atomic;
pub use device_copy::DeviceCopy;
pub use fence::{fence_block, fence_device, fence_system};
/// The `half` crate (`f16`, `bf16`), whose types are `DeviceCopy`: kernels can use it as
/// `offload::half` without a dependency of their own.
pub use half;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use index::host_context;
pub use index::{
    block_dim, block_idx, global_id, global_threads, grid_dim, grid_stride, thread_idx, Dim3,
    GridStride,
};
pub use shared::{dynamic_shared, SharedSlice, SHARED_ALIGN};
pub use sync::sync_threads;
pub use thread_slice::{MineIter, ThreadSlice};
pub use warp::{
    ballot, lane_id, shuffle, shuffle_down, shuffle_up, shuffle_xor, sync_warp, vote_all, vote_any,
    warp_id, warp_max, warp_min, warp_reduce, warp_size, warp_sum, WarpSum, WarpValue,
    MAX_WARP_SIZE,
};
pub use wide::{WideElement, WIDE_BYTES};

/// The host backend's allocation behind one `shared!` site (used by the macro).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[doc(hidden)]
pub fn __host_static_shared(site: &'static u8, bytes: usize) -> *mut u8 {
    host_block::static_shared(site, bytes)
}

/// Rebuild a read-only slice parameter from the (pointer, length) pair of the device ABI.
///
/// # Safety
/// For `len > 0`, `ptr..ptr+len` must be valid, initialised and unchanged for `'a`.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn slice_from_raw<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, len)
    }
}
