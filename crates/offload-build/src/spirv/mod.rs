//! The SPIR-V image of a kernels module (opt-in: `OFFLOAD_SPIRV=1`), for Intel GPUs and other
//! OpenCL 3.0 devices that take SPIR-V.
//!
//! rustc has no SPIR-V target that Debian's or rustup's builds can use, so the kernels module is
//! compiled for nvptx64 once more, with offload's `spirv` feature (OpenCL built-ins instead of
//! PTX; its own target directory), and linked by a script of its own (`link_script`) that runs
//! the `offload-spirv` LLVM pass (`rewrite.cpp`, built by `pass_plugin`) and LLVM's SPIR-V
//! backend. The image is then checked: the kernel ABI by `check`, and by `spirv-val` when it is
//! installed (`OFFLOAD_SPIRV_VAL` names it, else PATH). A missing tool is a cargo warning and no
//! SPIR-V image; an image that fails a check fails the build.

mod check;
mod link_script;
mod pass_plugin;

pub use check::{check_kernel_abi, kernels, words, Param, SpirvKernel, Storage};

use crate::images::{ImageFile, ImageKind};
use crate::toolchain::{find_on_path, DeviceToolchain};
use std::fs;
use std::path::{Path, PathBuf};

/// The `target` of SPIR-V images.
pub(crate) const SPIRV_TARGET: &str = "spirv64-v1.4";

/// What the nvptx64 build of the same module needs to build its SPIR-V twin.
pub(crate) struct SpirvBuild<'a> {
    pub toolchain: &'a DeviceToolchain,
    /// The generated device crate.
    pub gen: &'a Path,
    /// Where the images go.
    pub images_dir: &'a Path,
    /// Builds the device crate with these rustflags, the extra cargo arguments and target dir;
    /// returns the linked output.
    pub cargo_build: &'a dyn Fn(&str, &[&str], &Path) -> PathBuf,
    /// The nvptx64 build's rustflags with another linker.
    pub rustflags: &'a dyn Fn(&Path) -> String,
}

/// Builds, checks and writes `kernels.spv`; `Err` is why there is no SPIR-V image (a warning).
/// Panics when the image fails a check, or its kernels differ from `kernels` (the PTX image's).
pub(crate) fn build_image(b: &SpirvBuild<'_>, kernels: &[String]) -> Result<ImageFile, String> {
    let tools = pass_plugin::find_tools(&b.toolchain.opt)?;
    let plugin = pass_plugin::build(&tools, b.gen)?;
    // Named after the pass's cache key (its directory): cargo does not see a linker's contents,
    // but a new linker path changes the flags, so a new pass relinks the image.
    let key = plugin
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("pass");
    let linker = b.gen.join(format!("offload-link-spirv-{key}"));
    crate::write_if_changed(
        &linker,
        link_script::render(
            &b.toolchain.llvm_link,
            &b.toolchain.opt,
            &b.toolchain.llc,
            &plugin,
        )
        .as_bytes(),
    );
    crate::make_executable(&linker);
    let rustflags = (b.rustflags)(&linker);
    let built = (b.cargo_build)(
        &rustflags,
        &["--features", "offload/spirv"],
        &b.gen.join("target").join("spirv"),
    );
    let bytes = fs::read(&built)
        .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", built.display()));
    let image = b.images_dir.join("kernels.spv");
    crate::write_if_changed(&image, &bytes);

    let words = check::words(&bytes).unwrap_or_else(|e| panic!("offload-build: {e}"));
    let entries = check::check_kernel_abi(&words).unwrap_or_else(|e| {
        panic!(
            "offload-build: the SPIR-V image {} breaks the kernel ABI:\n{e}",
            image.display()
        )
    });
    let mut sorted_entries = entries.clone();
    sorted_entries.sort();
    let mut sorted_kernels = kernels.to_vec();
    sorted_kernels.sort();
    if sorted_entries != sorted_kernels {
        panic!(
            "offload-build: the SPIR-V image has kernels {entries:?}, the PTX image {kernels:?}"
        );
    }
    match spirv_val_path() {
        Some(tool) => check::spirv_val(&tool, &image).unwrap_or_else(|e| panic!("offload-build: {e}")),
        None => println!(
            "cargo::warning=offload: spirv-val not found (apt-get install spirv-tools, or set OFFLOAD_SPIRV_VAL); the SPIR-V image was checked by offload only"
        ),
    }
    Ok(ImageFile {
        kind: ImageKind::Spirv,
        arch: SPIRV_TARGET.to_string(),
        path: image,
    })
}

fn spirv_val_path() -> Option<PathBuf> {
    match std::env::var_os("OFFLOAD_SPIRV_VAL") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => find_on_path("spirv-val"),
    }
}
