//! The block barrier (memory fences are in `fence`).

/// Wait until every thread of the block reaches a barrier (CUDA's `__syncthreads()`), and make the
/// shared and global memory writes that each thread made before it visible to the others.
///
/// On the GPU this is `barrier.sync 0` (not `.aligned`), so calling it from divergent branches is
/// defined: the block goes on once every thread of it that has not returned waits at a barrier;
/// threads that returned are not waited for. The host backend behaves the same way (checked by
/// the `barrier_after_early_return` example on both). On amdgcn it is `s_barrier` between a
/// work-group-scope release and acquire fence (as HIP's `__syncthreads`); `s_barrier` counts
/// wavefronts, and a wavefront whose lanes all returned no longer takes part. On SPIR-V it is
/// OpenCL's work-group `barrier`, which OpenCL defines only when every work-item of the group
/// reaches it.
#[inline(always)]
pub fn sync_threads() {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: a work-group barrier with fences on local and global memory; no operands.
    unsafe {
        crate::spirv::barrier(crate::spirv::LOCAL_AND_GLOBAL_MEMORY)
    };
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    // SAFETY: a barrier has no operands and touches no Rust-visible state; memory is not
    // declared untouched, so the compiler keeps loads and stores on their side of it.
    unsafe {
        core::arch::asm!("barrier.sync 0;", options(nostack))
    };
    #[cfg(target_arch = "amdgpu")]
    // SAFETY: defined by offload-build's AMD link step; fences and a barrier, no operands.
    unsafe {
        crate::amdgpu::__offload_amdgpu_sync_threads()
    };
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    crate::host_block::suspend(crate::host_block::Group::Block);
}
