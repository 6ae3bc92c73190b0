//! # offload: GPU offload for ordinary Rust
//!
//! Write a kernel as a plain Rust function in a `no_std`-compatible module, mark it
//! `#[offload::kernel]`, and call it like a function. The build script (`offload-build`) compiles
//! the module for `nvptx64-nvidia-cuda` and `amdgcn-amd-amdhsa` inside the ordinary `cargo build`,
//! and the call moves the data, launches on the best device (a CUDA GPU, else the host CPU) and
//! moves the results back.
//!
//! ```ignore
//! // src/kernels.rs
//! use offload::prelude::*;
//!
//! #[offload::kernel]
//! pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
//!     for (i, y) in y.iter_mine() {
//!         *y += a * x[i];
//!     }
//! }
//!
//! // src/main.rs
//! mod kernels;
//! offload::embed_images!();
//! fn main() -> offload::Result<()> {
//!     let x = vec![1.0f32; 1 << 20];
//!     let mut y = vec![2.0f32; 1 << 20];
//!     kernels::saxpy(3.0, &x, &mut y)?;   // y is back on the host, all 5.0
//!     Ok(())
//! }
//! ```
//!
//! ## Moving data once: data regions
//! A call moves its slices every time. A [`region`] maps host data once for many launches
//! (OpenMP's `target data`, with its reference counts); map kinds at the call site ([`from`],
//! [`to`], [`tofrom`], [`alloc`], [`present`]) and device-resident [`DeviceVec`]s refine it, and
//! `OFFLOAD_INFO=1` prints every transfer ([`trace`]).
//!
//! ```ignore
//! offload::region(|r| {
//!     let x = r.to(&x)?;              // copied in once
//!     let mut y = r.tofrom(&mut y)?;  // copied in once, back once at the end
//!     for _ in 0..100 {
//!         kernels::saxpy(2.0, &x, &mut y)?;
//!     }
//!     Ok(())
//! })?;
//! ```
//!
//! ## The soundness rule for outputs
//! A `&mut [T]` parameter is seen inside the kernel as a [`ThreadSlice`]: safe code can reach only
//! the elements the running thread owns ([`ThreadSlice::iter_mine`]), so the threads of one
//! launch never touch the same element and a launch cannot race. Writing anywhere else is
//! `unsafe` ([`ThreadSlice::at`]) under the contract that no two threads reach one element.
//! Element-wise updates move 16 bytes per access with [`ThreadSlice::update_mine_wide`], which
//! shares out aligned chunks the same race-free, shape-independent way.
//! `&[T]` parameters are read-only for every thread; scalars and `#[repr(C)]` structs
//! ([`DeviceCopy`]) go by value. Threads exchange data through a `&[Atomic<T>]` parameter
//! ([`Atomic`], safe), warp operations ([`warp_sum`], [`shuffle`]…, safe) or per-block shared
//! memory ([`shared!`], [`dynamic_shared`]: a [`SharedSlice`] whose reads and writes are
//! `unsafe`, ordered by the [`sync_threads`] barrier).
//!
//! ## Streams
//! Every kernel also gets `NAME::enqueue(&stream, launch, args…)`, which queues the launch and
//! returns. Streams live in a [`scope`] that waits for all of them before it returns, so the data
//! they use stays borrowed until then; [`DeviceSlice`]s keep data on the device between queued
//! kernels.
#![cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), no_std)]

pub use offload_kernel::*;
/// Launch with the syntax of rustc nightly's `core::offload::offload!` (see the macro's docs).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_macros::offload;
pub use offload_macros::{kernel, DeviceCopy};

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_runtime::{
    default_device, devices, last_launch, region, region_on, scope, BackendKind, Device,
    DeviceImage, DeviceSlice, DeviceVec, Error, Event, ImageFormat, ImageSet, Launch, LaunchReport,
    Limits, Mapped, MappedMut, MemoryInfo, PinnedVec, Region, Result, Stream, StreamScope,
};

/// How kernel arguments map to a device (`InArg`, `OutArg` and the map kinds).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_runtime::map;
/// Map kinds at the call site (`from(&mut y)`, `to(&x)`, `tofrom`, `alloc`, `present`): see
/// [`map`].
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_runtime::map::{alloc, from, present, to, tofrom};
/// The transfer trace (`OFFLOAD_INFO=1`) and its counters.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_runtime::trace;

/// The names of rustc nightly's `core::offload` (std::offload), so that a program written for it
/// switches by changing its import: `use core::offload::{offload, offload_kernel}` becomes
/// `use offload::std_offload::{offload, offload_kernel}`.
///
/// - `#[offload_kernel]` is `#[offload::kernel]` that embeds the crate's device images itself.
///   Raw pointers map as in std::offload, by the size of the pointee: `*const T` copies
///   `size_of::<T>()` bytes to the device, `*mut T` there and back, and every GPU thread gets
///   the same device address. A generic kernel declares its instances (see
///   [`kernel`](macro@kernel)); one type parameter with marker bounds only (`T: Copy`) is built
///   for every primitive type.
/// - `offload!` takes std::offload's fields and, like it, evaluates to `()`: a failed launch
///   panics with the error, and raw-pointer arguments are passed without an `unsafe` block
///   (std::offload's contract: each points to a live, aligned value nothing else touches during
///   the launch).
///
/// The program is compiled for the device too (`offload_build::Kernels::new("src/main.rs")`),
/// so, as for std::offload, its host-only code sits behind `#[cfg(target_os = "linux")]` or
/// `#[cfg(not(target_arch = "nvptx64"))]`. std::offload has no portable thread index: a kernel
/// reading `core::arch::nvptx` registers behind `#[cfg(target_arch = "nvptx64")]` does not
/// compile for the host backend (use `offload::global_id()`).
pub mod std_offload {
    pub use offload_macros::offload_kernel;
    pub use offload_macros::offload_std as offload;
}

/// What a kernels module usually imports.
pub mod prelude {
    pub use offload_kernel::math;
    pub use offload_kernel::{
        ballot, lane_id, shuffle, shuffle_down, shuffle_up, shuffle_xor, sync_warp, vote_all,
        vote_any, warp_id, warp_max, warp_min, warp_reduce, warp_sum,
    };
    pub use offload_kernel::{
        block_dim, block_idx, dynamic_shared, fence_block, fence_device, fence_system, global_id,
        global_threads, grid_dim, grid_stride, sync_threads, thread_idx, Atomic, DeviceCopy, Dim3,
        SharedSlice, ThreadSlice, WideElement,
    };
    pub use offload_macros::DeviceCopy;
}

/// Embed the device images that `offload-build` produced for this crate. Call it once, at the
/// crate root of every crate that defines kernels (the kernel attribute refers to it).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[macro_export]
macro_rules! embed_images {
    () => {
        #[doc(hidden)]
        pub static __OFFLOAD_IMAGES: $crate::ImageSet =
            include!(concat!(env!("OUT_DIR"), "/offload_images.rs"));
    };
}

/// Items the generated code uses on the host; not a stable API.
#[doc(hidden)]
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod __private {
    pub use offload_runtime::kernel::{launch, Kernel, KernelArg};
    pub use offload_runtime::stream::enqueue;
}

/// Items the generated device entries use; not a stable API.
#[doc(hidden)]
pub mod __device {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    pub use offload_kernel::panic_record::record_panic;
    pub use offload_kernel::slice_from_raw;
}
