//! AMD GPU images: the kernels module built for `amdgcn-amd-amdhsa` as one HSA code object per
//! architecture (`gfx90a`, `gfx942`, `gfx1100`, ...), next to the PTX and cubins.
//!
//! Per architecture: `core` from the user-wide cache (`core_cache`), the device crate compiled
//! with fat LTO into bitcode (never linked by rustc, whose amdgcn link panics), the AMD link step
//! (`amdgpu_link`), and the kernel ABI check of the result against the code object's metadata
//! (`kernel_abi`). A missing tool or an architecture LLVM does not know is a cargo warning and no
//! AMD image; a kernel that fails to compile or an ABI mismatch fails the build.

use crate::amdgpu_link::{self, Tools};
use crate::images::{ImageFile, ImageKind};
use crate::toolchain::{capture, find_on_path, DeviceToolchain};
use crate::{child_env, core_cache, hsa_code_object, kernel_abi, tail, utf8, write_if_changed};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const AMDGPU_TARGET: &str = "amdgcn-amd-amdhsa";

/// The architectures built when neither `OFFLOAD_AMDGPU_ARCH` nor the build script names any:
/// MI200 (CDNA2), MI300 (CDNA3) and Radeon RX 7900 (RDNA3).
pub const DEFAULT_ARCHS: [&str; 3] = ["gfx90a", "gfx942", "gfx1100"];

/// `gfx` and digits or lowercase letters (`gfx90a`, `gfx1100`): the value goes into flags and
/// file names, so anything else is refused.
pub(crate) fn checked_arch(arch: &str) -> Result<String, String> {
    let ok = arch.strip_prefix("gfx").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 6
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    });
    if ok {
        Ok(arch.to_string())
    } else {
        Err(format!(
            "`{arch}` is not an AMD GPU architecture like gfx942"
        ))
    }
}

/// The architectures to build: `OFFLOAD_AMDGPU_ARCH` when set (a comma list; `none` builds no AMD
/// image), else the build script's ([`crate::Kernels::amdgpu_arch`]), else [`DEFAULT_ARCHS`].
pub(crate) fn archs(from_env: Option<&str>, from_builder: &[String]) -> Result<Vec<String>, String> {
    let listed: Vec<String> = match from_env.map(str::trim) {
        Some("none") => return Ok(Vec::new()),
        Some(list) if !list.is_empty() => list
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| checked_arch(a).map_err(|e| format!("OFFLOAD_AMDGPU_ARCH: {e}")))
            .collect::<Result<_, _>>()?,
        _ if !from_builder.is_empty() => from_builder.to_vec(),
        _ => DEFAULT_ARCHS.iter().map(|a| a.to_string()).collect(),
    };
    let mut archs = Vec::new();
    for a in listed {
        if !archs.contains(&a) {
            archs.push(a);
        }
    }
    Ok(archs)
}

/// What the AMD images need beyond the nvptx toolchain.
struct AmdToolchain {
    lld: PathBuf,
    lld_args: Vec<String>,
    /// The GPUs `llc` knows.
    cpus: Vec<String>,
}

/// `ld.lld` of the LLVM that `llc` belongs to (same directory, same version suffix), else any
/// `ld.lld` at least as new as rustc's LLVM, else rustup's `rust-lld`.
fn find_lld(tc: &DeviceToolchain) -> Option<(PathBuf, Vec<String>)> {
    let llc_name = tc.llc.file_name()?.to_str()?;
    let suffix = llc_name.strip_prefix("llc").unwrap_or("");
    let beside = tc.llc.with_file_name(format!("ld.lld{suffix}"));
    let mut candidates = vec![beside];
    for n in tc.llvm_major..=tc.llvm_major + 4 {
        candidates.extend(find_on_path(format!("ld.lld-{n}")));
        candidates.push(PathBuf::from(format!("/usr/lib/llvm-{n}/bin/ld.lld")));
    }
    candidates.extend(find_on_path("ld.lld"));
    if let Some(found) = candidates.into_iter().find(|p| p.is_file()) {
        return Some((found, Vec::new()));
    }
    let rust_lld = tc
        .sysroot
        .join("lib/rustlib")
        .join(&tc.host)
        .join("bin/rust-lld");
    rust_lld
        .is_file()
        .then(|| (rust_lld, vec!["-flavor".to_string(), "gnu".to_string()]))
}

