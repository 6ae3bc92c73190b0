#![doc = include_str!("crate_docs.md")]
#![cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), no_std)]
#![warn(missing_docs)]

pub use offload_kernel::*;
/// Launch with the syntax of rustc nightly's `core::offload::offload!` (see the macro's docs).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_macros::offload;
pub use offload_macros::{kernel, DeviceCopy};

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use offload_runtime::{
    default_device, devices, devices_of, last_launch, measure_device_time, plugins_without_devices,
    region, region_on, scope, BackendKind, Borrows, Device, DeviceImage, DeviceSlice, DeviceVec,
    DeviceView, DeviceViewMut, Error, Event, Graph, ImageFormat, ImageSet, Launch, LaunchReport,
    Limits, Mapped, MappedMut, MemoryInfo, NativeQueue, PinnedVec, Platform, Records, Region,
    Result, Runs, Stream, StreamMode, StreamScope,
};

/// Level-1 BLAS (cuBLAS on CUDA devices) on a stream scope's device data, in order with the
/// stream's kernels (feature `cublas`).
#[cfg(all(
    feature = "cublas",
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
))]
pub use offload_runtime::blas;
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

pub mod scan;

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

/// N-dimensional array views (1 to 3 dimensions, row-major) as kernel parameters: in the
/// kernel, [`ArrayView2`](nd::ArrayView2) and friends (indexing per axis; outputs written through
/// `iter_mine()`, which yields `(row, col, &mut element)` for the elements the thread owns); at
/// the launch, ndarray's views of the same name (feature `ndarray`). The shape travels with the
/// data; a view that is not contiguous in row-major order is `Err(InvalidArgument)`.
///
/// ```
/// # #[cfg(feature = "ndarray")]
/// mod kernels {
///     use offload::nd::{ArrayView1, ArrayView2, ArrayViewMut2};
///
///     /// `out[[r, c]] = a[[r, c]] + bias[[c]]`.
///     #[offload::kernel]
///     pub fn add_bias(a: ArrayView2<f32>, bias: ArrayView1<f32>, mut out: ArrayViewMut2<f32>) {
///         for (row, col, o) in out.iter_mine() {   // this thread's elements, no division each
///             *o = a[[row, col]] + bias[[col]];
///         }
///     }
/// }
/// # static __OFFLOAD_IMAGES: offload::ImageSet = offload::ImageSet { images: &[], kernels: &[], unavailable: Some("doctest") };
/// # #[cfg(feature = "ndarray")]
/// fn main() -> offload::Result<()> {
///     use offload::nd::ndarray::{array, Array2};
///     let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
///     let bias = array![10.0f32, 20.0, 30.0];
///     let mut out = Array2::<f32>::zeros((2, 3));
///     kernels::add_bias(a.view(), bias.view(), out.view_mut())?;
///     assert_eq!(out, array![[11.0, 22.0, 33.0], [14.0, 25.0, 36.0]]);
///     // A transposed view is not contiguous: an error, and `out` keeps its values.
///     let refused = kernels::add_bias(a.t(), bias.view(), out.view_mut());
///     assert!(matches!(refused, Err(offload::Error::InvalidArgument { argument: "a", .. })));
///     Ok(())
/// }
/// # #[cfg(not(feature = "ndarray"))]
/// # fn main() {}
/// ```
pub mod nd {
    /// The ndarray crate whose views the launchers accept (feature `ndarray`).
    #[cfg(all(
        feature = "ndarray",
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    pub use ndarray;
    pub use offload_kernel::nd::*;
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    pub use offload_runtime::nd::{NdIn, NdOut};
}

/// What a kernels module usually imports.
pub mod prelude {
    pub use offload_kernel::{
        ballot, lane_id, shuffle, shuffle_down, shuffle_up, shuffle_xor, sync_warp, vote_all,
        vote_any, warp_id, warp_max, warp_min, warp_reduce, warp_sum,
    };
    pub use offload_kernel::{
        block_dim, block_idx, block_reduce, dynamic_shared, fence_block, fence_device, fence_system,
        for_each_mine_wide, global_id, global_threads, grid_dim, grid_stride, sync_threads,
        thread_idx, tile_starts, Atomic, BlockTiles, DeviceCopy, Dim3, Grid2, Grid3, GridOut2,
        GridOut3, MineOutputs, Neighbours2, Neighbours3, Reduce, Scattered, SharedSlice,
        ThreadSlice, ThreadWindow, Tile, TileStarts, WideElement, WideOutputs, WideSlice, Window2,
        Window3,
    };
    pub use offload_kernel::{commit_async_copies, copy_async_chunk, wait_async_copies};
    pub use offload_kernel::{math, mma};
    pub use offload_macros::DeviceCopy;
    // What `#[offload::kernel]` names to count this module's import as used in a module with
    // kernels (see offload-macros' kernel.rs): the language prelude's own `Copy`, so nothing
    // changes for the importing module.
    #[doc(hidden)]
    pub use core::marker::Copy;
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

/// The user guide (`docs/guide/`, one module per chapter): its Rust examples compile and run as
/// doctests of this crate (`tests/readme_examples.rs` checks that every chapter is here). Only
/// under `cfg(doctest)`: the guide lies outside the crate's package.
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../../docs/guide/getting-started.md")]
    pub mod getting_started {}
    #[doc = include_str!("../../../docs/guide/writing-kernels.md")]
    pub mod writing_kernels {}
    #[doc = include_str!("../../../docs/guide/data-movement.md")]
    pub mod data_movement {}
    #[doc = include_str!("../../../docs/guide/streams-and-graphs.md")]
    pub mod streams_and_graphs {}
    #[doc = include_str!("../../../docs/guide/patterns.md")]
    pub mod patterns {}
    #[doc = include_str!("../../../docs/guide/platforms.md")]
    pub mod platforms {}
    #[doc = include_str!("../../../docs/guide/performance.md")]
    pub mod performance {}
    #[doc = include_str!("../../../docs/guide/porting.md")]
    pub mod porting {}
    #[doc = include_str!("../../../docs/guide/troubleshooting.md")]
    pub mod troubleshooting {}
}

/// Items the generated code uses on the host; not a stable API.
#[doc(hidden)]
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod __private {
    pub use offload_kernel::host_context::{run_threads, ThreadRange};
    pub use offload_runtime::kernel::{Kernel, KernelArg, ThreadShare};
    pub use offload_runtime::launch::launch;
    pub use offload_runtime::ordering::set_tracking;
    pub use offload_runtime::plugins::PackedArgs;
    pub use offload_runtime::prepared_enqueue::{prepare, PreparedEnqueue};
    pub use offload_runtime::stream::enqueue;
}

/// Items the generated device entries use; not a stable API.
#[doc(hidden)]
pub mod __device {
    pub use offload_kernel::entry_slice;
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    pub use offload_kernel::panic_record::record_panic;
}
