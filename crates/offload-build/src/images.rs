//! The device images a build produced, and the Rust expression that embeds them.

use crate::image_record::SECTION;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What a device image file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one GPU architecture, from `ptxas`.
    Cubin,
    /// PTX text, which the CUDA driver compiles for the GPU it finds.
    Ptx,
    /// A SPIR-V module for OpenCL devices (`OFFLOAD_SPIRV=1`).
    Spirv,
    /// An HSA code object (AMDGPU ELF) for one AMD GPU architecture.
    HsaCodeObject,
}

impl ImageKind {
    fn variant(self) -> &'static str {
        match self {
            ImageKind::Cubin => "Cubin",
            ImageKind::Ptx => "Ptx",
            ImageKind::Spirv => "Spirv",
            ImageKind::HsaCodeObject => "HsaCodeObject",
        }
    }

    /// Its name in an image record (`cargo offload images` prints it).
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Cubin => "cubin",
            ImageKind::Ptx => "ptx",
            ImageKind::Spirv => "spirv",
            ImageKind::HsaCodeObject => "hsaco",
        }
    }

    /// Where images of this kind come in a crate's record and `offload_images.rs`: ready machine
    /// code (cubins, HSA code objects) before what a driver compiles (PTX, then SPIR-V).
    pub(crate) fn order(self) -> u8 {
        match self {
            ImageKind::Cubin => 0,
            ImageKind::HsaCodeObject => 1,
            ImageKind::Ptx => 2,
            ImageKind::Spirv => 3,
        }
    }
}

/// One file written under `$OUT_DIR/offload/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFile {
    pub kind: ImageKind,
    /// The architecture it was built for, such as `sm_90` or `gfx942` (`spirv64-v1.4` for
    /// SPIR-V).
    pub arch: String,
    /// Absolute path of the file.
    pub path: PathBuf,
}

/// Names of the kernel entry points a PTX module defines, in order of appearance.
///
/// Declarations of entries defined elsewhere (`.extern .entry`) are skipped: they cannot be
/// launched from this module.
pub fn entry_names(ptx: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in ptx.lines() {
        let mut tokens = line.split_whitespace();
        let mut is_extern = false;
        let mut found = None;
        while let Some(tok) = tokens.next() {
            match tok {
                ".extern" => is_extern = true,
                ".entry" => {
                    found = tokens.next();
                    break;
                }
                // Only directives may precede `.entry` on its line.
                t if t.starts_with('.') => {}
                _ => break,
            }
        }
        // The name may run straight into the parameter list: `.entry saxpy(`.
        let Some(name) = found.and_then(|t| t.split('(').next()) else {
            continue;
        };
        if !is_extern && !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// Where one image lies in the crate's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedImage {
    pub kind: ImageKind,
    pub arch: String,
    /// Its bytes within the record.
    pub range: Range<usize>,
}

/// The contents of `offload_images.rs`: one `::offload::ImageSet` expression whose images are
/// slices of the record file `record` ([`image_record`](crate::image_record), `record_len`
/// bytes), placed in the program's [`SECTION`] so that `cargo offload images` can read them
/// back.
///
/// Cubins and HSA code objects should come first (`ImageKind::order`), so that the runtime
/// tries ready machine code before asking the driver to compile PTX (then SPIR-V).
pub fn render(
    record: &Path,
    record_len: usize,
    images: &[PlacedImage],
    kernels: &[String],
    unavailable: Option<&str>,
) -> String {
    let record = record
        .to_str()
        .unwrap_or_else(|| panic!("offload-build: path {} is not UTF-8", record.display()));
    // `#[used]`: a crate whose kernels a program never launches still shows in its section.
    // `{:?}` of a str is a valid Rust string literal, escapes included.
    let mut out = format!(
        "{{\n    #[used]\n    #[cfg_attr(target_os = \"linux\", unsafe(link_section = {SECTION:?}))]\n    \
         static RECORD: [u8; {record_len}] = *include_bytes!({record:?});\n    \
         ::offload::ImageSet {{\n        images: &[\n"
    );
    for image in images {
        writeln!(
            out,
            "            ::offload::DeviceImage {{ format: ::offload::ImageFormat::{}, target: {:?}, bytes: RECORD.split_at({}).1.split_at({}).0 }},",
            image.kind.variant(),
            image.arch,
            image.range.start,
            image.range.len()
        )
        .unwrap();
    }
    out.push_str("        ],\n        kernels: &[");
    for (i, k) in kernels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write!(out, "{k:?}").unwrap();
    }
    out.push_str("],\n");
    match unavailable {
        Some(reason) => writeln!(out, "        unavailable: Some({reason:?}),").unwrap(),
        None => out.push_str("        unavailable: None,\n"),
    }
    out.push_str("    }\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
//
// Generated by LLVM NVPTX Back-End
//
.version 7.8
.target sm_90
.address_size 64

.extern .func  (.param .b32 func_retval0) vprintf
.extern .entry imported(
.visible .entry divk(
	.param .u64 .ptr .align 1 divk_param_0
)
{
	ret;
}
	// .globl	saxpy
.visible .entry saxpy(
	.param .f32 saxpy_param_0
)
.entry plain (
)
.weak .entry saxpy(
"#;

    #[test]
    fn entries_are_found_once_in_order() {
        assert_eq!(entry_names(PTX), ["divk", "saxpy", "plain"]);
    }

    #[test]
    fn no_entries_in_empty_module() {
        assert!(entry_names(".version 7.8\n.target sm_90\n").is_empty());
        assert!(entry_names("// .entry commented(\n").is_empty());
    }

    #[test]
    fn render_slices_the_record_and_escapes() {
        let images = vec![
            PlacedImage {
                kind: ImageKind::Cubin,
                arch: "sm_90".into(),
                range: 120..4216,
            },
            PlacedImage {
                kind: ImageKind::Ptx,
                arch: "sm_90".into(),
                range: 4216..4300,
            },
        ];
        let kernels = ["saxpy".into(), "stencil".into()];
        let text = render(
            Path::new("/o \"q\"\\/images.bin"),
            4300,
            &images,
            &kernels,
            None,
        );
        let expected = r#"{
    #[used]
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".offload_images"))]
    static RECORD: [u8; 4300] = *include_bytes!("/o \"q\"\\/images.bin");
    ::offload::ImageSet {
        images: &[
            ::offload::DeviceImage { format: ::offload::ImageFormat::Cubin, target: "sm_90", bytes: RECORD.split_at(120).1.split_at(4096).0 },
            ::offload::DeviceImage { format: ::offload::ImageFormat::Ptx, target: "sm_90", bytes: RECORD.split_at(4216).1.split_at(84).0 },
        ],
        kernels: &["saxpy", "stencil"],
        unavailable: None,
    }
}
"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn render_unavailable() {
        let text = render(
            Path::new("/o/images.bin"),
            60,
            &[],
            &[],
            Some("no \"rustc\" here"),
        );
        assert!(text.contains("static RECORD: [u8; 60] = *include_bytes!(\"/o/images.bin\");"));
        assert!(text.contains("        images: &[\n        ],\n        kernels: &[],\n        unavailable: Some(\"no \\\"rustc\\\" here\"),\n"));
    }
}