fn find_amd_toolchain(tc: &DeviceToolchain) -> Result<AmdToolchain, String> {
    let targets = capture(Command::new(&tc.rustc).args(["--print", "target-list"]))?;
    if !targets.lines().any(|t| t.trim() == AMDGPU_TARGET) {
        return Err(format!("{} does not support {AMDGPU_TARGET}", tc.rustc.display()));
    }
    let help = Command::new(&tc.llc)
        .args(["-mtriple=amdgcn-amd-amdhsa", "-mcpu=help"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tc.llc.display()))?;
    let text = String::from_utf8_lossy(&help.stderr) + String::from_utf8_lossy(&help.stdout);
    let cpus: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("gfx"))
        .map(String::from)
        .collect();
    if cpus.is_empty() {
        return Err(format!("{} has no AMDGPU backend", tc.llc.display()));
    }
    let (lld, lld_args) = find_lld(tc).ok_or_else(|| {
        format!(
            "no ld.lld of LLVM {} or newer (apt-get install lld-{}, or rustup's rust-lld)",
            tc.llvm_major, tc.llvm_major
        )
    })?;
    Ok(AmdToolchain {
        lld,
        lld_args,
        cpus,
    })
}

/// One device pass's AMD images.
pub(crate) struct Job<'a> {
    pub tc: &'a DeviceToolchain,
    pub cargo: &'a Path,
    /// The generated device crate.
    pub gen: &'a Path,
    pub kernels_file: &'a Path,
    pub manifest_dir: &'a Path,
    pub images_dir: &'a Path,
    pub panic_reporting: bool,
}

/// Builds and checks the code object of every architecture in `archs` that the toolchain can
/// build; warns about the others. Returns the images and the kernels they hold.
pub(crate) fn build(job: &Job<'_>, archs: &[String]) -> (Vec<ImageFile>, Vec<String>) {
    if archs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let amd = match find_amd_toolchain(job.tc) {
        Ok(amd) => amd,
        Err(reason) => {
            println!(
                "cargo::warning=offload: no AMD GPU images ({reason}); set OFFLOAD_AMDGPU_ARCH=none \
                 to build none without this warning"
            );
            return (Vec::new(), Vec::new());
        }
    };
    let mut images = Vec::new();
    let mut kernels: Vec<String> = Vec::new();
    for arch in archs {
        if !amd.cpus.contains(arch) {
            println!(
                "cargo::warning=offload: no AMD image for {arch}: {} does not know it",
                job.tc.llc.display()
            );
            continue;
        }
        let sysroot = match core_cache::sysroot(job.tc, job.cargo, AMDGPU_TARGET, arch) {
            Ok(s) => s,
            Err(reason) => {
                println!("cargo::warning=offload: no AMD image for {arch}: {}", first_line(&reason));
                continue;
            }
        };
        let (image, entries) = build_arch(job, &amd, arch, &sysroot);
        for e in entries {
            if !kernels.contains(&e) {
                kernels.push(e);
            }
        }
        images.push(image);
    }
    (images, kernels)
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or(text)
}

/// The device build's flags (`CARGO_ENCODED_RUSTFLAGS`) for one AMD architecture.
fn rustflags(arch: &str, sysroot: &Path, manifest_dir: &Path, panic_reporting: bool) -> String {
    let mut flags = format!(
        "-Ctarget-cpu={arch}\x1f--sysroot={}\x1f--remap-path-prefix={}/=",
        utf8(sysroot),
        utf8(manifest_dir)
    );
    if !panic_reporting {
        flags.push_str("\x1f--cfg\x1foffload_panic_reporting_off");
    }
    flags
}

