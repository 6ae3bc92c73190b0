//! Thread and block ids. On nvptx64 they are PTX special registers, on SPIR-V OpenCL's work-item
//! functions; on amdgcn the work-item and work-group ids, and extents from the launch's dispatch
//! packet; on the host the host backend stores them in a thread-local before running each GPU
//! thread, or before running a range of threads as one call (`host_context::run_threads`).

/// A 3D extent or position, as in CUDA's `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Dim3 {
    /// Extent or index along x (the fastest-varying axis).
    pub x: u32,
    /// Extent or index along y.
    pub y: u32,
    /// Extent or index along z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
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

    /// The position of row-major index `i` (x fastest) in `extent`: the inverse of
    /// [`linear_in`](Self::linear_in).
    pub fn from_linear(i: u64, extent: Dim3) -> Dim3 {
        let (x, y) = (extent.x as u64, extent.y as u64);
        Dim3::new((i % x) as u32, ((i / x) % y) as u32, (i / (x * y)) as u32)
    }

    /// The next position in row-major order (x fastest) inside `extent`, wrapping to the origin
    /// after the last; `true` when it wrapped.
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    fn advance_in(&mut self, extent: Dim3) -> bool {
        self.x += 1;
        if self.x < extent.x {
            return false;
        }
        self.x = 0;
        self.y += 1;
        if self.y < extent.y {
            return false;
        }
        self.y = 0;
        self.z += 1;
        if self.z < extent.z {
            return false;
        }
        self.z = 0;
        true
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
        let [x, y, z] = amdgpu::workgroup_size();
        Dim3::new(x, y, z)
    }
    /// The packet counts work-items; offload launches whole work-groups only.
    #[inline(always)]
    pub fn grid_dim() -> Dim3 {
        let ([x, y, z], [gx, gy, gz]) = (amdgpu::grid_size(), amdgpu::workgroup_size());
        Dim3::new(x / gx, y / gy, z / gz)
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

/// On GPUs the global id and thread count follow from the ids; the host backend keeps them worked
/// out per thread instead (`arch::global_id`). Computed in 32-bit arithmetic, as CUDA C does with
/// `int`, and widened once: the runtime launches fewer than 2^32 threads (`MAX_LAUNCH_THREADS`
/// in offload-runtime), so no product overflows, and 64-bit multiplies cost GPUs twice or more.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
mod derived {
    use super::arch::{block_dim, block_idx, grid_dim, thread_idx};
    use super::Dim3;

    /// Row-major index of `at` in `extent` (x fastest), in 32 bits.
    #[inline(always)]
    fn linear32(at: Dim3, extent: Dim3) -> u32 {
        (at.z.wrapping_mul(extent.y).wrapping_add(at.y))
            .wrapping_mul(extent.x)
            .wrapping_add(at.x)
    }

    #[inline(always)]
    fn count32(extent: Dim3) -> u32 {
        extent.x.wrapping_mul(extent.y).wrapping_mul(extent.z)
    }

    #[inline(always)]
    pub fn global_id() -> usize {
        let block_dim = block_dim();
        linear32(block_idx(), grid_dim())
            .wrapping_mul(count32(block_dim))
            .wrapping_add(linear32(thread_idx(), block_dim)) as usize
    }
    #[inline(always)]
    pub fn global_threads() -> usize {
        count32(grid_dim()).wrapping_mul(count32(block_dim())) as usize
    }
    /// This thread's global id, one past it, and the launch's thread count.
    #[inline(always)]
    pub fn ids_run() -> (usize, usize, usize) {
        let id = global_id();
        (id, id + 1, global_threads())
    }
}
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
use arch as global;
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
use derived as global;

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod arch {
    use super::Dim3;
    use core::cell::Cell;

    /// Where a host-backend thread is in the grid.
    #[derive(Clone, Copy, Debug)]
    pub struct ThreadContext {
        /// The thread's index in its block.
        pub thread_idx: Dim3,
        /// The block's index in the grid.
        pub block_idx: Dim3,
        /// Threads per block.
        pub block_dim: Dim3,
        /// Blocks in the grid.
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

    /// The context of the GPU thread running on this OS thread, with its global id and the
    /// launch's thread count worked out once (read by every `iter_mine`). While a whole range of
    /// threads runs as one call (`run_threads`), `ctx` and `global_id` are the range's first
    /// thread's and `ids_end` is one past its last: ownership loops then walk every element the
    /// range's threads own, and a read of a per-thread id unwinds with [`NeedsThreadIds`].
    #[derive(Clone, Copy)]
    struct Current {
        ctx: ThreadContext,
        global_id: usize,
        /// One past the last global id that this call runs: `global_id + 1` for one thread.
        ids_end: usize,
        global_threads: usize,
    }

    impl Current {
        #[inline(always)]
        fn of(ctx: ThreadContext) -> Current {
            let per_block = ctx.block_dim.count() as usize;
            let global_id = ctx.block_idx.linear_in(ctx.grid_dim) * per_block
                + ctx.thread_idx.linear_in(ctx.block_dim);
            Current {
                ctx,
                global_id,
                ids_end: global_id + 1,
                global_threads: ctx.grid_dim.count() as usize * per_block,
            }
        }

        /// The context, unwinding with [`NeedsThreadIds`] if this call runs several threads.
        #[inline(always)]
        fn one_thread(self) -> Current {
            if self.ids_end - self.global_id > 1 {
                needs_thread_ids();
            }
            self
        }
    }

    /// The unwind payload of a kernel that read a per-thread id (thread, block or global id)
    /// while a range of its threads ran as one call: the host backend puts the
    /// outputs back and runs the launch again one thread per call.
    #[derive(Debug)]
    pub struct NeedsThreadIds;

    #[cold]
    #[inline(never)]
    fn needs_thread_ids() -> ! {
        // `resume_unwind`: no panic hook, so no message on stderr for what is not an error.
        std::panic::resume_unwind(std::boxed::Box::new(NeedsThreadIds))
    }

    std::thread_local! {
        static CURRENT: Cell<Current> = const {
            Cell::new(Current { ctx: OUTSIDE, global_id: 0, ids_end: 1, global_threads: 1 })
        };
    }

    /// Run `f` as the GPU thread described by `ctx` (used by the host backend).
    pub fn with_thread<R>(ctx: ThreadContext, f: impl FnOnce() -> R) -> R {
        let _restore = Restore(CURRENT.with(|c| c.replace(Current::of(ctx))));
        f()
    }

    /// Puts the context back as it was when dropped, also when a GPU thread panics.
    struct Restore(Current);

    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }

    /// Consecutive threads of a launch of `grid` blocks of `block` threads: those whose
    /// [`global_id`](crate::global_id) is in `first..end`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ThreadRange {
        /// Blocks in the launch's grid.
        pub grid: Dim3,
        /// Threads per block.
        pub block: Dim3,
        /// Global id of the first thread of the range.
        pub first: u64,
        /// Global id one past the last thread of the range.
        pub end: u64,
        /// Lanes per warp, as the scheduler's launches have them.
        pub warp_size: u32,
        /// Run the whole range as one call of the kernel's body, whose ownership loops then
        /// walk the range's elements in order (see [`run_threads`]).
        pub as_one: bool,
    }

    /// Run `thread` as the threads of `range`, for kernels whose threads never wait for one
    /// another (no barrier, warp operation or shared memory, which need the host backend's block
    /// scheduler). With `range.as_one` and `may_run_as_one` (the kernel shares nothing across
    /// threads but its outputs' elements: no atomics, no raw output pointers), one call runs them
    /// all: the ownership loops (`iter_mine`, `grid_stride`, `update_mine_wide`) walk the
    /// elements of all the range's threads in order, a loop the compiler sees whole, and a read
    /// of a per-thread id unwinds with [`NeedsThreadIds`]. Otherwise each thread is a plain call
    /// with its ids set, in order of global id.
    ///
    /// A barrier, warp operation or shared memory reached in such a call unwinds with
    /// `host_block::NeedsBlockModel`.
    #[inline(always)]
    pub fn run_threads(range: ThreadRange, may_run_as_one: bool, thread: impl FnMut()) {
        if range.first >= range.end {
            return;
        }
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                PLAIN.with(|p| p.set(self.0));
            }
        }
        let _restore = Restore(PLAIN.with(|p| p.replace(true)));
        run_plain(range, may_run_as_one, thread)
    }

    std::thread_local! {
        /// Whether this OS thread runs GPU threads as plain calls ([`run_threads`]).
        static PLAIN: Cell<bool> = const { Cell::new(false) };
    }

    /// Whether this OS thread runs GPU threads as plain calls ([`run_threads`]), outside the
    /// block scheduler.
    pub(crate) fn in_plain_calls() -> bool {
        PLAIN.with(Cell::get)
    }

    /// [`run_threads`] once the calls are marked plain.
    #[inline(always)]
    fn run_plain(range: ThreadRange, may_run_as_one: bool, mut thread: impl FnMut()) {
        let ThreadRange {
            grid,
            block,
            first,
            end,
            warp_size,
            as_one,
        } = range;
        let per_block = block.count();
        let mut current = Current::of(ThreadContext {
            thread_idx: Dim3::from_linear(first % per_block, block),
            block_idx: Dim3::from_linear(first / per_block, grid),
            block_dim: block,
            grid_dim: grid,
            warp_size,
        });
        if crate::output_saving::saving() && !may_run_as_one {
            // Atomics and raw output pointers name no elements before writing them.
            crate::output_saving::needs_whole_backup();
        }
        if as_one && may_run_as_one {
            let whole = Current {
                ids_end: end as usize,
                ..current
            };
            let _restore = Restore(CURRENT.with(|c| c.replace(whole)));
            thread();
            return;
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(current)));
        let slot = CURRENT.with(Cell::as_ptr);
        for _ in first..end {
            thread();
            // Only the fields that change are stored: the loop then costs a few instructions
            // per thread beyond the kernel's own.
            let block_changed = current.ctx.thread_idx.advance_in(block);
            current.global_id += 1;
            // SAFETY: `slot` is this OS thread's context, which lives as long as the thread;
            // a `Cell` lends no reference to its value, so nothing else reads or writes it
            // during these stores.
            unsafe {
                (*slot).ctx.thread_idx = current.ctx.thread_idx;
                (*slot).global_id = current.global_id;
                (*slot).ids_end = current.global_id + 1;
                if block_changed {
                    current.ctx.block_idx.advance_in(grid);
                    (*slot).ctx.block_idx = current.ctx.block_idx;
                }
            }
        }
    }

    #[inline(always)]
    fn get() -> Current {
        CURRENT.with(|c| c.get())
    }

    #[inline(always)]
    pub fn thread_idx() -> Dim3 {
        get().one_thread().ctx.thread_idx
    }
    #[inline(always)]
    pub fn block_idx() -> Dim3 {
        get().one_thread().ctx.block_idx
    }
    #[inline(always)]
    pub fn block_dim() -> Dim3 {
        get().ctx.block_dim
    }
    #[inline(always)]
    pub fn grid_dim() -> Dim3 {
        get().ctx.grid_dim
    }
    #[inline(always)]
    pub fn global_id() -> usize {
        get().one_thread().global_id
    }
    /// The global ids that this call runs, `first..end`, and the launch's thread count.
    #[inline(always)]
    pub fn ids_run() -> (usize, usize, usize) {
        let c = get();
        (c.global_id, c.ids_end, c.global_threads)
    }
    #[inline(always)]
    pub fn global_threads() -> usize {
        get().global_threads
    }
    /// Lanes per warp of the running launch.
    pub fn warp_size() -> u32 {
        get().ctx.warp_size
    }
}

