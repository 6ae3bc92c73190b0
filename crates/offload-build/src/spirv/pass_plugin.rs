//! Builds the `offload-spirv` LLVM pass plugin (`rewrite.cpp`) for the `opt` the device pass
//! uses, once per machine: C++ against that LLVM's headers (`llvm-config --cxxflags`), loaded
//! with `opt -load-pass-plugin`, so it takes LLVM's symbols from `opt` itself.
//!
//! The shared object is cached under `$XDG_CACHE_HOME/offload/spirv-pass/KEY/` (else
//! `~/.cache/...`), KEY a hash of the source, the LLVM version and the compiler, so every project
//! on the machine reuses it; the compile takes about 20 s of CPU.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = include_str!("rewrite.cpp");

/// The C++ compiler and `llvm-config` that go with the LLVM of `opt`.
pub(crate) struct PluginTools {
    pub cxx: PathBuf,
    pub llvm_config: PathBuf,
}

/// `llvm-config` and `clang++` next to `opt` (Debian: /usr/lib/llvm-N/bin, where /usr/bin/opt-N
/// points), or `OFFLOAD_SPIRV_CXX` for the compiler. Errors say what to install.
pub(crate) fn find_tools(opt: &Path) -> Result<PluginTools, String> {
    let real = opt.canonicalize().unwrap_or_else(|_| opt.to_path_buf());
    let dir = real.parent().ok_or("opt has no directory")?;
    let llvm_config = dir.join("llvm-config");
    if !llvm_config.is_file() {
        return Err(format!(
            "no llvm-config next to {} (apt-get install llvm-N-dev)",
            real.display()
        ));
    }
    let cxx = match std::env::var_os("OFFLOAD_SPIRV_CXX") {
        Some(cxx) => PathBuf::from(cxx),
        None => {
            let clang = dir.join("clang++");
            if !clang.is_file() {
                return Err(format!(
                    "no clang++ in {} to build the SPIR-V pass (apt-get install clang-N, or set OFFLOAD_SPIRV_CXX)",
                    dir.display()
                ));
            }
            clang
        }
    };
    Ok(PluginTools { cxx, llvm_config })
}

/// The plugin's path, built now unless the cache has it.
pub(crate) fn build(tools: &PluginTools, fallback_dir: &Path) -> Result<PathBuf, String> {
    let output = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(&tools.llvm_config)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", tools.llvm_config.display()))?;
        if !out.status.success() {
            return Err(format!("{} {args:?} failed", tools.llvm_config.display()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let version = output(&["--version"])?;
    let cxxflags = output(&["--cxxflags"])?;
    let includedir = output(&["--includedir"])?;
    if !Path::new(&includedir)
        .join("llvm/Plugins/PassPlugin.h")
        .is_file()
    {
        return Err(format!(
            "LLVM {version}'s headers are missing from {includedir} (apt-get install llvm-N-dev)"
        ));
    }
    let mut hasher = DefaultHasher::new();
    (SOURCE, &version, &cxxflags, &tools.cxx).hash(&mut hasher);
    let key = format!("{:016x}", hasher.finish());
    let dir = cache_root()
        .unwrap_or_else(|| fallback_dir.to_path_buf())
        .join("spirv-pass")
        .join(key);
    let plugin = dir.join("offload_spirv.so");
    if plugin.is_file() {
        return Ok(plugin);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let source = dir.join("rewrite.cpp");
    std::fs::write(&source, SOURCE)
        .map_err(|e| format!("cannot write {}: {e}", source.display()))?;
    // Built under a temporary name: a concurrent build never loads a half-written plugin.
    let partial = dir.join(format!("offload_spirv.so.{}", std::process::id()));
    let out = Command::new(&tools.cxx)
        .args(cxxflags.split_whitespace())
        .args(["-fno-rtti", "-fPIC", "-shared", "-O2"])
        .arg(&source)
        .arg("-o")
        .arg(&partial)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tools.cxx.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} could not build the SPIR-V pass:\n{}",
            tools.cxx.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::rename(&partial, &plugin)
        .map_err(|e| format!("cannot move the SPIR-V pass to {}: {e}", plugin.display()))?;
    Ok(plugin)
}

/// `$XDG_CACHE_HOME/offload` or `$HOME/.cache/offload`.
fn cache_root() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("offload"))
}
