//! `core` for a device target, built once per target, GPU model and toolchain for every project
//! of the user, and kept as a sysroot in the user's cache directory
//! (`$XDG_CACHE_HOME/offload/core/`, else `~/.cache/offload/core/`).
//!
//! rustc bakes the target CPU into every function, so each GPU model needs a `core` of its own;
//! building one takes minutes on a small machine. The device build then compiles against the
//! cached sysroot (`--sysroot`) instead of rebuilding `core` with `-Zbuild-std` in each project's
//! target directory. A first build runs `cargo -Zbuild-std=core` on an empty crate in the cache,
//! so concurrent builds of one sysroot wait for each other on cargo's lock of that directory.

use crate::child_env;
use crate::toolchain::DeviceToolchain;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Bumped when the way the sysroot is built changes, so old caches are not reused.
const LAYOUT_VERSION: u32 = 1;

/// The profile the device crate is built with (offload-build's `device_cargo_toml`), which the
/// rlibs of `core` must match to take part in its fat LTO.
const PROFILE: &str = "[profile.release]\nopt-level = 3\nlto = \"fat\"\npanic = \"abort\"\ncodegen-units = 1\ndebug = false\n";

/// The user's cache directory for offload.
pub fn cache_root() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("offload"))
}

/// FNV-1a: a hash that stays the same across Rust releases (the key names a directory).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in part.as_bytes().iter().chain([0xffu8].iter()) {
            hash ^= b as u64;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The cache directory of one (toolchain, target, cpu, target features):
/// `core/<target>-<cpu>-<hash>`.
fn entry_dir(
    root: &Path,
    tc: &DeviceToolchain,
    target: &str,
    cpu: &str,
    features: &str,
) -> PathBuf {
    let key = fnv1a(&[
        &LAYOUT_VERSION.to_string(),
        &tc.version,
        &tc.rustc.to_string_lossy(),
        target,
        cpu,
        features,
        PROFILE,
    ]);
    root.join("core").join(format!("{target}-{cpu}-{key:016x}"))
}

/// A sysroot holding `core` and `compiler_builtins` for `target`, `cpu` and the extra target
/// `features` (`-Ctarget-feature`, empty for none) of the device build that links it, built when
/// missing. Its path, or why there is none. The features must be the device build's: LLVM does
/// not inline a function into one whose features lack some of its own, so a `core` without the
/// crate's features keeps its panic paths out of line, with their formatting arguments on the
/// stack of every kernel that can panic (sm_90a's PTX 8.3: up to four times the spills).
pub fn sysroot(
    tc: &DeviceToolchain,
    cargo: &Path,
    target: &str,
    cpu: &str,
    features: &str,
) -> Result<PathBuf, String> {
    let root = cache_root().ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
    let dir = entry_dir(&root, tc, target, cpu, features);
    let sysroot = dir.join("sysroot");
    let libs = sysroot.join("lib/rustlib").join(target).join("lib");
    let complete = sysroot.join("complete");
    if complete.is_file() {
        return Ok(sysroot);
    }
    let builder = dir.join("builder");
    fs::create_dir_all(builder.join("src"))
        .map_err(|e| format!("cannot create {}: {e}", builder.display()))?;
    let manifest = format!(
        "# Written by offload-build: builds core for {target} ({cpu}) into the sysroot beside it.\n\
         [package]\nname = \"offload-core\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
         [lib]\npath = \"src/lib.rs\"\ncrate-type = [\"staticlib\"]\n\n{PROFILE}\n[workspace]\n"
    );
    write(&builder.join("Cargo.toml"), &manifest)?;
    write(
        &builder.join("src/lib.rs"),
        "#![no_std]\n#[panic_handler]\nfn panic(_: &core::panic::PanicInfo) -> ! {\n    loop {}\n}\n",
    )?;
    let target_dir = dir.join("target");
    let mut cmd = Command::new(cargo);
    child_env::scrub(&mut cmd);
    let out = cmd
        .current_dir(&builder)
        .args(["build", "--release", "--quiet", "--target", target])
        .arg("-Zbuild-std=core")
        .arg("--manifest-path")
        .arg(builder.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTC", &tc.rustc)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", codegen_flags(cpu, features))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cargo.display()))?;
    if !out.status.success() {
        return Err(format!(
            "building core for {target} ({cpu}) failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // Another build may have finished the same sysroot meanwhile: the rlibs are the same.
    if complete.is_file() {
        return Ok(sysroot);
    }
    let deps = target_dir.join(target).join("release/deps");
    let staging = dir.join(format!("sysroot.{}", std::process::id()));
    let staged_libs = staging.join("lib/rustlib").join(target).join("lib");
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staged_libs)
        .map_err(|e| format!("cannot create {}: {e}", staged_libs.display()))?;
    let entries =
        fs::read_dir(&deps).map_err(|e| format!("cannot read {}: {e}", deps.display()))?;
    let mut copied = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".rlib") && !name.starts_with("liboffload_core") {
            fs::copy(entry.path(), staged_libs.join(&*name))
                .map_err(|e| format!("cannot copy {name}: {e}"))?;
            copied += 1;
        }
    }
    if copied == 0 {
        return Err(format!(
            "building core for {target} ({cpu}) left no rlib in {}",
            deps.display()
        ));
    }
    write(&staging.join("complete"), "")?;
    // Whoever renames first wins; the loser's copy is the same and goes away.
    if fs::rename(&staging, &sysroot).is_err() {
        let _ = fs::remove_dir_all(&staging);
        if !complete.is_file() {
            return Err(format!("cannot place the sysroot at {}", sysroot.display()));
        }
    }
    debug_assert!(libs.is_dir());
    Ok(sysroot)
}

/// The flags (separated by 0x1f) that choose a device build's code: its target CPU and extra
/// target `features` (empty for none). `core` and the device crate that links it take the same.
pub fn codegen_flags(cpu: &str, features: &str) -> String {
    let mut flags = format!("-Ctarget-cpu={cpu}");
    if !features.is_empty() {
        flags.push_str(&format!("\x1f-Ctarget-feature={features}"));
    }
    flags
}

fn write(path: &Path, contents: &str) -> Result<(), String> {
    if fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_separates_parts() {
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&["a"]), fnv1a(&["a"]));
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        assert_ne!(fnv1a(&["gfx942"]), fnv1a(&["gfx90a"]));
    }
}