/// The host backend's handle on the thread context (not for kernels).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub mod host_context {
    pub(crate) use super::arch::in_plain_calls;
    pub use super::arch::{
        run_threads, warp_size, with_thread, NeedsThreadIds, ThreadContext, ThreadRange,
    };
    pub use crate::output_saving::{with_output_saving, NeedsWholeBackup};
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
    global::global_id()
}

/// Total number of threads in the launch.
#[inline(always)]
pub fn global_threads() -> usize {
    global::global_threads()
}

/// The indices below `len` that this thread handles in a grid-stride loop: `global_id()`, then
/// every `global_threads()`-th after it. Together the threads of a launch visit `0..len` once,
/// whatever the launch shape: the way to walk a `&[T]` input (as `ThreadSlice::iter_mine` walks
/// an output).
#[inline(always)]
pub fn grid_stride(len: usize) -> GridStride {
    GridStride::mine(len, 0)
}

/// Iterator of [`grid_stride`].
pub struct GridStride {
    next: usize,
    len: usize,
    stride: usize,
    /// On the host, where one call may run several consecutive threads (`run_threads`), their
    /// indices form runs `stride` apart: the end of the current run, where the walk stops in it
    /// (`run_end`, or `len` if less: one comparison per index), and the gap from its end to the
    /// next run's start.
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    run_end: usize,
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    stop: usize,
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    gap: usize,
}

