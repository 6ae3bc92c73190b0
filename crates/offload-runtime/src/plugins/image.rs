/// The kind of code in a [`DeviceImage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// PTX text, compiled by the driver at load for any GPU at least as new as `target`.
    Ptx,
    /// Machine code (from ptxas) for exactly `target`.
    Cubin,
    /// A SPIR-V module (`target` `spirv64-v1.4`) for OpenCL devices, loaded with
    /// `clCreateProgramWithIL`; built when `OFFLOAD_SPIRV=1`.
    Spirv,
    /// An HSA code object (AMDGPU ELF, code object v5) for exactly the AMD GPU `target`
    /// (`gfx90a`, `gfx942`, `gfx1100`, ...), loaded through liboffload's AMDGPU platform. Its
    /// kernels take their parameters in the kernarg segment at the offsets of the same C-struct
    /// parameter buffer as PTX kernels (checked against the code object's metadata by the build).
    HsaCodeObject,
}

/// One compiled form of a crate's kernels, embedded by `offload::embed_images!`.
#[derive(Debug)]
pub struct DeviceImage {
    /// What kind of code it holds.
    pub format: ImageFormat,
    /// The GPU architecture it was built for, e.g. `"sm_90"` or `"gfx942"`.
    pub target: &'static str,
    /// The image itself.
    pub bytes: &'static [u8],
}

/// All device images of one crate's kernels, written by the device pass (`offload-build`).
#[derive(Debug)]
pub struct ImageSet {
    /// The images, cubins first.
    pub images: &'static [DeviceImage],
    /// Entry points the images hold.
    pub kernels: &'static [&'static str],
    /// Why no images were built (no device toolchain, say), when `images` is empty.
    pub unavailable: Option<&'static str>,
}

impl ImageSet {
    /// Whether the device images hold `kernel`.
    pub fn has_kernel(&self, kernel: &str) -> bool {
        !self.images.is_empty() && self.kernels.contains(&kernel)
    }
}

/// `"sm_90"` → 90 (`"sm_90a"` → 90).
pub(crate) fn sm_number(target: &str) -> Option<u32> {
    let digits: String = target
        .strip_prefix("sm_")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    static SET: ImageSet = ImageSet {
        images: &[DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_70",
            bytes: b"ptx70",
        }],
        kernels: &["saxpy"],
        unavailable: None,
    };

    #[test]
    fn knows_its_kernels() {
        assert!(SET.has_kernel("saxpy"));
        assert!(!SET.has_kernel("other"));
        let empty = ImageSet {
            images: &[],
            kernels: &[],
            unavailable: Some("no toolchain"),
        };
        assert!(!empty.has_kernel("saxpy"));
    }
}
