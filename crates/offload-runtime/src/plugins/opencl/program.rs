//! Which images an OpenCL device runs (SPIR-V, through `clCreateProgramWithIL`), building one
//! (through the program cache), and which of its kernels require a sub-group size (offload's warp kernels: 32).

use crate::plugins::image::{DeviceImage, ImageFormat};
use crate::plugins::opencl::program_cache::{self, Entry};
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

/// A program built from `spirv` for `device`; `Err` with the build log when it fails. The binary
/// the driver built is kept in the program cache (`program_cache`), and a later load, in this
/// process or another, builds from it instead of compiling the SPIR-V again.
///
/// # Safety
/// `context` and `device` are live objects of `api`, the device in the context.
pub unsafe fn build(
    api: &Api,
    context: Handle,
    device: Handle,
    spirv: &[u8],
) -> Result<Handle, String> {
    // SAFETY: the contract.
    let entry = unsafe { cache_entry(api, device, spirv) };
    if let Some((entry, binary)) = entry.as_ref().and_then(|e| Some((e, e.read()?))) {
        // SAFETY: the contract.
        match unsafe { create_and_build(api, context, device, Source::Binary(&binary)) } {
            Ok(program) => {
                tracing::debug!(entry = %entry.path().display(), "OpenCL program from the cache");
                return Ok(program);
            }
            Err(e) => tracing::debug!(error = %e, "OpenCL refused a cached program: rebuilt"),
        }
    }
    // SAFETY: the contract.
    let program = unsafe { create_and_build(api, context, device, Source::Il(spirv)) }?;
    if let Some(entry) = &entry {
        // SAFETY: a program built for one device, `device`.
        let kept = unsafe { binary(api, program) }
            .and_then(|b| entry.write(&b).map_err(|e| e.to_string()));
        if let Err(e) = kept {
            tracing::debug!(entry = %entry.path().display(), error = %e, "OpenCL program not cached");
        }
    }
    Ok(program)
}

/// The cache entry of `spirv` on `device` (named by the device, its OpenCL version and its
/// driver's), or `None` when the cache is off or the device cannot say who it is.
///
/// # Safety
/// `device` is a device of `api`.
unsafe fn cache_entry(api: &Api, device: Handle, spirv: &[u8]) -> Option<Entry> {
    let dir = program_cache::directory()?;
    let mut identity = String::new();
    for param in [sys::DEVICE_NAME, sys::DEVICE_VERSION, sys::DRIVER_VERSION] {
        // SAFETY: the contract.
        identity += &unsafe { sys::device_string(api, device, param) }.ok()?;
        identity.push('\n');
    }
    Some(Entry::new(&dir, spirv, BUILD_OPTIONS, &identity))
}

/// What a program is made from.
enum Source<'a> {
    Il(&'a [u8]),
    /// A binary the driver built before, for this device.
    Binary(&'a [u8]),
}

/// A program created from `source` and built for `device`; `Err` with the build log.
///
/// # Safety
/// As [`build`].
unsafe fn create_and_build(
    api: &Api,
    context: Handle,
    device: Handle,
    source: Source<'_>,
) -> Result<Handle, String> {
    let mut status = 0;
    let program = match source {
        // SAFETY: the IL's bytes are read during the call; handles per the contract.
        Source::Il(spirv) => unsafe {
            let program = (api.clCreateProgramWithIL)(
                context,
                spirv.as_ptr().cast(),
                spirv.len(),
                &mut status,
            );
            sys::check("clCreateProgramWithIL", status)?;
            program
        },
        // SAFETY: one device and one binary, read during the call; handles per the contract.
        Source::Binary(binary) => unsafe {
            let (len, ptr) = (binary.len(), binary.as_ptr());
            let mut binary_status = 0;
            let program = (api.clCreateProgramWithBinary)(
                context,
                1,
                &device,
                &len,
                &ptr,
                &mut binary_status,
                &mut status,
            );
            sys::check("clCreateProgramWithBinary", status)?;
            if let Err(e) = sys::check("clCreateProgramWithBinary", binary_status) {
                (api.clReleaseProgram)(program);
                return Err(e);
            }
            program
        },
    };
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

/// The binary the driver built of `program`.
///
/// # Safety
/// `program` is a built program of `api` for one device.
unsafe fn binary(api: &Api, program: Handle) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: one device, so one size; then one buffer of that size, its pointer in an array of
    // one (the contract of CL_PROGRAM_BINARIES).
    unsafe {
        sys::check(
            "clGetProgramInfo",
            (api.clGetProgramInfo)(
                program,
                sys::PROGRAM_BINARY_SIZES,
                size_of::<usize>(),
                (&mut size as *mut usize).cast(),
                null_mut(),
            ),
        )?;
        if size == 0 {
            return Err("the driver gives no binary".to_string());
        }
        let mut bytes = vec![0u8; size];
        let mut at = bytes.as_mut_ptr();
        sys::check(
            "clGetProgramInfo",
            (api.clGetProgramInfo)(
                program,
                sys::PROGRAM_BINARIES,
                size_of::<*mut u8>(),
                (&mut at as *mut *mut u8).cast(),
                null_mut(),
            ),
        )?;
        Ok(bytes)
    }
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
