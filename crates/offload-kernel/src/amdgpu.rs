//! What kernels built for `amdgcn-amd-amdhsa` read besides `core::arch::amdgpu`: the dispatch
//! packet of their launch, and the operations that offload-build's AMD link step defines in LLVM
//! IR because Rust cannot spell them (memory scopes, float atomics, half conversions, the address
//! of the launch's dynamic LDS).

/// Byte offsets in `hsa_kernel_dispatch_packet_t` (HSA runtime specification 1.2, 2.9.6).
const WORKGROUP_SIZE: usize = 4;
const GRID_SIZE: usize = 12;
const GROUP_SEGMENT_SIZE: usize = 28;

#[inline(always)]
fn packet() -> *const u8 {
    core::intrinsics::gpu::amdgpu_dispatch_ptr() as *const u8
}

/// Work-items per work-group (`workgroup_size_x/y/z`, u16 each), x first.
#[inline(always)]
pub(crate) fn workgroup_size() -> [u32; 3] {
    let at = |i: usize| {
        // SAFETY: every kernel is launched through a dispatch packet, which holds the three u16
        // work-group extents at bytes 4, 6 and 8 (2-aligned).
        unsafe { (packet().add(WORKGROUP_SIZE + 2 * i) as *const u16).read() as u32 }
    };
    [at(0), at(1), at(2)]
}

/// Work-items in the grid (`grid_size_x/y/z`, u32 each): work-groups times their size, x first.
#[inline(always)]
pub(crate) fn grid_size() -> [u32; 3] {
    let at = |i: usize| {
        // SAFETY: as above; the grid extents are u32 at bytes 12, 16 and 20.
        unsafe { (packet().add(GRID_SIZE + 4 * i) as *const u32).read() }
    };
    [at(0), at(1), at(2)]
}

/// LDS bytes of the launch, static and dynamic together.
#[inline(always)]
pub(crate) fn group_segment_size() -> u32 {
    // SAFETY: as above; `group_segment_size` is a u32 at byte 28.
    unsafe { (packet().add(GROUP_SEGMENT_SIZE) as *const u32).read() }
}

// Defined by offload-build's AMD link step (`amdgpu_support.ll`), always inlined.
extern "C" {
    /// Release fence (work-group scope), `s_barrier`, acquire fence: CUDA's `__syncthreads()`.
    pub(crate) fn __offload_amdgpu_sync_threads();
    /// `fence syncscope("wavefront") seq_cst` and `llvm.amdgcn.wave.barrier`.
    pub(crate) fn __offload_amdgpu_sync_warp();
    /// `fence syncscope("workgroup") seq_cst`.
    pub(crate) fn __offload_amdgpu_fence_block();
    /// `fence syncscope("agent") seq_cst`.
    pub(crate) fn __offload_amdgpu_fence_device();
    /// `atomicrmw fadd` (agent scope, monotonic) on a flat address: global memory or LDS.
    pub(crate) fn __offload_amdgpu_atomic_add_f32(ptr: *mut f32, value: f32) -> f32;
    pub(crate) fn __offload_amdgpu_atomic_add_f64(ptr: *mut f64, value: f64) -> f64;
    /// `fpext half`/`fptrunc to half` and `fptrunc to bfloat` (round to nearest even).
    pub(crate) fn __offload_amdgpu_f16_to_f32(bits: u16) -> f32;
    pub(crate) fn __offload_amdgpu_f32_to_f16(x: f32) -> u16;
    pub(crate) fn __offload_amdgpu_f32_to_bf16(x: f32) -> u16;
    /// The flat address of the launch's dynamic LDS (an external zero-sized LDS array, which
    /// the backend places after the static LDS).
    pub(crate) fn __offload_dyn_shared_base() -> *mut u8;
}
