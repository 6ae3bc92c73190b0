//! Which images an OpenCL device runs (SPIR-V, through `clCreateProgramWithIL`), building one,
//! and which of its kernels require a sub-group size (offload's warp kernels: 32).

use crate::plugins::image::{DeviceImage, ImageFormat};
use crate::plugins::opencl::sys::{self, Api, Handle};
use std::ffi::CString;
use std::ptr::{null, null_mut};

/// Division and square root correctly rounded in f32, as on the host and in PTX.
const BUILD_OPTIONS: &str = "-cl-fp32-correctly-rounded-divide-sqrt";

/// The SPIR-V version the images are (`spirv64-v1.4`), as `CL_DEVICE_IL_VERSION` lists it.
pub const IL_VERSION: &str = "SPIR-V_1.4";

/// The rank of `image` on a device that takes SPIR-V 1.4: any SPIR-V image, else none.
pub fn rank(image: &DeviceImage) -> Option<u32> {
    (image.format == ImageFormat::Spirv).then_some(1)
}

/// A program built from `spirv` for `device`; `Err` with the build log when it fails.
///
/// # Safety
/// `context` and `device` are live objects of `api`, the device in the context.
pub unsafe fn build(
    api: &Api,
    context: Handle,
    device: Handle,
    spirv: &[u8],
) -> Result<Handle, String> {
    let mut status = 0;
    // SAFETY: the IL's bytes are read during the call; handles per the contract.
    let program = unsafe {
        (api.clCreateProgramWithIL)(context, spirv.as_ptr().cast(), spirv.len(), &mut status)
    };
    sys::check("clCreateProgramWithIL", status)?;
    let options = CString::new(BUILD_OPTIONS).expect("no NUL in the options");
    // SAFETY: a program of this context, built for one of its devices.
    let built =
        unsafe { (api.clBuildProgram)(program, 1, &device, options.as_ptr(), null(), null_mut()) };
    if built == 0 {
        return Ok(program);
    }
    let mut log = vec![0u8; 1 << 16];
    let mut len = 0;
    // SAFETY: the log is written into `log`, at most its length; then the program is released.
    unsafe {
        (api.clGetProgramBuildInfo)(
            program,
            device,
            sys::PROGRAM_BUILD_LOG,
            log.len(),
            log.as_mut_ptr().cast(),
            &mut len,
        );
        (api.clReleaseProgram)(program);
    }
    let log = String::from_utf8_lossy(&log[..len.min(log.len())]);
    Err(format!(
        "{}: {}",
        sys::check("clBuildProgram", built).unwrap_err(),
        log.trim_end_matches('\0').trim()
    ))
}

const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const EXECUTION_MODE_SUBGROUP_SIZE: u32 = 35;

/// The kernels of a SPIR-V module that require a sub-group size (`OpExecutionMode ..
/// SubgroupSize N`), with that size. Malformed modules give what was read before the fault.
pub fn required_sub_group_sizes(spirv: &[u8]) -> Vec<(String, u32)> {
    let words: Vec<u32> = spirv
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("four bytes")))
        .collect();
    let mut names = Vec::new();
    let mut sizes = Vec::new();
    let mut at = 5; // after the header
    while at < words.len() {
        let (count, opcode) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        if count == 0 || at + count > words.len() {
            break;
        }
        let operands = &words[at + 1..at + count];
        match opcode {
            OP_ENTRY_POINT if operands.len() >= 3 => {
                let bytes: Vec<u8> = operands[2..].iter().flat_map(|w| w.to_le_bytes()).collect();
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                names.push((
                    operands[1],
                    String::from_utf8_lossy(&bytes[..end]).into_owned(),
                ));
            }
            OP_EXECUTION_MODE
                if operands.len() >= 3 && operands[1] == EXECUTION_MODE_SUBGROUP_SIZE =>
            {
                sizes.push((operands[0], operands[2]));
            }
            _ => {}
        }
        at += count;
    }
    sizes
        .into_iter()
        .filter_map(|(function, size)| {
            let name = names.iter().find(|(id, _)| *id == function)?;
            Some((name.1.clone(), size))
        })
        .collect()
}

