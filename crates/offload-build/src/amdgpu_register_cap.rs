//! `#[offload::kernel(max_registers = N)]` on AMD GPUs: N vector registers per lane (the code
//! object's `.vgpr_count`), through LLVM's `"amdgpu-num-vgpr"` function attribute on the kernel.
//!
//! LLVM 22's AMDGPU backend takes `"amdgpu-num-vgpr"="V"` as the kernel's vector register budget
//! (`GCNSubtarget::getBaseMaxNumVGPRs`) and reserves every register beyond it
//! (`SIRegisterInfo::getReservedRegs`), so the register allocator spills what does not fit to
//! scratch memory, and fails when the code needs more than V at one point. Where VGPRs and AGPRs
//! share one file of 512 per lane (gfx90a, gfx94x, gfx95x: LLVM's `FeatureGFX90AInsts`), LLVM
//! doubles V into a budget for both (`SIRegisterInfo::getMaxNumVectorRegs` splits it); the
//! kernels here use no AGPRs (the O3 pipeline's attributor marks them `"amdgpu-agpr-alloc"="0"`,
//! as nothing they contain names one), so the whole budget goes to VGPRs: V is N / 2, an odd N
//! rounding down. (A kernel that needed AGPRs would get V of each, and a `.vgpr_count` of V
//! rounded up to 4, plus V.) Elsewhere V is N. LLVM ignores a budget above what the kernel's
//! default occupancy already allows (128 on gfx90a and gfx942 for the default limit of 1024
//! threads per workgroup), so a large N changes nothing. The hardware allocates VGPRs in blocks
//! (`AMDGPU::IsaInfo::getVGPRAllocGranule`: 8 on gfx90a/gfx942, 24 on gfx1100 in wave32), so a
//! kernel's occupancy follows its count rounded up to a block.
//!
//! The attribute bounds the kernel's own code. A kernel's count is the most of any function it
//! calls, and the functions left uninlined keep their own budget: in practice the panic path,
//! whose recorder takes the thread's id in v31 (LLVM's calling convention packs the work-item
//! ids there), so a kernel that can panic reports at least 32 VGPRs whatever the cap (without
//! panic reporting, `Kernels::panic_reporting(false)`, there is no such call).

/// Whether `arch` has one register file of 512 per lane for VGPRs and AGPRs, whose budget LLVM
/// counts in pairs.
fn unified_vector_registers(arch: &str) -> bool {
    arch == "gfx90a" || arch.starts_with("gfx94") || arch.starts_with("gfx95")
}

/// The `"amdgpu-num-vgpr"` value that keeps a kernel for `arch` within `max_registers` vector
/// registers per lane.
pub(crate) fn num_vgpr_attribute(arch: &str, max_registers: u32) -> Result<u32, String> {
    if !unified_vector_registers(arch) {
        return Ok(max_registers);
    }
    match max_registers / 2 {
        0 => Err(format!(
            "max_registers = {max_registers} cannot be met on {arch}: LLVM caps its vector \
             registers in pairs (ask for 2 or more)"
        )),
        budget => Ok(budget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_register_files_count_in_pairs() {
        for arch in ["gfx90a", "gfx942", "gfx950"] {
            assert_eq!(num_vgpr_attribute(arch, 24), Ok(12), "{arch}");
            assert_eq!(num_vgpr_attribute(arch, 25), Ok(12), "{arch}");
            assert_eq!(num_vgpr_attribute(arch, 255), Ok(127), "{arch}");
            assert_eq!(num_vgpr_attribute(arch, 2), Ok(1), "{arch}");
        }
        assert_eq!(
            num_vgpr_attribute("gfx942", 1),
            Err(
                "max_registers = 1 cannot be met on gfx942: LLVM caps its vector registers in \
                 pairs (ask for 2 or more)"
                    .to_string()
            )
        );
    }

    #[test]
    fn other_architectures_take_the_count_as_is() {
        for arch in ["gfx908", "gfx90c", "gfx1030", "gfx1100", "gfx1200"] {
            assert_eq!(num_vgpr_attribute(arch, 1), Ok(1), "{arch}");
            assert_eq!(num_vgpr_attribute(arch, 25), Ok(25), "{arch}");
        }
    }
}