impl GridStride {
    /// The indices below `len` of a view whose element 0 is element `offset` of its kernel
    /// parameter, that the calling thread owns: those whose parameter index is congruent to its
    /// global id modulo `global_threads()`.
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    #[inline(always)]
    pub(crate) fn mine(len: usize, offset: usize) -> GridStride {
        let (id, stride) = (global_id(), global_threads());
        // No division for whole parameters: 64-bit division is slow on GPUs.
        let next = if offset == 0 {
            id
        } else {
            match offset % stride {
                phase if id >= phase => id - phase,
                phase => id + stride - phase,
            }
        };
        GridStride { next, len, stride }
    }

    /// As on GPUs, for every thread that this call runs: runs of consecutive indices.
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    #[inline(always)]
    pub(crate) fn mine(len: usize, offset: usize) -> GridStride {
        let (first, end, stride) = arch::ids_run();
        let (next, run_end) = match offset {
            0 => (first, end),
            _ => match offset % stride {
                phase if phase < end => (first.saturating_sub(phase), end - phase),
                phase => (first + stride - phase, end + stride - phase),
            },
        };
        GridStride {
            next,
            len,
            stride,
            run_end,
            stop: run_end.min(len),
            gap: stride - (end - first),
        }
    }
}

/// The runs of consecutive indices that [`next`](Iterator::next) will yield.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl GridStride {
    /// Each run, in order, as `(start, end)`: a loop over them keeps its body in the caller's
    /// function (a closure called from two places may not be inlined, and then its captures
    /// look to the compiler as if they could alias the caller's writes).
    #[inline(always)]
    pub(crate) fn runs(&self) -> impl Iterator<Item = (usize, usize)> {
        let (len, stride, gap, run_end) = (self.len, self.stride, self.gap, self.run_end);
        let first = (self.next < self.stop).then_some((self.next, self.stop));
        let rest = (1..)
            .map(move |k| {
                let end = run_end + k * stride;
                (end - stride + gap, end.min(len))
            })
            .take_while(|&(start, stop)| start < stop);
        first.into_iter().chain(rest)
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl crate::output_saving::Runs for GridStride {
    #[inline(always)]
    fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        for (start, end) in self.runs() {
            f(start, end);
        }
    }
}

