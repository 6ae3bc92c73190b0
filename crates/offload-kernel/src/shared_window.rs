//! Addresses in PTX's `.shared` window: the 32-bit form that shared-memory instructions
//! (`ldmatrix`, `cp.async`) take, from the generic pointers that `SharedSlice` holds.

/// The `.shared` address of a generic pointer into shared memory. Pure, so the compiler computes
/// it once for a loop-invariant pointer; offsets from it are 32-bit additions.
#[inline(always)]
pub(crate) fn shared_address(p: *const u8) -> u32 {
    let address: u32;
    // SAFETY: an address conversion between registers; touches no memory.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 offload_s; cvta.to.shared.u64 offload_s, {p}; cvt.u32.u64 {a}, offload_s; }}",
            a = out(reg32) address,
            p = in(reg64) p,
            options(pure, nomem, nostack),
        );
    }
    address
}
