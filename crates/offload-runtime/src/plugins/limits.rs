//! Launch shapes and what a device, and one of its kernel entries, accept.

use offload_kernel::Dim3;

/// A launch shape checked against a device's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Blocks in the grid, per dimension.
    pub grid: Dim3,
    /// Threads in a block, per dimension.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub dynamic_shared: u32,
}

/// What a device accepts as a launch shape.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Threads one block may hold in all.
    pub max_threads_per_block: u32,
    /// Largest block, per dimension.
    pub max_block: Dim3,
    /// Largest grid, per dimension.
    pub max_grid: Dim3,
    /// Streaming multiprocessors (worker threads on the host).
    pub multiprocessors: u32,
    /// Threads resident on one multiprocessor at once.
    pub threads_per_multiprocessor: u32,
    /// Shared memory one block may use, static and dynamic together, in bytes (with the
    /// device's opt-in for large allocations).
    pub max_shared_per_block: u32,
}

/// What one kernel entry can be launched with, beyond the device's limits: a kernel that needs
/// many registers per thread fits fewer threads in a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryLimits {
    /// Threads one block of this entry may hold (at most the device's).
    pub max_threads_per_block: u32,
    /// Registers per thread (0 where there are none to count).
    pub registers: u32,
    /// Bytes of static shared memory per block.
    pub static_shared: u32,
}