impl Iterator for GridStride {
    type Item = usize;

    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
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

    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next >= self.stop {
            // The next run, if it starts below `len`.
            if self.run_end >= self.len {
                return None;
            }
            self.next = self.run_end + self.gap;
            self.run_end += self.stride;
            self.stop = self.run_end.min(self.len);
            if self.next >= self.stop {
                return None;
            }
        }
        let i = self.next;
        self.next = i + 1;
        Some(i)
    }
}

/// `len`, known to the compiler to be at most `isize::MAX` when `T` has a size, as the length
/// of a `[T]` is: the indices of a walk below it then have their top bit clear, and a kernel's
/// `x[i..i + k]` or `x[i + 1]` needs no test of `i + k` for overflow.
///
/// # Safety
/// `len` is the length of a slice of `T`s.
#[inline(always)]
pub(crate) unsafe fn slice_len<T>(len: usize) -> usize {
    if core::mem::size_of::<T>() != 0 {
        // SAFETY: a slice of sized elements spans at most isize::MAX bytes.
        unsafe { core::hint::assert_unchecked(len <= isize::MAX as usize) };
    }
    len
}

/// The global ids that this call runs, `first..end` (one thread on GPUs), and the launch's
/// thread count.
#[inline(always)]
pub(crate) fn ids_run() -> (usize, usize, usize) {
    global::ids_run()
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::host_context::{run_threads, ThreadRange};
    use super::*;
    use std::vec::Vec;

    #[test]
    fn from_linear_inverts_linear_in() {
        let extent = Dim3::new(5, 3, 2);
        for i in 0..extent.count() {
            assert_eq!(Dim3::from_linear(i, extent).linear_in(extent) as u64, i);
        }
    }

    /// Every thread of a range sees the ids of its global id, across block and grid rows, and
    /// the context outside is restored afterwards.
    #[test]
    fn run_threads_sets_each_threads_ids_in_order() {
        let (grid, block) = (Dim3::new(3, 2, 2), Dim3::new(2, 3, 1));
        let (first, end) = (5, grid.count() * block.count() - 4);
        let mut seen = Vec::new();
        run_threads(
            ThreadRange {
                grid,
                block,
                first,
                end,
                warp_size: 64,
                as_one: false,
            },
            false,
            || {
                seen.push((
                    global_id(),
                    thread_idx(),
                    block_idx(),
                    block_dim(),
                    grid_dim(),
                ));
            },
        );
        let want: Vec<_> = (first..end)
            .map(|g| {
                let per_block = block.count();
                let (b, t) = (g / per_block, g % per_block);
                (
                    g as usize,
                    Dim3::from_linear(t, block),
                    Dim3::from_linear(b, grid),
                    block,
                    grid,
                )
            })
            .collect();
        assert_eq!(seen, want);
        assert_eq!(
            (global_id(), global_threads()),
            (0, 1),
            "outside a launch again"
        );
    }

    /// A range run as one call: `grid_stride` walks the indices of all its threads in order
    /// (runs of consecutive indices, a stride apart), a per-thread id unwinds with
    /// `NeedsThreadIds`, and the context outside is restored afterwards.
    #[test]
    fn a_range_run_as_one_call_walks_its_threads_indices_and_refuses_thread_ids() {
        use super::host_context::NeedsThreadIds;
        let (grid, block) = (Dim3::new(4, 1, 1), Dim3::new(8, 1, 1));
        let range = ThreadRange {
            grid,
            block,
            first: 5,
            end: 12,
            warp_size: 32,
            as_one: true,
        };
        let mut calls = 0;
        let mut seen = Vec::new();
        run_threads(range, true, || {
            calls += 1;
            seen.extend(grid_stride(70));
            assert_eq!(global_threads(), 32);
        });
        let want: Vec<usize> = (0..70).filter(|i| (5..12).contains(&(i % 32))).collect();
        assert_eq!((calls, seen), (1, want));
        // A kernel that may not run as one call (atomics) gets one call per thread.
        let mut calls = 0;
        run_threads(range, false, || calls += 1);
        assert_eq!(calls, 7);
        let reads: [fn(); 3] = [
            || {
                global_id();
            },
            || {
                thread_idx();
            },
            || {
                block_idx();
            },
        ];
        for read in reads {
            let unwound = std::panic::catch_unwind(|| run_threads(range, true, read));
            assert!(unwound.unwrap_err().is::<NeedsThreadIds>());
        }
        assert_eq!(
            (global_id(), global_threads()),
            (0, 1),
            "outside a launch again"
        );
    }
}
