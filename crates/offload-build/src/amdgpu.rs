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
use crate::toolchain::{capture, find_lld, DeviceToolchain};
use crate::{
    child_env, core_cache, hsa_code_object, install_hints, kernel_abi, tail, utf8, write_if_changed,
};
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

/// The variable that sets one package's architectures ahead of `OFFLOAD_AMDGPU_ARCH`:
/// `OFFLOAD_AMDGPU_ARCH_` and the package name in upper case with `_` for `-`
/// (`OFFLOAD_AMDGPU_ARCH_OFFLOAD_EXAMPLES`).
pub(crate) fn package_var(package: &str) -> String {
    format!(
        "OFFLOAD_AMDGPU_ARCH_{}",
        package.to_ascii_uppercase().replace('-', "_")
    )
}

/// The architectures to build: `from_env` (the package's variable, else `OFFLOAD_AMDGPU_ARCH`)
/// when set (a comma list; `none` builds no AMD image), else the build script's
/// ([`crate::Kernels::amdgpu_arch`]), else [`DEFAULT_ARCHS`].
pub(crate) fn archs(
    from_env: Option<&str>,
    from_builder: &[String],
) -> Result<Vec<String>, String> {
    let listed: Vec<String> = match from_env.map(str::trim) {
        Some("none") => return Ok(Vec::new()),
        Some(list) if !list.is_empty() => list
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(checked_arch)
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
    /// `llvm-objdump` of the same LLVM, when installed: checks that every instruction decodes.
    objdump: Option<PathBuf>,
    /// The GPUs `llc` knows.
    cpus: Vec<String>,
}

/// `llvm-objdump` beside `llc`, of the same LLVM (same directory and version suffix).
fn objdump_beside(llc: &Path) -> Option<PathBuf> {
    let suffix = llc.file_name()?.to_str()?.strip_prefix("llc")?;
    Some(llc.with_file_name(format!("llvm-objdump{suffix}"))).filter(|p| p.is_file())
}

fn find_amd_toolchain(tc: &DeviceToolchain) -> Result<AmdToolchain, String> {
    let targets = capture(Command::new(&tc.rustc).args(["--print", "target-list"]))?;
    if !targets.lines().any(|t| t.trim() == AMDGPU_TARGET) {
        return Err(format!(
            "{} does not support {AMDGPU_TARGET}",
            tc.rustc.display()
        ));
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
    let lld = find_lld(tc.llvm_major)
        .map_err(|e| format!("{e}; {}", install_hints::lld(tc.llvm_major)))?;
    Ok(AmdToolchain {
        lld,
        objdump: objdump_beside(&tc.llc),
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
    /// `Kernels::fma_contraction`: every kernel's float arithmetic may contract into FMAs.
    pub fma_contraction: bool,
    /// `Kernels::fast_math`: every kernel is built with fast math.
    pub fast_math: bool,
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
    if amd.objdump.is_none() {
        println!(
            "cargo::warning=offload: no llvm-objdump beside {}: the AMD images are not \
             disassembled to check that every instruction decodes for its architecture",
            job.tc.llc.display()
        );
    }
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
        let _timer = crate::pass_timing::start(arch);
        let sysroot = match core_cache::sysroot(job.tc, job.cargo, AMDGPU_TARGET, arch, "") {
            Ok(s) => s,
            Err(reason) => {
                println!(
                    "cargo::warning=offload: no AMD image for {arch}: {}",
                    first_line(&reason)
                );
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
fn rustflags(
    arch: &str,
    sysroot: &Path,
    manifest_dir: &Path,
    panic_reporting: bool,
    fast_math: bool,
) -> String {
    let mut flags = format!(
        "-Ctarget-cpu={arch}\x1f--sysroot={}\x1f--remap-path-prefix={}/=",
        utf8(sysroot),
        utf8(manifest_dir)
    );
    if !panic_reporting {
        flags.push_str("\x1f--cfg\x1foffload_panic_reporting_off");
    }
    if fast_math {
        // offload-kernel's `math` picks the approximations (the link step does the rest).
        flags.push_str("\x1f--cfg\x1foffload_fast_math");
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
            rustflags(
                arch,
                sysroot,
                job.manifest_dir,
                job.panic_reporting,
                job.fast_math,
            ),
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
    };
    let linked = work.join("kernels.hsaco");
    let module_options = amdgpu_link::ModuleOptions {
        fma_contraction: job.fma_contraction,
        fast_math: job.fast_math,
    };
    let entries = amdgpu_link::link(&tools, &bitcode, arch, module_options, &work, &linked)
        .unwrap_or_else(|e| panic!("offload-build: AMD link step for {arch}: {e}"));
    let bytes = fs::read(&linked)
        .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", linked.display()));
    let object = hsa_code_object::read(&bytes)
        .unwrap_or_else(|e| panic!("offload-build: the code object for {arch}: {e}"));
    if let Err(mismatch) = kernel_abi::check(arch, &object, &entries) {
        panic!("offload-build: AMD kernel ABI check: {mismatch}");
    }
    if let Some(objdump) = &amd.objdump {
        check_decodes(objdump, arch, &linked).unwrap_or_else(|e| panic!("offload-build: {e}"));
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

/// Whether `objdump` decodes every instruction of the code object `image` for `arch`: a word it
/// prints as `.long` belongs to another architecture (bitcode or `core` built for another GPU).
fn check_decodes(objdump: &Path, arch: &str, image: &Path) -> Result<(), String> {
    let out = Command::new(objdump)
        .arg("-d")
        .arg(format!("--mcpu={arch}"))
        .arg(image)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", objdump.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} cannot disassemble the code object for {arch} ({}): {}",
            objdump.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let undecoded: Vec<&str> = text.lines().filter(|l| l.contains(".long")).collect();
    match undecoded.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "the code object for {arch} holds {} words that are no {arch} instruction \
             ({} -d --mcpu={arch}), e.g. `{}`",
            undecoded.len(),
            objdump.display(),
            first.trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        for ok in ["gfx90a", "gfx942", "gfx1100", "gfx1201", "gfx950"] {
            assert_eq!(checked_arch(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "",
            "gfx",
            "942",
            "sm_90",
            "gfx9 42",
            "gfx942;rm",
            "GFX942",
            "gfxa42",
        ] {
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
        assert_eq!(
            package_var("offload-examples"),
            "OFFLOAD_AMDGPU_ARCH_OFFLOAD_EXAMPLES"
        );
        let e = archs(Some("gfx942,sm_90"), &[]).unwrap_err();
        assert!(e.contains("`sm_90` is not an AMD GPU architecture"), "{e}");
    }

    /// A stand-in `llvm-objdump` printing `listing`, to check the decode check without LLVM.
    #[cfg(unix)]
    fn fake_objdump(dir: &Path, listing: &str) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let tool = dir.join("llvm-objdump-22");
        fs::write(&tool, format!("#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\n")).unwrap();
        crate::make_executable(&tool);
        tool
    }

    #[cfg(unix)]
    #[test]
    fn an_undecodable_word_is_refused_naming_the_architecture() {
        let dir = std::env::temp_dir().join(format!("offload-objdump-test-{}", std::process::id()));
        let image = Path::new("/nonexistent.hsaco");
        let good = fake_objdump(
            &dir.join("good"),
            "saxpy:\n\ts_load_b64 s[0:1], s[4:5], 0x0",
        );
        assert_eq!(check_decodes(&good, "gfx942", image), Ok(()));
        let bad = fake_objdump(
            &dir.join("bad"),
            "saxpy:\n\ts_endpgm\n\t.long 0xd3b00000 // 000000001000: D3B00000\n\t.long 0x1",
        );
        let e = check_decodes(&bad, "gfx90a", image).unwrap_err();
        assert!(
            e.contains("holds 2 words that are no gfx90a instruction"),
            "{e}"
        );
        assert!(e.contains("`.long 0xd3b00000"), "{e}");
        assert_eq!(
            objdump_beside(&dir.join("good").join("llc-22")),
            Some(dir.join("good").join("llvm-objdump-22"))
        );
        assert_eq!(objdump_beside(&dir.join("llc-22")), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn flags_point_at_the_cached_sysroot() {
        let flags = rustflags("gfx942", Path::new("/c/sys"), Path::new("/p"), false, true);
        let flags: Vec<&str> = flags.split('\x1f').collect();
        assert_eq!(
            flags,
            [
                "-Ctarget-cpu=gfx942",
                "--sysroot=/c/sys",
                "--remap-path-prefix=/p/=",
                "--cfg",
                "offload_panic_reporting_off",
                "--cfg",
                "offload_fast_math"
            ]
        );
    }
}
