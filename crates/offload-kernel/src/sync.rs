//! The block barrier (memory fences are in `fence`).

/// Wait until every thread of the block reaches a barrier (CUDA's `__syncthreads()`), and make the
/// shared and global memory writes that each thread made before it visible to the others.
///
/// On the GPU this is `barrier.sync 0`, which counts threads one by one, so calling it from
/// divergent branches is defined: the block goes on once all of its threads that have not
/// returned wait at some barrier. The host backend behaves the same way.
#[inline(always)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier has no operands and touches no Rust-visible state; memory is not
    // declared untouched, so the compiler keeps loads and stores on their side of it.
    unsafe {
        core::arch::asm!("barrier.sync 0;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host_block::suspend(crate::host_block::Group::Block);
}
