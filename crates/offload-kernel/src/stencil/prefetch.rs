//! Asking the GPU's L2 cache to fetch memory that a walk will load later, without a register to
//! hold it (PTX `prefetch.L2`): a 3D walk's loads are mostly L2 hits (rows y ± 1 are the
//! neighbouring threads' rows y), so what it has in flight from DRAM is what it prefetches.
//! Elsewhere (host tests, AMD GPUs, SPIR-V) nothing.

/// Starts fetching the cache line holding `p` into L2: a hint, whose data the program never sees.
///
/// # Safety
/// `p` points into memory the kernel may read.
#[inline(always)]
pub(super) unsafe fn prefetch_l2<T>(p: *const T) {
    #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
    // SAFETY: per the contract; a prefetch changes no memory.
    unsafe {
        core::arch::asm!(
            "prefetch.L2 [{p}];",
            p = in(reg64) p,
            options(nostack, readonly)
        );
    }
    #[cfg(not(all(target_arch = "nvptx64", not(feature = "spirv"))))]
    let _ = p;
}
