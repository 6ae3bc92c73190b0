//! Which device images a liboffload device runs, and loading one (`olCreateProgram`).

use crate::plugins::image::{sm_number, DeviceImage, ImageFormat};
use crate::plugins::interface::Platform;
use crate::plugins::liboffload::result::{Ol, OlError};
use crate::plugins::liboffload::sys;

/// The code a liboffload GPU runs: an NVIDIA GPU's driver takes cubins and PTX; an AMD GPU runs
/// the HSA code objects of its own architecture (`gfx942`: liboffload's device name of an AMD
/// GPU, `OL_DEVICE_INFO_NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gpu {
    Cuda,
    Amdgpu { arch: String },
}

impl Gpu {
    pub fn platform(&self) -> Platform {
        match self {
            Gpu::Cuda => Platform::Cuda,
            Gpu::Amdgpu { .. } => Platform::Amdgpu,
        }
    }

    /// What code this GPU needs, for the error when a kernel has none: on an AMD GPU, the
    /// architecture the build must list.
    pub fn target(&self) -> String {
        match self {
            Gpu::Cuda => "an NVIDIA GPU through liboffload".to_string(),
            Gpu::Amdgpu { arch } => format!(
                "an AMD GPU through liboffload, which runs HSA code objects built for its \
                 architecture {arch} only (build with {arch} in OFFLOAD_AMDGPU_ARCH)"
            ),
        }
    }
}

/// How `image` ranks on `gpu` as far as the image alone says; `AskDriver` where liboffload must
/// check the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    Rank(Option<u32>),
    AskDriver,
}

fn fit(gpu: &Gpu, image: &DeviceImage) -> Fit {
    match (image.format, gpu) {
        // The driver compiles PTX; the newest architecture first (liboffload 22 does not say
        // the GPU's architecture, so a PTX newer than the GPU is refused at load, with the
        // driver's message).
        (ImageFormat::Ptx, Gpu::Cuda) => Fit::Rank(sm_number(image.target)),
        (ImageFormat::Cubin, Gpu::Cuda) => Fit::AskDriver,
        // A code object runs on exactly the architecture it was built for.
        (ImageFormat::HsaCodeObject, Gpu::Amdgpu { arch }) => {
            Fit::Rank((image.target == arch).then_some(u32::MAX))
        }
        _ => Fit::Rank(None),
    }
}

/// How well `gpu` runs `image`: machine code for it best (a cubin liboffload calls valid for
/// it, the HSA code object of its architecture), then on NVIDIA GPUs the newest PTX.
///
/// # Safety
/// `device` is a live GPU handle of `gpu`'s platform.
pub unsafe fn rank(
    ol: Ol,
    device: sys::ol_device_handle_t,
    gpu: &Gpu,
    image: &DeviceImage,
) -> Option<u32> {
    match fit(gpu, image) {
        Fit::Rank(rank) => rank,
        Fit::AskDriver => {
            // SAFETY: per this function's contract.
            let valid = unsafe { ol.is_valid_binary(device, image.bytes) };
            (valid == Ok(true)).then_some(u32::MAX)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const fn image(format: ImageFormat, target: &'static str) -> DeviceImage {
        DeviceImage {
            format,
            target,
            bytes: b"image",
        }
    }

    /// What the device pass embeds by default, in its order.
    static IMAGES: [DeviceImage; 6] = [
        image(ImageFormat::Cubin, "sm_90"),
        image(ImageFormat::HsaCodeObject, "gfx90a"),
        image(ImageFormat::HsaCodeObject, "gfx942"),
        image(ImageFormat::HsaCodeObject, "gfx1100"),
        image(ImageFormat::Ptx, "sm_90"),
        image(ImageFormat::Spirv, "spirv64-v1.4"),
    ];

    fn amd(arch: &str) -> Gpu {
        Gpu::Amdgpu { arch: arch.into() }
    }

    /// The images that rank on `gpu` without the driver, best first.
    fn chosen(gpu: &Gpu) -> Vec<(ImageFormat, &'static str)> {
        let mut ranked: Vec<(u32, &DeviceImage)> = IMAGES
            .iter()
            .filter_map(|i| match fit(gpu, i) {
                Fit::Rank(r) => Some((r?, i)),
                Fit::AskDriver => None,
            })
            .collect();
        ranked.sort_by_key(|(r, _)| std::cmp::Reverse(*r));
        ranked.iter().map(|(_, i)| (i.format, i.target)).collect()
    }

    #[test]
    fn an_amd_gpu_runs_the_code_object_of_its_architecture_only() {
        for arch in ["gfx90a", "gfx942", "gfx1100"] {
            assert_eq!(chosen(&amd(arch)), [(ImageFormat::HsaCodeObject, arch)]);
        }
        // gfx90a code is not gfx908's, nor gfx1100's gfx1101's.
        assert!(chosen(&amd("gfx908")).is_empty());
        assert!(chosen(&amd("gfx1101")).is_empty());
        assert!(IMAGES
            .iter()
            .all(|i| fit(&amd("gfx942"), i) != Fit::AskDriver));
    }

    #[test]
    fn an_nvidia_gpu_asks_the_driver_about_cubins_and_never_takes_amd_or_spirv_code() {
        assert_eq!(chosen(&Gpu::Cuda), [(ImageFormat::Ptx, "sm_90")]);
        let asked: Vec<_> = IMAGES
            .iter()
            .filter(|i| fit(&Gpu::Cuda, i) == Fit::AskDriver)
            .map(|i| (i.format, i.target))
            .collect();
        assert_eq!(asked, [(ImageFormat::Cubin, "sm_90")]);
    }

    #[test]
    fn without_an_image_of_its_architecture_the_error_names_it() {
        let target = amd("gfx908").target();
        assert!(target.contains("architecture gfx908 only"), "{target}");
        assert!(target.contains("gfx908 in OFFLOAD_AMDGPU_ARCH"), "{target}");
        assert_eq!(amd("gfx942").platform(), Platform::Amdgpu);
        assert_eq!(Gpu::Cuda.platform(), Platform::Cuda);
    }
}
