//! What kernels call on SPIR-V devices (the `spirv` feature, set by offload-build for its SPIR-V
//! device build, which compiles for nvptx64 and retargets the bitcode).
//!
//! OpenCL built-ins are declared under their Itanium-mangled OpenCL C names, which LLVM's SPIR-V
//! backend turns into SPIR-V built-in variables and instructions. The `__offload_spirv_*`
//! markers are what only the kernel itself can provide; offload-build's `offload-spirv` pass
//! lowers them (see crates/offload-build/src/spirv/rewrite.cpp).

/// OpenCL `cl_mem_fence_flags`: local and global memory.
pub const LOCAL_AND_GLOBAL_MEMORY: u32 = 0x1 | 0x2;
/// OpenCL `memory_order_seq_cst`.
pub const SEQ_CST: u32 = 5;
/// OpenCL `memory_scope_work_group`, `memory_scope_device`, `memory_scope_all_svm_devices`.
pub const SCOPE_WORK_GROUP: u32 = 1;
pub const SCOPE_DEVICE: u32 = 2;
pub const SCOPE_ALL_DEVICES: u32 = 3;
/// SPIR-V `Scope::Subgroup` and the memory semantics of a sub-group barrier (sequentially
/// consistent, sub-group, workgroup and cross-workgroup memory).
pub const SPIRV_SCOPE_SUBGROUP: i32 = 3;
pub const SPIRV_SUBGROUP_BARRIER_SEMANTICS: i32 = 0x10 | 0x80 | 0x100 | 0x200;

extern "C" {
    #[link_name = "_Z12get_local_idj"]
    pub fn get_local_id(dim: u32) -> usize;
    #[link_name = "_Z12get_group_idj"]
    pub fn get_group_id(dim: u32) -> usize;
    #[link_name = "_Z14get_local_sizej"]
    pub fn get_local_size(dim: u32) -> usize;
    #[link_name = "_Z14get_num_groupsj"]
    pub fn get_num_groups(dim: u32) -> usize;

    #[link_name = "_Z7barrierj"]
    pub fn barrier(flags: u32);
    #[link_name = "_Z22atomic_work_item_fencej12memory_order12memory_scope"]
    pub fn atomic_work_item_fence(flags: u32, order: u32, scope: u32);

    #[link_name = "_Z22get_sub_group_local_idv"]
    pub fn get_sub_group_local_id() -> u32;
    #[link_name = "_Z16get_sub_group_idv"]
    pub fn get_sub_group_id() -> u32;
    #[link_name = "_Z17sub_group_shufflejj"]
    pub fn sub_group_shuffle_u32(value: u32, lane: u32) -> u32;
    #[link_name = "_Z17sub_group_shufflemj"]
    pub fn sub_group_shuffle_u64(value: u64, lane: u32) -> u64;
    #[link_name = "_Z31sub_group_non_uniform_reduce_orj"]
    pub fn sub_group_non_uniform_reduce_or(value: u32) -> u32;
    /// SPIR-V's `OpControlBarrier` (OpenCL C has no sub-group barrier taking a memory scope).
    #[link_name = "_Z22__spirv_ControlBarrieriii"]
    pub fn control_barrier(execution: i32, memory: i32, semantics: i32);

    /// The generic address of the launch's dynamic shared memory (an OpenCL local argument).
    pub fn __offload_spirv_dynamic_shared() -> *mut u8;
    /// Its size in bytes.
    pub fn __offload_spirv_dynamic_shared_bytes() -> usize;
    /// Ends the calling work-item: it returns from the kernel.
    pub fn __offload_spirv_end_thread() -> !;
}