/// Why kernel `name`, which requires sub-groups `required` lanes wide (offload's warp kernels:
/// 32), cannot run on a device whose sub-groups are `device_sizes` wide; `None` when it can.
pub fn unmet_sub_group(
    name: &str,
    required: Option<u32>,
    device_sizes: &[usize],
) -> Option<String> {
    let width = required?;
    (!device_sizes.contains(&(width as usize))).then(|| {
        format!(
            "`{name}` uses warp operations, which need sub-groups of {width} lanes; this device \
             runs sub-groups of {device_sizes:?} lanes"
        )
    })
}

/// Why a kernel that requires sub-groups `required` lanes wide cannot run in blocks `block_x`
/// threads wide; `None` when it can. OpenCL forms sub-groups along x, so a warp (a sub-group)
/// spans rows of a block only when the rows are whole sub-groups.
pub fn unfit_block(required: Option<u32>, block_x: u32) -> Option<String> {
    let width = required?;
    (block_x % width != 0).then(|| {
        format!(
            "a warp kernel runs in OpenCL sub-groups of {width} lanes along x: its block's x \
             extent ({block_x}) must be a multiple of {width}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module's words: the header, then the instructions.
    fn module(instructions: &[&[u32]]) -> Vec<u8> {
        let mut words = vec![0x0723_0203, 0x0001_0400, 0, 100, 0];
        for instruction in instructions {
            words.push(((instruction.len() as u32) << 16) | instruction[0]);
            words.extend(&instruction[1..]);
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `name` as a SPIR-V literal string (NUL-terminated, padded to words).
    fn literal(name: &str) -> Vec<u32> {
        let mut bytes = name.as_bytes().to_vec();
        bytes.resize((bytes.len() / 4 + 1) * 4, 0);
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn finds_the_kernels_that_require_a_sub_group_size() {
        let entry = |id: u32, name: &str| -> Vec<u32> {
            let mut words = vec![OP_ENTRY_POINT, 6, id];
            words.extend(literal(name));
            words
        };
        let (warp, plain) = (entry(7, "warp_reduce"), entry(8, "saxpy"));
        let spirv = module(&[
            &warp,
            &plain,
            &[OP_EXECUTION_MODE, 7, EXECUTION_MODE_SUBGROUP_SIZE, 32],
            // Another execution mode (ContractionOff) of the other kernel.
            &[OP_EXECUTION_MODE, 8, 31],
        ]);
        assert_eq!(
            required_sub_group_sizes(&spirv),
            [("warp_reduce".to_string(), 32)]
        );
        // A truncated module: what was read before the fault.
        assert!(required_sub_group_sizes(&spirv[..30]).is_empty());
    }

    #[test]
    fn warp_kernels_need_sub_groups_of_their_width_and_blocks_of_whole_sub_groups() {
        assert_eq!(unmet_sub_group("saxpy", None, &[8, 16]), None);
        assert_eq!(unmet_sub_group("dot", Some(32), &[8, 16, 32]), None);
        assert_eq!(
            unmet_sub_group("dot", Some(32), &[8, 16]).unwrap(),
            "`dot` uses warp operations, which need sub-groups of 32 lanes; this device runs \
             sub-groups of [8, 16] lanes"
        );
        assert_eq!(unfit_block(None, 48), None);
        assert_eq!(unfit_block(Some(32), 96), None);
        assert!(unfit_block(Some(32), 48)
            .unwrap()
            .ends_with("its block's x extent (48) must be a multiple of 32"));
    }

    #[test]
    fn only_spirv_images_rank() {
        let image = |format| DeviceImage {
            format,
            target: "spirv64-v1.4",
            bytes: b"",
        };
        assert_eq!(rank(&image(ImageFormat::Spirv)), Some(1));
        assert_eq!(rank(&image(ImageFormat::Ptx)), None);
    }
}
