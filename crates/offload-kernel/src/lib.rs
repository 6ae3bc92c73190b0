//! The device-side half of `offload`: what a kernel body can call.
//!
//! Everything here compiles for `nvptx64-nvidia-cuda` (reading PTX special registers), for
//! `amdgcn-amd-amdhsa` (work-item ids, the dispatch packet, and a few operations offload-build's
//! AMD link step defines: see `amdgpu`), for SPIR-V (the same nvptx64 build with the `spirv`
//! feature, calling OpenCL built-ins instead; see `spirv`) and for the host (reading the thread
//! context that the host backend sets before it runs each GPU thread), so one kernel body gives
//! the same results on all of them.
#![no_std]
#![warn(missing_docs)]
#![cfg_attr(
    all(target_arch = "nvptx64", not(feature = "spirv")),
    feature(stdarch_nvptx, asm_experimental_arch, link_llvm_intrinsics)
)]
#![cfg_attr(
    target_arch = "amdgpu",
    feature(stdarch_amdgpu, core_intrinsics, gpu_intrinsics, link_llvm_intrinsics)
)]
#![cfg_attr(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    allow(internal_features)
)]
#![cfg_attr(target_arch = "nvptx64", feature(core_intrinsics))]

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
extern crate std;

#[cfg(target_arch = "amdgpu")]
mod amdgpu;
mod arith;
mod async_copy;
mod atomic;
mod block_tiles;
mod device_copy;
mod fence;
mod grid;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod host_block;
mod index;
pub mod math;
mod mine_with;
pub mod mma;
pub mod nd;
mod output_saving;
#[cfg(all(test, not(any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod output_saving_tests;
#[doc(hidden)]
pub mod panic_record;
pub mod reduce;
pub mod scan;
mod scatter;
mod shared;
mod shared_atomic;
#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod shared_window;
#[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
mod spirv;
mod stencil;
mod sync;
pub mod tensor_copy;
#[cfg(all(test, not(any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod test_cases;
mod thread_slice;
mod thread_window;
mod tile_starts;
mod warp;
mod wide;
mod wide_cut;
mod wide_element;
mod wide_lanes;
mod wide_read;

pub use async_copy::{
    commit_async_copies, copy_async_chunk, copy_async_chunk_unchecked, wait_async_copies,
    ASYNC_CHUNK_BYTES,
};
pub use atomic::Atomic;
pub use block_tiles::{BlockTileIter, BlockTiles, Tile, TileMineIter};
pub use device_copy::DeviceCopy;
pub use fence::{fence_block, fence_device, fence_system};
pub use grid::{Grid2, Grid3, Window2, Window3};
/// The `half` crate (`f16`, `bf16`), whose types are `DeviceCopy`: kernels can use it as
/// `offload::half` without a dependency of their own.
pub use half;
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use index::host_context;
pub use index::{
    block_dim, block_idx, global_id, global_threads, grid_dim, grid_stride, thread_idx, Dim3,
    GridStride,
};
pub use mine_with::{MineOutputs, MineWith, MineZip};
pub use reduce::{block_reduce, Reduce};
pub use scatter::{Scatter, ScatterIndex, Scattered};
pub use shared::{dynamic_shared, SharedSlice, SHARED_ALIGN};
pub use stencil::{
    GridOut2, GridOut3, Neighbours2, Neighbours3, MIN_STRIP_ROWS, STRIP_BYTES, STRIP_BYTES_3D,
};
pub use sync::sync_threads;
pub use thread_slice::{MineIter, ThreadSlice};
pub use thread_window::ThreadWindow;
pub use tile_starts::{tile_starts, TileStarts};
pub use warp::{
    ballot, lane_id, shuffle, shuffle_down, shuffle_up, shuffle_xor, sync_warp, vote_all, vote_any,
    warp_id, warp_max, warp_min, warp_reduce, warp_size, warp_sum, WarpSum, WarpValue,
    MAX_WARP_SIZE,
};
pub use wide::WideSlice;
pub use wide_element::{WideElement, WIDE_BYTES};
pub use wide_lanes::{WideInputs, WideOutputs};
pub use wide_read::for_each_mine_wide;

/// The host backend's allocation behind one `shared!` site (used by the macro).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[doc(hidden)]
pub fn __host_static_shared(site: &'static u8, bytes: usize) -> *mut u8 {
    host_block::static_shared(site, bytes)
}

/// The read-only slice behind a kernel's `(pointer, length)` parameter pair, null for no bytes
/// (the device entry receives the pointer as `Option<&[T; 0]>`, which carries `noalias readonly`).
///
/// # Safety
/// For `len > 0` and a non-zero-sized `T`, `len` elements from `ptr` must be valid, initialised
/// and unchanged for the returned lifetime.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn entry_slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    // Null becomes the dangling address `align_of::<T>()`, which a slice of no bytes may have.
    // It is computed from the pointer itself, not chosen between it and a constant, so that the
    // compiler still sees every load as based on the `noalias readonly` parameter, the
    // condition for the non-coherent cache.
    let ptr = ptr.map_addr(|a| a | ((a == 0) as usize * core::mem::align_of::<T>()));
    // SAFETY: per the contract; with no bytes to read, any non-null aligned pointer will do.
    unsafe { core::slice::from_raw_parts(ptr, len) }
}
