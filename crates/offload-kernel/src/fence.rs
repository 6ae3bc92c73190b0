//! Memory fences: order this thread's memory accesses as seen by other threads, as CUDA's
//! `__threadfence_block`, `__threadfence` and `__threadfence_system`. Atomics are relaxed, so a
//! thread that publishes data and then sets a flag atomically needs a fence in between (and the
//! reader one between seeing the flag and reading the data).
//!
//! On amdgcn they are sequentially consistent fences of work-group, agent and system scope. On
//! SPIR-V each is OpenCL's `atomic_work_item_fence` at work-group, device and all-devices scope.
//! On the host backend each is a sequentially consistent fence (`core::sync::atomic::fence`).

/// Orders this thread's memory accesses for the threads of its block (PTX `membar.cta`).
#[inline(always)]
pub fn fence_block() {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: a fence has no operands and no effect beyond memory ordering.
    unsafe {
        crate::spirv::atomic_work_item_fence(
            crate::spirv::LOCAL_AND_GLOBAL_MEMORY,
            crate::spirv::SEQ_CST,
            crate::spirv::SCOPE_WORK_GROUP,
        )
    };
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    // SAFETY: a fence has no operands and no effect beyond memory ordering.
    unsafe {
        core::arch::asm!("membar.cta;", options(nostack))
    };
    #[cfg(target_arch = "amdgpu")]
    // SAFETY: defined by offload-build's AMD link step; a fence, no operands.
    unsafe {
        crate::amdgpu::__offload_amdgpu_fence_block()
    };
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Orders this thread's memory accesses for every thread of the device (PTX `membar.gl`).
#[inline(always)]
pub fn fence_device() {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: a fence has no operands and no effect beyond memory ordering.
    unsafe {
        crate::spirv::atomic_work_item_fence(
            crate::spirv::LOCAL_AND_GLOBAL_MEMORY,
            crate::spirv::SEQ_CST,
            crate::spirv::SCOPE_DEVICE,
        )
    };
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    // SAFETY: as in `fence_block`.
    unsafe {
        core::arch::asm!("membar.gl;", options(nostack))
    };
    #[cfg(target_arch = "amdgpu")]
    // SAFETY: defined by offload-build's AMD link step; a fence, no operands.
    unsafe {
        crate::amdgpu::__offload_amdgpu_fence_device()
    };
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Orders this thread's memory accesses for the device and the host (PTX `membar.sys`).
#[inline(always)]
pub fn fence_system() {
    #[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
    // SAFETY: a fence has no operands and no effect beyond memory ordering.
    unsafe {
        crate::spirv::atomic_work_item_fence(
            crate::spirv::LOCAL_AND_GLOBAL_MEMORY,
            crate::spirv::SEQ_CST,
            crate::spirv::SCOPE_ALL_DEVICES,
        )
    };
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    // SAFETY: as in `fence_block`.
    unsafe {
        core::arch::asm!("membar.sys;", options(nostack))
    };
    // amdgcn and the host: Rust's fences are system-scope.
    #[cfg(not(target_arch = "nvptx64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}
