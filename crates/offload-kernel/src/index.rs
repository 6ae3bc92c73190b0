//! Thread and block ids. On nvptx64 they are PTX special registers, on SPIR-V OpenCL's work-item
//! functions; on amdgcn the work-item and work-group ids, and extents from the launch's dispatch
//! packet; on the host the host backend stores them in a thread-local before running each GPU
//! thread.

/// A 3D extent or position, as in CUDA's `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// Number of points in the extent, `x * y * z`.
    pub const fn count(self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// Row-major linear index of position `self` inside `extent` (x fastest).
    #[inline(always)]
    pub fn linear_in(self, extent: Dim3) -> usize {
        (self.z as usize * extent.y as usize + self.y as usize) * extent.x as usize
            + self.x as usize
    }
}

impl core::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

impl From<[u32; 3]> for Dim3 {
    fn from([x, y, z]: [u32; 3]) -> Self {
        Dim3::new(x, y, z)
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
mod arch {
    use super::Dim3;
    use core::arch::nvptx::*;

    #[inline(always)]
    pub fn thread_idx() -> Dim3 {
        unsafe {
            Dim3::new(
                _thread_idx_x() as u32,
                _thread_idx_y() as u32,
                _thread_idx_z() as u32,
            )
        }
    }
    #[inline(always)]
    pub fn block_idx() -> Dim3 {
        unsafe {
            Dim3::new(
                _block_idx_x() as u32,
                _block_idx_y() as u32,
                _block_idx_z() as u32,
            )
        }
    }
    #[inline(always)]
    pub fn block_dim() -> Dim3 {
        unsafe {
            Dim3::new(
                _block_dim_x() as u32,
                _block_dim_y() as u32,
                _block_dim_z() as u32,
            )
        }
    }
    #[inline(always)]
    pub fn grid_dim() -> Dim3 {
        unsafe {
            Dim3::new(
                _grid_dim_x() as u32,
                _grid_dim_y() as u32,
                _grid_dim_z() as u32,
            )
        }
    }
}

#[cfg(target_arch = "amdgpu")]
mod arch {
    use super::Dim3;
    use crate::amdgpu;
    use core::arch::amdgpu::*;

    #[inline(always)]
    pub fn thread_idx() -> Dim3 {
        Dim3::new(workitem_id_x(), workitem_id_y(), workitem_id_z())
    }
    #[inline(always)]
    pub fn block_idx() -> Dim3 {
        Dim3::new(workgroup_id_x(), workgroup_id_y(), workgroup_id_z())
    }
    #[inline(always)]
    pub fn block_dim() -> Dim3 {
        amdgpu::workgroup_size()
    }
    /// The packet counts work-items; offload launches whole work-groups only.
    #[inline(always)]
    pub fn grid_dim() -> Dim3 {
        let (items, group) = (amdgpu::grid_size(), amdgpu::workgroup_size());
        Dim3::new(items.x / group.x, items.y / group.y, items.z / group.z)
    }
}

/// OpenCL's ids: local id = thread, group = block, local size = block size, groups = grid.
#[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
mod arch {
    use super::Dim3;
    use crate::spirv;

    #[inline(always)]
    fn dim3(get: unsafe extern "C" fn(u32) -> usize) -> Dim3 {
        // SAFETY: the work-item functions read built-in variables, for any dimension below 3.
        unsafe { Dim3::new(get(0) as u32, get(1) as u32, get(2) as u32) }
    }

    #[inline(always)]
    pub fn thread_idx() -> Dim3 {
        dim3(spirv::get_local_id)
    }
    #[inline(always)]
    pub fn block_idx() -> Dim3 {
        dim3(spirv::get_group_id)
    }
    #[inline(always)]
    pub fn block_dim() -> Dim3 {
        dim3(spirv::get_local_size)
    }
    #[inline(always)]
    pub fn grid_dim() -> Dim3 {
        dim3(spirv::get_num_groups)
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::Dim3;
    use core::cell::Cell;

    /// Where a host-backend thread is in the grid.
    #[derive(Clone, Copy, Debug)]
    pub struct ThreadContext {
        pub thread_idx: Dim3,
        pub block_idx: Dim3,
        pub block_dim: Dim3,
        pub grid_dim: Dim3,
        /// Lanes per warp: 32 as on NVIDIA GPUs, or 64 as on AMD's CDNA GPUs.
        pub warp_size: u32,
    }

    const OUTSIDE: ThreadContext = ThreadContext {
        thread_idx: Dim3::new(0, 0, 0),
        block_idx: Dim3::new(0, 0, 0),
        block_dim: Dim3::new(1, 1, 1),
        grid_dim: Dim3::new(1, 1, 1),
        warp_size: 32,
    };

    std::thread_local! {
        static CONTEXT: Cell<ThreadContext> = const { Cell::new(OUTSIDE) };
    }

    /// Run `f` as the GPU thread described by `ctx` (used by the host backend).
    pub fn with_thread<R>(ctx: ThreadContext, f: impl FnOnce() -> R) -> R {
        struct Restore(ThreadContext);
        impl Drop for Restore {
            fn drop(&mut self) {
                CONTEXT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CONTEXT.with(|c| c.replace(ctx)));
        f()
    }

    fn get() -> ThreadContext {
        CONTEXT.with(|c| c.get())
    }

    pub fn thread_idx() -> Dim3 {
        get().thread_idx
    }
    pub fn block_idx() -> Dim3 {
        get().block_idx
    }
    pub fn block_dim() -> Dim3 {
        get().block_dim
    }
    pub fn grid_dim() -> Dim3 {
        get().grid_dim
    }
    pub fn warp_size() -> u32 {
        get().warp_size
    }
}

/// The host backend's handle on the thread context (not for kernels).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod host_context {
    pub use super::arch::{warp_size, with_thread, ThreadContext};
}

/// This thread's position in its block (`threadIdx`).
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    arch::thread_idx()
}

/// This block's position in the grid (`blockIdx`).
#[inline(always)]
pub fn block_idx() -> Dim3 {
    arch::block_idx()
}

/// Threads per block (`blockDim`).
#[inline(always)]
pub fn block_dim() -> Dim3 {
    arch::block_dim()
}

/// Blocks in the grid (`gridDim`).
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    arch::grid_dim()
}

/// This thread's linear index in the whole launch: the block's row-major index times the
/// threads per block, plus the thread's row-major index inside its block. Unique per thread
/// and dense in `0..global_threads()`.
#[inline(always)]
pub fn global_id() -> usize {
    let block_dim = block_dim();
    let per_block = block_dim.count() as usize;
    block_idx().linear_in(grid_dim()) * per_block + thread_idx().linear_in(block_dim)
}

/// Total number of threads in the launch.
#[inline(always)]
pub fn global_threads() -> usize {
    (grid_dim().count() * block_dim().count()) as usize
}

/// The indices below `len` that this thread handles in a grid-stride loop: `global_id()`, then
/// every `global_threads()`-th after it. Together the threads of a launch visit `0..len` once,
/// whatever the launch shape: the way to walk a `&[T]` input (as `ThreadSlice::iter_mine` walks
/// an output).
#[inline(always)]
pub fn grid_stride(len: usize) -> GridStride {
    GridStride {
        next: global_id(),
        len,
        stride: global_threads(),
    }
}

/// Iterator of [`grid_stride`].
pub struct GridStride {
    next: usize,
    len: usize,
    stride: usize,
}

impl Iterator for GridStride {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        let i = self.next;
        if i < self.len {
            self.next = i + self.stride;
            Some(i)
        } else {
            None
        }
    }
}
