//! Which device images a liboffload device runs, and loading one (`olCreateProgram`).

use crate::backend::interface::Platform;
use crate::backend::liboffload::result::{Ol, OlError};
use crate::backend::liboffload::sys;
use crate::image::{sm_number, DeviceImage, ImageFormat};

/// How well a liboffload device of `platform` runs `image`: a binary liboffload calls valid for
/// it (a cubin of its architecture, an HSA code object of its GPU) best; on NVIDIA GPUs, PTX of
/// the newest architecture next (the driver compiles it; liboffload 22 does not say the GPU's
/// architecture, so a PTX newer than the GPU is refused at load, with the driver's message).
///
/// # Safety
/// `device` is a live GPU handle of `platform`.
pub unsafe fn rank(
    ol: Ol,
    device: sys::ol_device_handle_t,
    platform: Platform,
    image: &DeviceImage,
) -> Option<u32> {
    match image.format {
        ImageFormat::Ptx => (platform == Platform::Cuda)
            .then(|| sm_number(image.target))
            .flatten(),
        // SAFETY: per this function's contract.
        _ => (unsafe { ol.is_valid_binary(device, image.bytes) } == Ok(true)).then_some(u32::MAX),
    }
}

/// Loads `image` on `device` (liboffload keeps its own copy); PTX goes NUL-terminated, as the
/// driver reads it.
///
/// # Safety
/// `device` is a live GPU handle.
pub unsafe fn load(
    ol: Ol,
    device: sys::ol_device_handle_t,
    image: &DeviceImage,
) -> Result<sys::ol_program_handle_t, OlError> {
    let owned;
    let bytes = match image.format {
        ImageFormat::Ptx if image.bytes.last() != Some(&0) => {
            owned = [image.bytes, &[0]].concat();
            &owned[..]
        }
        _ => image.bytes,
    };
    // SAFETY: per this function's contract.
    unsafe { ol.create_program(device, bytes) }
}
