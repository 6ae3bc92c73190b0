/// The kind of code in a [`DeviceImage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// PTX text, compiled by the driver at load for any GPU at least as new as `target`.
    Ptx,
    /// Machine code (from ptxas) for exactly `target`.
    Cubin,
    /// An HSA code object (AMDGPU ELF, code object v5) for exactly the AMD GPU `target`
    /// (`gfx90a`, `gfx942`, `gfx1100`, ...), loaded through liboffload's AMDGPU platform. Its
    /// kernels take their parameters in the kernarg segment at the offsets of the same C-struct
    /// parameter buffer as PTX kernels (checked against the code object's metadata by the build).
    HsaCodeObject,
}

/// One compiled form of a crate's kernels, embedded by `offload::embed_images!`.
#[derive(Debug)]
pub struct DeviceImage {
    pub format: ImageFormat,
    /// The GPU architecture it was built for, e.g. `"sm_90"` or `"gfx942"`.
    pub target: &'static str,
    pub bytes: &'static [u8],
}

/// All device images of one crate's kernels, written by the device pass (`offload-build`).
#[derive(Debug)]
pub struct ImageSet {
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

    /// The best image for an NVIDIA GPU of compute capability `major.minor`: a cubin for exactly
    /// that architecture, else the newest PTX the GPU can compile.
    pub fn best_for_cuda(&self, major: u32, minor: u32) -> Option<&DeviceImage> {
        let device_sm = major * 10 + minor;
        let cubin = self
            .images
            .iter()
            .find(|i| i.format == ImageFormat::Cubin && sm_number(i.target) == Some(device_sm));
        cubin.or_else(|| {
            self.images
                .iter()
                .filter(|i| i.format == ImageFormat::Ptx)
                .filter_map(|i| Some((sm_number(i.target)?, i)))
                .filter(|(sm, _)| *sm <= device_sm)
                .max_by_key(|(sm, _)| *sm)
                .map(|(_, i)| i)
        })
    }

    /// The HSA code object for the AMD GPU architecture `arch` (`"gfx942"`): code objects run
    /// only on the architecture they were built for.
    pub fn for_amdgpu(&self, arch: &str) -> Option<&DeviceImage> {
        self.images
            .iter()
            .find(|i| i.format == ImageFormat::HsaCodeObject && i.target == arch)
    }
}

/// `"sm_90"` → 90 (`"sm_90a"` → 90).
fn sm_number(target: &str) -> Option<u32> {
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

    static IMAGES: [DeviceImage; 4] = [
        DeviceImage {
            format: ImageFormat::Cubin,
            target: "sm_90",
            bytes: b"cubin90",
        },
        DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_70",
            bytes: b"ptx70",
        },
        DeviceImage {
            format: ImageFormat::Ptx,
            target: "sm_90",
            bytes: b"ptx90",
        },
        DeviceImage {
            format: ImageFormat::HsaCodeObject,
            target: "gfx942",
            bytes: b"hsaco942",
        },
    ];
    static SET: ImageSet = ImageSet {
        images: &IMAGES,
        kernels: &["saxpy"],
        unavailable: None,
    };

    #[test]
    fn picks_exact_cubin_then_newest_compatible_ptx() {
        assert_eq!(SET.best_for_cuda(9, 0).unwrap().bytes, b"cubin90");
        assert_eq!(SET.best_for_cuda(10, 0).unwrap().bytes, b"ptx90");
        assert_eq!(SET.best_for_cuda(8, 0).unwrap().bytes, b"ptx70");
        assert!(SET.best_for_cuda(6, 1).is_none());
    }

    #[test]
    fn amd_images_match_their_architecture_exactly() {
        assert_eq!(SET.for_amdgpu("gfx942").unwrap().bytes, b"hsaco942");
        assert!(SET.for_amdgpu("gfx90a").is_none());
        assert!(SET.for_amdgpu("sm_90").is_none());
        // NVIDIA picks never return an AMD image.
        assert_eq!(SET.best_for_cuda(9, 0).unwrap().format, ImageFormat::Cubin);
    }

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