fn build_arch(
    job: &Job<'_>,
    amd: &AmdToolchain,
    arch: &str,
    sysroot: &Path,
) -> (ImageFile, Vec<String>) {
    let work = job.gen.join(format!("amdgpu-{arch}"));
    fs::create_dir_all(&work)
        .unwrap_or_else(|e| panic!("offload-build: cannot create {}: {e}", work.display()));
    let bitcode = work.join("kernels.bc");
    let mut cmd = Command::new(job.cargo);
    child_env::scrub(&mut cmd);
    cmd.current_dir(job.gen)
        .args(["rustc", "--release", "--quiet", "--target", AMDGPU_TARGET])
        .args(["--crate-type", "staticlib", "--manifest-path"])
        .arg(job.gen.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(job.gen.join("target").join(format!("amdgpu-{arch}")))
        .arg("--")
        .arg(format!("--emit=llvm-bc={}", utf8(&bitcode)))
        .env("RUSTC", &job.tc.rustc)
        .env("RUSTC_BOOTSTRAP", "1")
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            rustflags(arch, sysroot, job.manifest_dir, job.panic_reporting),
        );
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("offload-build: cannot run {}: {e}", job.cargo.display()));
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        panic!(
            "offload-build: the kernels module {} failed to build for {AMDGPU_TARGET} ({arch}); \
             OFFLOAD_AMDGPU_ARCH=none builds no AMD images ({}):\n{}",
            job.kernels_file.display(),
            out.status,
            tail(&text, 60)
        );
    }
    let tools = Tools {
        llvm_link: &job.tc.llvm_link,
        opt: &job.tc.opt,
        llc: &job.tc.llc,
        lld: &amd.lld,
        lld_args: &amd.lld_args,
    };
    let linked = work.join("kernels.hsaco");
    let entries = amdgpu_link::link(&tools, &bitcode, arch, &work, &linked)
        .unwrap_or_else(|e| panic!("offload-build: AMD link step for {arch}: {e}"));
    let bytes = fs::read(&linked)
        .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", linked.display()));
    let object = hsa_code_object::read(&bytes)
        .unwrap_or_else(|e| panic!("offload-build: the code object for {arch}: {e}"));
    if let Err(mismatch) = kernel_abi::check(arch, &object, &entries) {
        panic!("offload-build: AMD kernel ABI check: {mismatch}");
    }
    let image = job.images_dir.join(format!("kernels.{arch}.hsaco"));
    write_if_changed(&image, &bytes);
    let kernels = entries.into_iter().map(|e| e.kernel).collect();
    (
        ImageFile {
            kind: ImageKind::HsaCodeObject,
            arch: arch.to_string(),
            path: image,
        },
        kernels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        for ok in ["gfx90a", "gfx942", "gfx1100", "gfx1201", "gfx950"] {
            assert_eq!(checked_arch(ok).as_deref(), Ok(ok));
        }
        for bad in ["", "gfx", "942", "sm_90", "gfx9 42", "gfx942;rm", "GFX942", "gfxa42"] {
            assert!(checked_arch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn arch_selection() {
        let default: Vec<String> = DEFAULT_ARCHS.iter().map(|a| a.to_string()).collect();
        assert_eq!(archs(None, &[]).unwrap(), default);
        assert_eq!(archs(Some(""), &[]).unwrap(), default);
        assert!(archs(Some("none"), &["gfx942".into()]).unwrap().is_empty());
        assert_eq!(archs(None, &["gfx942".into()]).unwrap(), ["gfx942"]);
        assert_eq!(
            archs(Some(" gfx942 ,gfx90a,gfx942"), &["gfx1100".into()]).unwrap(),
            ["gfx942", "gfx90a"]
        );
        let e = archs(Some("gfx942,sm_90"), &[]).unwrap_err();
        assert!(e.contains("`sm_90` is not an AMD GPU architecture"), "{e}");
    }

    #[test]
    fn flags_point_at_the_cached_sysroot() {
        let flags = rustflags("gfx942", Path::new("/c/sys"), Path::new("/p"), false);
        let flags: Vec<&str> = flags.split('\x1f').collect();
        assert_eq!(
            flags,
            [
                "-Ctarget-cpu=gfx942",
                "--sysroot=/c/sys",
                "--remap-path-prefix=/p/=",
                "--cfg",
                "offload_panic_reporting_off"
            ]
        );
    }
}
