//! The device pass of `offload`, run from the `main` of a crate's `build.rs`:
//!
//! ```no_run
//! // build.rs (and `offload-build` in [build-dependencies], `offload` in [dependencies])
//! fn main() { offload_build::Kernels::new("src/kernels.rs").build(); }
//! ```
//!
//! It compiles the kernels module for `nvptx64-nvidia-cuda` with a nested `cargo build` (against
//! `core` from the user-wide cache of `core_cache`), links the bitcode into PTX with LLVM's
//! tools, assembles a cubin when `ptxas` is around, builds an HSA code object for each AMD GPU
//! architecture (`amdgpu`) and, when asked, a SPIR-V image (`spirv`), and writes
//! `$OUT_DIR/offload_images.rs`, which `offload::embed_images!()` includes. Without a
//! device toolchain it warns once and writes an image set that sends every launch to the host
//! backend; only a real compile error of the kernels (or an AMD kernel ABI mismatch) fails the
//! build.
//!
//! Environment (each one re-runs the pass when it changes):
//! - `OFFLOAD_CUDA_ARCH`: comma list of architectures when the build script names none
//!   (default `sm_90`).
//! - `OFFLOAD_AMDGPU_ARCH`: comma list of AMD GPU architectures, ahead of the build script's
//!   (default `gfx90a,gfx942,gfx1100`); `none` builds no AMD image. `core` for each is built once
//!   per toolchain into `$XDG_CACHE_HOME/offload/core` (else `~/.cache/offload/core`).
//!   `OFFLOAD_AMDGPU_ARCH_<PACKAGE>` (the package name in upper case, `_` for `-`, such as
//!   `OFFLOAD_AMDGPU_ARCH_OFFLOAD_EXAMPLES`) does the same for one package, ahead of it.
//! - `OFFLOAD_DISABLE_DEVICE=1`: skip the device pass.
//! - `OFFLOAD_DEVICE_RUSTC`: the device rustc (needs rust-src); `OFFLOAD_DEVICE_TOOLCHAIN`: the
//!   rustup toolchain to use instead (default `nightly`, then Debian's `/usr/bin/rustc`).
//! - `OFFLOAD_LLVM_BIN`: directory with `llvm-link`, `opt` and `llc`.
//! - `OFFLOAD_PTXAS`: the `ptxas` to use (`none`: no cubins); `OFFLOAD_REQUIRE_CUBIN=1`: fail
//!   when there is no `ptxas`.
//! - `OFFLOAD_SPIRV=1`: also build a SPIR-V image for OpenCL devices such as Intel GPUs (see
//!   `spirv`); `OFFLOAD_SPIRV_CXX` the C++ compiler for its LLVM pass, `OFFLOAD_SPIRV_VAL` the
//!   `spirv-val` that checks it.
//! - `OFFLOAD_IMAGE_CACHE=0`: do not reuse images from `<target>/offload-image-cache`, where
//!   every build of the target directory (`cargo test`, then `cargo clippy`, say) finds those of
//!   the others (see `image_cache`). `OFFLOAD_IMAGE_CACHE_MB`: its size budget (default 1024);
//!   the least recently used entries go beyond it.
// The crate example is a whole build script, `fn main` included, as the README shows it.
#![allow(clippy::needless_doctest_main)]

mod amdgpu;
mod amdgpu_link;
mod amdgpu_register_cap;
mod child_env;
mod core_cache;
#[cfg(all(test, unix))]
mod fake_tools;
pub mod hsa_code_object;
mod image_cache;
mod image_cache_budget;
pub mod image_record;
mod images;
pub mod install_hints;
pub mod kernel_abi;
mod link_script;
mod msgpack;
mod pass_timing;
mod sh_quote;
mod spirv;
mod toolchain;

pub use amdgpu::DEFAULT_ARCHS as DEFAULT_AMDGPU_ARCHS;
pub use images::{entry_names, render as render_images, ImageFile, ImageKind, PlacedImage};
/// Reading and checking SPIR-V images (the kernel ABI check the device pass runs).
pub mod spirv_image {
    pub use crate::spirv::{check_kernel_abi, kernels, words, Param, SpirvKernel, Storage};
}
pub use toolchain::{find_device_toolchain, find_lld, find_ptxas, DeviceToolchain, ToolchainError};

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use image_record::{ImageRecord, RecordImage};
use toolchain::NVPTX_TARGET;

/// Every variable the pass reads, besides what cargo sets.
const WATCHED_ENV: &[&str] = &[
    "OFFLOAD_CUDA_ARCH",
    "OFFLOAD_AMDGPU_ARCH",
    "OFFLOAD_DISABLE_DEVICE",
    "OFFLOAD_DEVICE_RUSTC",
    "OFFLOAD_DEVICE_TOOLCHAIN",
    "OFFLOAD_LLVM_BIN",
    "OFFLOAD_PTXAS",
    "OFFLOAD_REQUIRE_CUBIN",
    "OFFLOAD_SPIRV",
    "OFFLOAD_SPIRV_CXX",
    "OFFLOAD_SPIRV_VAL",
    "OFFLOAD_IMAGE_CACHE",
];

/// Package name of the generated device crate; its PTX is named after it.
const DEVICE_PACKAGE: &str = "offload-device-kernels";

/// Builder for the device pass of one kernels module.
#[derive(Clone, Debug)]
pub struct Kernels {
    path: PathBuf,
    archs: Vec<String>,
    amdgpu_archs: Vec<String>,
    /// `name = spec` lines for the device crate's `[dependencies]`.
    dependencies: Vec<(String, String)>,
    /// More source files compiled for the device, each as a module of its own.
    modules: Vec<PathBuf>,
    panic_reporting: bool,
    fma_contraction: bool,
    fast_math: bool,
}

/// What [`Kernels::build`] produced.
#[derive(Clone, Debug)]
pub struct Output {
    /// `$OUT_DIR/offload_images.rs`.
    pub images_rs: PathBuf,
    /// The image files, in the order they appear in `offload_images.rs`.
    pub images: Vec<ImageFile>,
    /// Kernel entry points found in the PTX.
    pub kernels: Vec<String>,
    /// Why there are no device images, when there are none.
    pub unavailable: Option<String>,
}

impl Kernels {
    /// The kernels module, relative to the crate's `CARGO_MANIFEST_DIR`.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Kernels {
            path: path.as_ref().to_path_buf(),
            archs: Vec::new(),
            amdgpu_archs: Vec::new(),
            dependencies: Vec::new(),
            modules: Vec::new(),
            panic_reporting: true,
            fma_contraction: false,
            fast_math: false,
        }
    }

    /// Whether a panicking GPU thread is reported to the host as `Err(KernelFailed)` naming the
    /// location and the thread (the default), or just ends, unreported, as in what rustc emits
    /// for nvptx on its own. Off saves the cold panic path's code and the host's check after each
    /// launch; the `panic_overhead` benchmark measures what that is worth.
    pub fn panic_reporting(mut self, on: bool) -> Self {
        self.panic_reporting = on;
        self
    }

    /// Whether the device may fuse float multiplies and adds into FMAs in every kernel of the
    /// module, as nvcc does by default (off by default; `#[offload::kernel(fma)]` opts in one
    /// kernel). An FMA rounds once where Rust rounds twice, so results may differ in the last
    /// bits from the host backend's, which keeps Rust's arithmetic: compare them with a tolerance.
    pub fn fma_contraction(mut self, on: bool) -> Self {
        self.fma_contraction = on;
        self
    }

    /// Whether every kernel of the module is built with fast math, as nvcc's `-use_fast_math`
    /// builds CUDA C (off by default; `#[offload::kernel(fast_math)]` opts in one kernel): on
    /// the GPU, `offload::math`'s `f32` `sin`, `cos`, `exp`, `ln`, `sqrt`, `rsqrt` and `div`
    /// become `offload::math::fast`'s approximations (whose rustdoc gives their error bounds),
    /// `f32` division and square roots become approximate too, subnormal `f32` values flush to
    /// zero and multiplies and adds contract into FMAs. The host backend keeps exact results,
    /// which are within those bounds.
    pub fn fast_math(mut self, on: bool) -> Self {
        self.fast_math = on;
        self
    }

    /// Another file whose kernels go into the same device images, compiled as a module of its
    /// own (without submodules): the `src/bin/*.rs` of a package whose binaries each define
    /// kernels, as programs written for std::offload do. Kernel names must be unique across all
    /// the files.
    pub fn module(mut self, path: impl AsRef<Path>) -> Self {
        self.modules.push(path.as_ref().to_path_buf());
        self
    }

    /// A crate the kernels module uses, compiled into the device image with it. It must build
    /// without `std` (most crates then need `default-features = false`). `spec` is what follows
    /// `name = ` in a Cargo.toml: a version requirement (`"0.2"`, quotes optional) or an inline
    /// table (`{ version = "0.2", default-features = false, features = ["libm"] }`; a relative
    /// `path` is relative to the package whose build script this is, as in its own Cargo.toml).
    /// The device build starts from this crate's `Cargo.lock`, so it resolves the versions the
    /// host build uses.
    ///
    /// ```no_run
    /// // build.rs
    /// offload_build::Kernels::new("src/kernels.rs")
    ///     .dependency("num-traits", r#"{ version = "0.2", default-features = false }"#)
    ///     .build();
    /// ```
    pub fn dependency(mut self, name: &str, spec: &str) -> Self {
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid_name || name == "offload" {
            panic!("offload-build: `{name}` cannot be a dependency of the kernels module");
        }
        let spec = spec.trim();
        let spec = if spec.starts_with('{') {
            if let Err(e) = parse_dependency(spec) {
                panic!(
                    "offload-build: dependency `{name}`: {spec} is not a TOML inline table: {e}"
                );
            }
            spec.to_string()
        } else {
            toml_str(spec.trim_matches('"'))
        };
        self.dependencies.retain(|(n, _)| n != name);
        self.dependencies.push((name.to_string(), spec));
        self
    }

    /// Adds a CUDA architecture (`sm_80`, `sm_90`, `sm_90a`, ...) to build for. Without any,
    /// `OFFLOAD_CUDA_ARCH` (a comma list) decides, else `sm_90`.
    pub fn cuda_arch(mut self, arch: &str) -> Self {
        let arch = checked_arch(arch.trim()).unwrap_or_else(|e| panic!("offload-build: {e}"));
        if !self.archs.contains(&arch) {
            self.archs.push(arch);
        }
        self
    }

    /// Adds an AMD GPU architecture (`gfx90a`, `gfx942`, `gfx1100`, ...) to build an HSA code
    /// object for. Without any, the defaults ([`DEFAULT_AMDGPU_ARCHS`]); `OFFLOAD_AMDGPU_ARCH`,
    /// when set, overrides both (`none`: no AMD image).
    pub fn amdgpu_arch(mut self, arch: &str) -> Self {
        let arch =
            amdgpu::checked_arch(arch.trim()).unwrap_or_else(|e| panic!("offload-build: {e}"));
        if !self.amdgpu_archs.contains(&arch) {
            self.amdgpu_archs.push(arch);
        }
        self
    }

    fn archs(&self) -> Vec<String> {
        if !self.archs.is_empty() {
            return self.archs.clone();
        }
        let list = env::var("OFFLOAD_CUDA_ARCH").unwrap_or_default();
        let mut archs = Vec::new();
        for a in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let a =
                checked_arch(a).unwrap_or_else(|e| panic!("offload-build: OFFLOAD_CUDA_ARCH: {e}"));
            if !archs.contains(&a) {
                archs.push(a);
            }
        }
        if archs.is_empty() {
            archs.push("sm_90".to_string());
        }
        archs
    }

    /// Runs the device pass. Panics only when the kernels fail to compile (or `ptxas` rejects
    /// them), or when the build script is misconfigured; a missing toolchain is a warning.
    pub fn build(&self) -> Output {
        for var in WATCHED_ENV {
            println!("cargo::rerun-if-env-changed={var}");
        }
        let manifest_dir = PathBuf::from(required_env("CARGO_MANIFEST_DIR"));
        let out_dir = PathBuf::from(required_env("OUT_DIR"));
        let kernels_file = manifest_dir.join(&self.path);
        for p in kernel_sources(&kernels_file) {
            println!("cargo::rerun-if-changed={}", p.display());
        }
        if !kernels_file.is_file() {
            panic!(
                "offload-build: kernels module {} not found (the path is relative to {})",
                kernels_file.display(),
                manifest_dir.display()
            );
        }
        for m in self.modules.iter().map(|m| manifest_dir.join(m)) {
            if !m.is_file() {
                panic!("offload-build: module {} not found", m.display());
            }
            println!("cargo::rerun-if-changed={}", m.display());
        }
        let offload_root = PathBuf::from(env::var_os("DEP_OFFLOAD_ROOT").unwrap_or_else(|| {
            panic!(
                "offload-build: DEP_OFFLOAD_ROOT is not set. The crate whose build script runs the \
                 device pass must depend on `offload` directly in its [dependencies]: offload's \
                 `links = \"offload\"` is what hands its source path to this build script."
            )
        }));
        for p in offload_sources(&offload_root) {
            println!("cargo::rerun-if-changed={}", p.display());
        }
        let archs = self.archs();
        let package_var = amdgpu::package_var(&env::var("CARGO_PKG_NAME").unwrap_or_default());
        println!("cargo::rerun-if-env-changed={package_var}");
        let amdgpu_var = [package_var.as_str(), "OFFLOAD_AMDGPU_ARCH"]
            .into_iter()
            .find(|v| env::var_os(v).is_some())
            .unwrap_or("OFFLOAD_AMDGPU_ARCH");
        let amdgpu_archs = amdgpu::archs(env::var(amdgpu_var).ok().as_deref(), &self.amdgpu_archs)
            .unwrap_or_else(|e| panic!("offload-build: {amdgpu_var}: {e}"));

        let toolchain = if flag("OFFLOAD_DISABLE_DEVICE") {
            Err((
                "disabled by OFFLOAD_DISABLE_DEVICE".to_string(),
                String::new(),
            ))
        } else {
            find_device_toolchain()
                .map_err(|e| (e.to_string(), format!(" Install: {}", e.install_hint())))
        };
        // The device crate lives in OUT_DIR: relative paths are the user's package's.
        let mut kernels = self.clone();
        for (name, spec) in &mut kernels.dependencies {
            *spec = absolute_paths(spec, &manifest_dir)
                .unwrap_or_else(|e| panic!("offload-build: dependency `{name}`: {e}"));
        }
        for p in path_dependency_sources(&kernels.dependencies) {
            println!("cargo::rerun-if-changed={}", p.display());
        }
        match toolchain {
            Ok(tc) => device_pass(
                &tc,
                &kernels,
                &kernels_file,
                &offload_root,
                &manifest_dir,
                &out_dir,
                &Archs {
                    cuda: archs,
                    amdgpu: amdgpu_archs,
                },
            ),
            Err((reason, fix)) => {
                println!(
                    "cargo::warning=offload: no device toolchain ({reason}); kernels will run on \
                     the host backend.{fix}"
                );
                write_images(&out_dir, Vec::new(), Vec::new(), Some(reason))
            }
        }
    }
}

fn required_env(name: &str) -> String {
    env::var(name).unwrap_or_else(|_| {
        panic!("offload-build: {name} is not set; Kernels::build() must run inside a build script")
    })
}

/// True for a set variable other than `0`, `false` or empty.
fn flag(name: &str) -> bool {
    env::var(name)
        .map(|v| !matches!(v.trim(), "" | "0" | "false"))
        .unwrap_or(false)
}

/// Whether `OFFLOAD_PTXAS` names a ptxas (rather than being unset or `none`).
fn env_named_ptxas() -> bool {
    env::var("OFFLOAD_PTXAS").is_ok_and(|p| !p.trim().is_empty() && p.trim() != "none")
}

/// `sm_<digits>` with an optional letter suffix (`sm_90a`, `sm_100f`): the value goes into flags
/// and file names, so anything else is refused.
fn checked_arch(arch: &str) -> Result<String, String> {
    let ok = arch.strip_prefix("sm_").is_some_and(|rest| {
        let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
        !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && rest.len() - digits.len() <= 1
    });
    if ok {
        Ok(arch.to_string())
    } else {
        Err(format!("`{arch}` is not a CUDA architecture like sm_90"))
    }
}

/// The kernels file and, for a file with out-of-line submodules, the directory they live in.
/// Only existing paths: cargo re-runs a build script on every build while a watched path is
/// missing.
fn kernel_sources(file: &Path) -> Vec<PathBuf> {
    let mut paths = vec![file.to_path_buf()];
    if let Some(dir) = submodule_dir(file) {
        if dir.is_dir() {
            paths.push(dir);
        }
    }
    paths
}

/// Where `mod foo;` inside `file` looks for `foo.rs`.
fn submodule_dir(file: &Path) -> Option<PathBuf> {
    let parent = file.parent()?;
    if file.file_name()? == "mod.rs" {
        Some(parent.to_path_buf())
    } else {
        Some(parent.join(file.file_stem()?))
    }
}

/// Source of the `offload` crate and, in offload's own workspace, of the crates it re-exports,
/// since a change there changes the device code too. (From a registry they never change.)
fn offload_sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    if let Some(parent) = root.parent() {
        dirs.push(parent.join("offload-kernel"));
        dirs.push(parent.join("offload-macros"));
    }
    let mut paths = Vec::new();
    for dir in dirs {
        for p in [dir.join("Cargo.toml"), dir.join("src")] {
            if p.exists() {
                paths.push(p);
            }
        }
    }
    paths
}

/// Writes `contents` unless the file already holds exactly that, so unchanged inputs keep their
/// modification times and cargo's fingerprints stay fresh.
pub(crate) fn write_if_changed(path: &Path, contents: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == contents) {
        return;
    }
    fs::write(path, contents)
        .unwrap_or_else(|e| panic!("offload-build: cannot write {}: {e}", path.display()));
}

pub(crate) fn utf8(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("offload-build: path {} is not UTF-8", p.display()))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A `[dependencies]` value, parsed as TOML.
fn parse_dependency(spec: &str) -> Result<toml_edit::DocumentMut, toml_edit::TomlError> {
    format!("dependency = {spec}\n").parse()
}

/// `spec` with a relative `path` (in an inline table) made absolute against `base`, so that it
/// means the same from the generated device crate in OUT_DIR as from the user's Cargo.toml.
fn absolute_paths(spec: &str, base: &Path) -> Result<String, String> {
    let mut doc = parse_dependency(spec).map_err(|e| format!("{spec}: {e}"))?;
    let Some(table) = doc["dependency"].as_inline_table_mut() else {
        return Ok(spec.to_string());
    };
    let Some(path) = table.get("path") else {
        return Ok(spec.to_string());
    };
    let path = path
        .as_str()
        .ok_or_else(|| format!("{spec}: `path` is not a string"))?;
    if Path::new(path).is_absolute() {
        return Ok(spec.to_string());
    }
    let absolute = base.join(path);
    table.insert("path", utf8(&absolute).into());
    Ok(table.to_string().trim().to_string())
}

/// What to watch of the `path` dependencies (already absolute): their manifests and sources
/// go into the device image as much as the kernels module does.
fn path_dependency_sources(dependencies: &[(String, String)]) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (_, spec) in dependencies {
        let Ok(doc) = parse_dependency(spec) else {
            continue;
        };
        let Some(dir) = doc["dependency"].get("path").and_then(|p| p.as_str()) else {
            continue;
        };
        for p in [
            Path::new(dir).join("Cargo.toml"),
            Path::new(dir).join("src"),
        ] {
            if p.exists() {
                paths.push(p);
            }
        }
    }
    paths
}

fn device_cargo_toml(offload_root: &Path, dependencies: &[(String, String)]) -> String {
    let extra: String = dependencies
        .iter()
        .map(|(name, spec)| format!("{name} = {spec}\n"))
        .collect();
    format!(
        "# Generated by offload-build: the kernels module compiled for the GPU.\n\
         [package]\n\
         name = \"{DEVICE_PACKAGE}\"\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\
         \n\
         [lib]\n\
         path = \"src/lib.rs\"\n\
         crate-type = [\"cdylib\"]\n\
         \n\
         [dependencies]\n\
         offload = {{ path = {} }}\n\
         {}\
         \n\
         [profile.release]\n\
         opt-level = 3\n\
         lto = \"fat\"\n\
         panic = \"abort\"\n\
         codegen-units = 1\n\
         debug = false\n\
         \n\
         # Keeps this crate out of any workspace above OUT_DIR.\n\
         [workspace]\n",
        toml_str(utf8(offload_root)),
        extra
    )
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// How the device crate's root pulls in the kernels file as module `kernels`.
///
/// rustc treats a file loaded through `#[path]` like a `mod.rs`: its `mod foo;` would be looked
/// up next to it, not in `kernels/foo.rs` as in the host build. So a `kernels.rs` with a
/// `kernels/` directory beside it is declared from an inline module placed at its directory,
/// which gives the ordinary lookup.
fn kernels_module(file: &Path) -> String {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let needs_dir_lookup = file.file_name().is_some_and(|n| n != "mod.rs")
        && is_identifier(stem)
        && submodule_dir(file).is_some_and(|d| d.is_dir());
    match file.parent() {
        Some(parent) if needs_dir_lookup => format!(
            "#[path = {:?}]\nmod __offload_src {{\n    pub mod {stem};\n}}\npub use __offload_src::{stem} as kernels;\n",
            utf8(parent)
        ),
        _ => format!("#[path = {:?}]\npub mod kernels;\n", utf8(file)),
    }
}

/// The device crate's root.
///
/// The panic handler records the panic's location in the image's panic record, which the runtime
/// turns into an `Err` after the launch, and ends only the failing thread (PTX `exit`: a `trap`
/// would leave the CUDA context unusable).
fn device_lib_rs(kernels_file: &Path, modules: &[PathBuf]) -> String {
    let extra: String = modules
        .iter()
        .enumerate()
        .map(|(i, m)| format!("#[path = {:?}]\npub mod __offload_module_{i};\n", utf8(m)))
        .collect();
    format!(
        "// Generated by offload-build.\n\
         #![no_std]\n\
         #![cfg_attr(target_arch = \"nvptx64\", feature(abi_ptx, abi_gpu_kernel, stdarch_nvptx, asm_experimental_arch))]\n\
         #![allow(dead_code, unused_imports, unknown_lints, unused_features, unused_attributes)]\n\
         \n\
         {}\
         {}\
         \n\
         #[panic_handler]\n\
         fn panic(info: &core::panic::PanicInfo) -> ! {{\n\
         \x20   offload::__device::record_panic(info)\n\
         }}\n",
        kernels_module(kernels_file),
        extra
    )
}

/// Lets a generated linker script run.
pub(crate) fn make_executable(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("offload-build: cannot chmod {}: {e}", path.display()));
    }
}

/// The first `Cargo.lock` at or above `dir`: the user's resolution, so the device build uses the
/// same dependency versions and needs no registry access for them.
fn outer_lockfile(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("Cargo.lock"))
        .find(|p| p.is_file())
}

/// The GPU architectures a device pass builds for.
struct Archs {
    cuda: Vec<String>,
    amdgpu: Vec<String>,
}

fn device_pass(
    tc: &DeviceToolchain,
    kernels: &Kernels,
    kernels_file: &Path,
    offload_root: &Path,
    manifest_dir: &Path,
    out_dir: &Path,
    archs: &Archs,
) -> Output {
    let modules: Vec<PathBuf> = kernels
        .modules
        .iter()
        .map(|m| manifest_dir.join(m))
        .collect();
    // Its own directory, with its own target dir, so the nested cargo never waits on the lock
    // the outer build holds.
    let gen = out_dir.join("offload-device");
    let src = gen.join("src");
    fs::create_dir_all(&src)
        .unwrap_or_else(|e| panic!("offload-build: cannot create {}: {e}", src.display()));
    write_if_changed(
        &gen.join("Cargo.toml"),
        device_cargo_toml(offload_root, &kernels.dependencies).as_bytes(),
    );
    write_if_changed(
        &src.join("lib.rs"),
        device_lib_rs(kernels_file, &modules).as_bytes(),
    );
    let lock = gen.join("Cargo.lock");
    if !lock.exists() {
        if let Some(outer) = outer_lockfile(manifest_dir) {
            // Only a head start: cargo prunes and extends it as needed.
            let _ = fs::copy(outer, &lock);
        }
    }
    let linker = gen.join("offload-link");
    write_if_changed(
        &linker,
        link_script::render(&tc.llvm_link, &tc.opt, &tc.llc).as_bytes(),
    );
    make_executable(&linker);

    let ptxas = match find_ptxas() {
        Ok(p) => Some(p),
        Err(why) => {
            if env_named_ptxas() {
                // A wrong path costs the cubin, not the build: the PTX still runs.
                println!("cargo::warning=offload: {why}; no cubin is built");
            }
            None
        }
    };
    if ptxas.is_none() && flag("OFFLOAD_REQUIRE_CUBIN") {
        println!("cargo::warning=offload: OFFLOAD_REQUIRE_CUBIN is set but no ptxas was found");
        panic!(
            "offload-build: OFFLOAD_REQUIRE_CUBIN is set but no ptxas was found (set OFFLOAD_PTXAS, \
             put ptxas on PATH, install CUDA in /usr/local/cuda, or pip install nvidia-cuda-nvcc-cu12)"
        );
    }

    let images_dir = out_dir.join("offload");
    fs::create_dir_all(&images_dir)
        .unwrap_or_else(|e| panic!("offload-build: cannot create {}: {e}", images_dir.display()));
    let cargo = env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
    let cache = image_cache_entry(
        tc,
        kernels,
        &cargo,
        ptxas.as_deref(),
        kernels_file,
        offload_root,
        manifest_dir,
        &modules,
        out_dir,
        archs,
    );
    if let Some((root, key)) = &cache {
        if let Some((images, kernels)) = image_cache::lookup(root, key, &images_dir) {
            println!("offload: image cache hit {} ({})", key.hex, root.display());
            return write_images(out_dir, images, kernels, None);
        }
        println!("offload: image cache miss {} ({})", key.hex, root.display());
    }
    let mut images = Vec::new();
    let (panic_reporting, fma_contraction, fast_math) = (
        kernels.panic_reporting,
        kernels.fma_contraction,
        kernels.fast_math,
    );
    let mut kernels: Vec<String> = Vec::new();
    // `core` from the user-wide cache, per architecture; without one (no cache directory, say),
    // each device build builds it in its own target dir (`-Zbuild-std`).
    let cached_core = |arch: &str| {
        core_cache::sysroot(tc, &cargo, NVPTX_TARGET, arch, nvptx_features(arch))
            .map_err(|reason| {
                println!(
                    "cargo::warning=offload: no cached core for {arch} ({}); building it for this \
                     project",
                    reason.lines().next().unwrap_or_default()
                )
            })
            .ok()
    };
    let build =
        |rustflags: &str, extra_args: &[&str], target_dir: &Path, sysroot: Option<&Path>| {
            // Without a cached `core`, the build compiles its own.
            let build_std = sysroot.is_none().then_some("-Zbuild-std=core");
            let args: Vec<&str> = build_std
                .into_iter()
                .chain(extra_args.iter().copied())
                .collect();
            build_device_crate(tc, &cargo, &gen, kernels_file, rustflags, &args, target_dir)
        };
    for arch in &archs.cuda {
        let _timer = pass_timing::start(arch);
        let sysroot = cached_core(arch);
        let rustflags = device_rustflags(
            arch,
            &linker,
            manifest_dir,
            panic_reporting,
            fma_contraction,
            fast_math,
            sysroot.as_deref(),
        );
        // One target dir per architecture: the flags differ, and sharing one would rebuild the
        // crates each time the architecture alternates.
        let built = build(
            &rustflags,
            &[],
            &gen.join("target").join(arch),
            sysroot.as_deref(),
        );
        let ptx_bytes = fs::read(&built)
            .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", built.display()));
        let ptx = images_dir.join(format!("kernels.{arch}.ptx"));
        write_if_changed(&ptx, &ptx_bytes);
        for name in entry_names(&String::from_utf8_lossy(&ptx_bytes)) {
            if !kernels.contains(&name) {
                kernels.push(name);
            }
        }
        if let Some(ptxas) = &ptxas {
            let cubin = images_dir.join(format!("kernels.{arch}.cubin"));
            assemble(ptxas, arch, &ptx, &cubin);
            images.push(ImageFile {
                kind: ImageKind::Cubin,
                arch: arch.clone(),
                path: cubin,
            });
        }
        images.push(ImageFile {
            kind: ImageKind::Ptx,
            arch: arch.clone(),
            path: ptx,
        });
    }
    if flag("OFFLOAD_SPIRV") {
        let _timer = pass_timing::start("spirv");
        let arch = &archs.cuda[0];
        let sysroot = cached_core(arch);
        let spirv = spirv::SpirvBuild {
            toolchain: tc,
            gen: &gen,
            images_dir: &images_dir,
            cargo_build: &|rustflags, extra_args, target_dir| {
                build(rustflags, extra_args, target_dir, sysroot.as_deref())
            },
            rustflags: &|linker: &Path| {
                device_rustflags(
                    arch,
                    linker,
                    manifest_dir,
                    panic_reporting,
                    fma_contraction,
                    fast_math,
                    sysroot.as_deref(),
                )
            },
        };
        match spirv::build_image(&spirv, &kernels) {
            Ok(image) => images.push(image),
            Err(reason) => {
                println!("cargo::warning=offload: no SPIR-V image: {reason}")
            }
        }
    }
    let (amd_images, amd_kernels) = amdgpu::build(
        &amdgpu::Job {
            tc,
            cargo: &cargo,
            gen: &gen,
            kernels_file,
            manifest_dir,
            images_dir: &images_dir,
            panic_reporting,
            fma_contraction,
            fast_math,
        },
        &archs.amdgpu,
    );
    images.extend(amd_images);
    for name in amd_kernels {
        if !kernels.contains(&name) {
            kernels.push(name);
        }
    }
    // Not an image set a warning above left incomplete (an AMD architecture whose `core` did
    // not build, say): the next build should try again.
    let expected = archs.cuda.len() * (1 + usize::from(ptxas.is_some()))
        + usize::from(flag("OFFLOAD_SPIRV"))
        + archs.amdgpu.len();
    if images.len() != expected {
        println!(
            "offload: image cache: not stored: {} images where {expected} were asked for",
            images.len()
        );
    } else if let Some((root, key)) = &cache {
        let inputs = image_cache::dep_info_inputs(
            &gen.join("target"),
            &gen,
            &tc.sysroot.join("lib/rustlib"),
        );
        if let Err(e) = image_cache::store(root, key, &images, &kernels, &inputs) {
            println!("offload: image cache: not stored: {e}");
        }
        match image_cache_budget::budget(env::var("OFFLOAD_IMAGE_CACHE_MB").ok().as_deref()) {
            Ok(budget) => {
                let removed = image_cache_budget::prune(root, budget, &key.hex);
                if !removed.is_empty() {
                    println!(
                        "offload: image cache: removed {} least recently used entries to stay \
                         within {} MiB (OFFLOAD_IMAGE_CACHE_MB)",
                        removed.len(),
                        budget >> 20
                    );
                }
            }
            Err(e) => println!("cargo:warning=offload: {e}; the image cache is not pruned"),
        }
    }
    write_images(out_dir, images, kernels, None)
}

/// Where the image cache is and the key of this pass, unless `OFFLOAD_IMAGE_CACHE=0` turns it
/// off or a source cannot be read (then the pass just runs).
#[allow(clippy::too_many_arguments)]
fn image_cache_entry(
    tc: &DeviceToolchain,
    kernels: &Kernels,
    cargo: &Path,
    ptxas: Option<&Path>,
    kernels_file: &Path,
    offload_root: &Path,
    manifest_dir: &Path,
    modules: &[PathBuf],
    out_dir: &Path,
    archs: &Archs,
) -> Option<(PathBuf, image_cache::Key)> {
    if !image_cache::enabled(env::var("OFFLOAD_IMAGE_CACHE").ok().as_deref()) {
        println!("offload: image cache off (OFFLOAD_IMAGE_CACHE)");
        return None;
    }
    let Some(root) = image_cache::root(out_dir) else {
        println!("offload: image cache off: OUT_DIR is in no cargo target directory");
        return None;
    };
    let mut sources = kernel_sources(kernels_file);
    sources.extend(modules.iter().cloned());
    sources.extend(offload_sources(offload_root));
    sources.extend(outer_lockfile(manifest_dir));
    sources.extend(path_dependency_sources(&kernels.dependencies));
    let inputs = image_cache::PassInputs {
        tc,
        cargo,
        ptxas,
        settings: format!(
            "{kernels:?} file={} offload={} manifest={} cuda={:?} amdgpu={:?}",
            kernels_file.display(),
            offload_root.display(),
            manifest_dir.display(),
            archs.cuda,
            archs.amdgpu
        ),
        watched_env: WATCHED_ENV,
        sources,
    };
    match image_cache::pass_key(&inputs) {
        Ok(key) => Some((root, key)),
        Err(e) => {
            println!("offload: image cache off: {e}");
            None
        }
    }
}

/// The target features an NVIDIA image of `arch` is built with beyond its CPU's (`core` in the
/// cache too): PTX 8.3 for sm_90a (sm_90a alone is 8.0), since offload-kernel's bulk tensor
/// copies fence the tensor maps they read from device memory, an instruction of PTX 8.3.
fn nvptx_features(arch: &str) -> &'static str {
    if arch == "sm_90a" {
        "+ptx83"
    } else {
        ""
    }
}

/// The device build's flags (`CARGO_ENCODED_RUSTFLAGS`, separated by 0x1f) for one architecture.
fn device_rustflags(
    arch: &str,
    linker: &Path,
    manifest_dir: &Path,
    panic_reporting: bool,
    fma_contraction: bool,
    fast_math: bool,
    sysroot: Option<&Path>,
) -> String {
    // Panic locations name files relative to the package (`src/kernels.rs`), not by the build
    // machine's absolute paths: shorter in the image and in kernel panic errors.
    let mut flags = format!(
        "{}\x1f-Clinker={}\x1f--remap-path-prefix={}/=",
        core_cache::codegen_flags(arch, nvptx_features(arch)),
        utf8(linker),
        utf8(manifest_dir)
    );
    if let Some(sysroot) = sysroot {
        flags.push_str(&format!("\x1f--sysroot={}", utf8(sysroot)));
    }
    if !panic_reporting {
        // offload-kernel's panic handler then just ends the thread, with no record to check.
        flags.push_str("\x1f--cfg\x1foffload_panic_reporting_off");
    }
    if fma_contraction {
        // Read by the link script, which runs llc (a flag change also makes cargo relink).
        flags.push_str("\x1f-Clink-arg=--fma-contraction");
    }
    if fast_math {
        // offload-kernel's `math` picks the approximations; the link script flushes to zero and
        // approximates division and square roots in every function.
        flags.push_str("\x1f--cfg\x1foffload_fast_math\x1f-Clink-arg=--fast-math");
    }
    flags
}

/// Runs the nested `cargo build` with these flags, extra arguments and target dir; returns the
/// image it linked.
fn build_device_crate(
    tc: &DeviceToolchain,
    cargo: &Path,
    gen: &Path,
    kernels_file: &Path,
    rustflags: &str,
    extra_args: &[&str],
    target_dir: &Path,
) -> PathBuf {
    let mut cmd = Command::new(cargo);
    child_env::scrub(&mut cmd);
    cmd.current_dir(gen)
        .args(["build", "--release", "--quiet", "--target", NVPTX_TARGET])
        .arg("--manifest-path")
        .arg(gen.join("Cargo.toml"))
        .args(extra_args)
        .arg("--target-dir")
        .arg(target_dir)
        .env("RUSTC", &tc.rustc)
        // -Zbuild-std and the nvptx features on whatever channel the device rustc is.
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("offload-build: cannot run {}: {e}", cargo.display()));
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            println!("cargo::warning={line}");
        }
        panic!(
            "offload-build: the kernels module {} failed to build (device crate {}, target dir {}, rustc {}, {}):\n{}",
            kernels_file.display(),
            gen.display(),
            target_dir.display(),
            tc.rustc.display(),
            out.status,
            tail(&text, 60)
        );
    }
    let ptx = target_dir
        .join(NVPTX_TARGET)
        .join("release")
        .join(format!("{}.ptx", DEVICE_PACKAGE.replace('-', "_")));
    if !ptx.is_file() {
        panic!(
            "offload-build: the device build succeeded but {} is missing",
            ptx.display()
        );
    }
    ptx
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `ptxas` for one architecture. A rejection is a build failure: shipping PTX that the driver
/// would reject at run time is worse.
fn assemble(ptxas: &Path, arch: &str, ptx: &Path, cubin: &Path) {
    let tmp = cubin.with_extension("cubin.tmp");
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-O3")
        .arg(ptx)
        .arg("-o")
        .arg(&tmp)
        .output()
        .unwrap_or_else(|e| panic!("offload-build: cannot run {}: {e}", ptxas.display()));
    if !out.status.success() {
        panic!(
            "offload-build: {} rejected {} ({}):\n{}{}",
            ptxas.display(),
            ptx.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let bytes = fs::read(&tmp)
        .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", tmp.display()));
    write_if_changed(cubin, &bytes);
    let _ = fs::remove_file(&tmp);
}

/// Writes the crate's image record (`$OUT_DIR/offload/images.bin`, cubins first) and the
/// `offload_images.rs` that embeds it.
fn write_images(
    out_dir: &Path,
    images: Vec<ImageFile>,
    kernels: Vec<String>,
    unavailable: Option<String>,
) -> Output {
    // Ready machine code first, then what a driver compiles: cubins, HSA code objects, PTX, SPIR-V.
    let mut images = images;
    images.sort_by_key(|i| i.kind.order());
    let contents: Vec<Vec<u8>> = images
        .iter()
        .map(|i| {
            fs::read(&i.path)
                .unwrap_or_else(|e| panic!("offload-build: cannot read {}: {e}", i.path.display()))
        })
        .collect();
    let crate_name = env::var("CARGO_PKG_NAME").unwrap_or_default();
    let record = ImageRecord {
        crate_name: &crate_name,
        kernels: kernels.iter().map(String::as_str).collect(),
        images: images
            .iter()
            .zip(&contents)
            .map(|(i, bytes)| RecordImage {
                format: i.kind.name(),
                target: &i.arch,
                bytes,
            })
            .collect(),
        unavailable: unavailable.as_deref(),
    };
    let (record, ranges) = record.encode();
    let record_dir = out_dir.join("offload");
    fs::create_dir_all(&record_dir)
        .unwrap_or_else(|e| panic!("offload-build: cannot create {}: {e}", record_dir.display()));
    let record_path = record_dir.join("images.bin");
    write_if_changed(&record_path, &record);
    let placed: Vec<PlacedImage> = images
        .iter()
        .zip(ranges)
        .map(|(i, range)| PlacedImage {
            kind: i.kind,
            arch: i.arch.clone(),
            range,
        })
        .collect();
    let text = render_images(
        &record_path,
        record.len(),
        &placed,
        &kernels,
        unavailable.as_deref(),
    );
    let images_rs = out_dir.join("offload_images.rs");
    write_if_changed(&images_rs, text.as_bytes());
    Output {
        images_rs,
        images,
        kernels,
        unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        for ok in ["sm_90", "sm_80", "sm_90a", "sm_100f", "sm_120"] {
            assert_eq!(checked_arch(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "",
            "sm_",
            "90",
            "sm_90ab",
            "compute_90",
            "sm_9 0",
            "sm_90;rm",
            "SM_90",
        ] {
            assert!(checked_arch(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dependency_specs() {
        let k = Kernels::new("src/kernels.rs")
            .dependency("libm", "0.2")
            .dependency(
                "num-traits",
                r#"{ version = "0.2", default-features = false }"#,
            )
            .dependency("libm", "\"0.2.8\"");
        assert_eq!(
            k.dependencies,
            [
                (
                    "num-traits".to_string(),
                    r#"{ version = "0.2", default-features = false }"#.to_string()
                ),
                ("libm".to_string(), "\"0.2.8\"".to_string()),
            ]
        );
    }

    #[test]
    fn relative_paths_are_the_packages() {
        let base = Path::new("/work/app");
        let spec =
            absolute_paths(r#"{ path = "../mathlib", default-features = false }"#, base).unwrap();
        let doc = parse_dependency(&spec).unwrap();
        assert_eq!(
            doc["dependency"]["path"].as_str(),
            Some("/work/app/../mathlib"),
            "{spec}"
        );
        assert_eq!(doc["dependency"]["default-features"].as_bool(), Some(false));
        // Absolute paths, version strings and tables without a path stay as written.
        for kept in [
            r#"{ path = "/abs/mathlib" }"#,
            r#""0.2""#,
            r#"{ version = "0.2", default-features = false }"#,
        ] {
            assert_eq!(absolute_paths(kept, base).unwrap(), kept);
        }
        assert!(absolute_paths("{ path = 3 }", base).is_err());
    }

    #[test]
    #[should_panic(expected = "is not a TOML inline table")]
    fn dependency_spec_is_checked() {
        let _ = Kernels::new("src/kernels.rs").dependency("m", "{ path = ");
    }

    #[test]
    #[should_panic(expected = "cannot be a dependency")]
    fn dependency_name_is_checked() {
        let _ = Kernels::new("src/kernels.rs").dependency("a b", "1");
    }

    #[test]
    fn builder_deduplicates() {
        let k = Kernels::new("src/kernels.rs")
            .cuda_arch("sm_80")
            .cuda_arch(" sm_90 ")
            .cuda_arch("sm_80");
        assert_eq!(k.archs(), ["sm_80", "sm_90"]);
    }

    #[test]
    fn cargo_toml_escapes_path() {
        let t = device_cargo_toml(
            Path::new(r#"/a "b"\c"#),
            &[("num-traits".into(), "\"0.2\"".into())],
        );
        assert!(t.contains("\nnum-traits = \"0.2\"\n"), "{t}");
        assert!(t.contains(r#"offload = { path = "/a \"b\"\\c" }"#), "{t}");
        assert!(t.contains("crate-type = [\"cdylib\"]"));
        assert!(t.contains("\n[workspace]\n"));
        assert!(t.contains("lto = \"fat\""));
    }

    #[test]
    fn module_declaration() {
        let dir = env::temp_dir().join(format!("offload-build-mod-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("nested")).unwrap();
        let flat = dir.join("kernels.rs");
        let nested = dir.join("nested.rs");
        let modrs = dir.join("nested/mod.rs");
        assert_eq!(
            kernels_module(&flat),
            format!("#[path = {:?}]\npub mod kernels;\n", flat.to_str().unwrap())
        );
        assert_eq!(
            kernels_module(&modrs),
            format!(
                "#[path = {:?}]\npub mod kernels;\n",
                modrs.to_str().unwrap()
            )
        );
        assert_eq!(
            kernels_module(&nested),
            format!(
                "#[path = {:?}]\nmod __offload_src {{\n    pub mod nested;\n}}\npub use __offload_src::nested as kernels;\n",
                dir.to_str().unwrap()
            )
        );
        assert_eq!(
            kernel_sources(&nested),
            [nested.clone(), dir.join("nested")]
        );
        assert_eq!(kernel_sources(&flat), std::slice::from_ref(&flat));
        assert_eq!(kernel_sources(&modrs), [modrs.clone(), dir.join("nested")]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lib_rs_shape() {
        let lib = device_lib_rs(Path::new("/k/kernels.rs"), &[PathBuf::from("/k/bin/a.rs")]);
        assert!(lib.contains("#[path = \"/k/bin/a.rs\"]\npub mod __offload_module_0;\n"));
        assert!(lib.starts_with("// Generated by offload-build.\n#![no_std]\n"));
        assert!(lib.contains("#[path = \"/k/kernels.rs\"]\npub mod kernels;\n"));
        assert!(lib.contains("#[panic_handler]"));
        assert!(lib.contains("offload::__device::record_panic(info)"));
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }

    /// The device flags for `arch` with the linker `/g/link`, the package at `/p` and no sysroot.
    fn flags(arch: &str, panic_reporting: bool, fma: bool, fast: bool) -> String {
        let (linker, package) = (Path::new("/g/link"), Path::new("/p"));
        device_rustflags(arch, linker, package, panic_reporting, fma, fast, None)
    }

    #[test]
    fn panic_reporting_off_is_a_cfg_of_the_device_build() {
        let on: Vec<String> = flags("sm_90", true, false, false)
            .split('\x1f')
            .map(String::from)
            .collect();
        assert_eq!(
            on,
            [
                "-Ctarget-cpu=sm_90",
                "-Clinker=/g/link",
                "--remap-path-prefix=/p/="
            ]
        );
        let off = flags("sm_90", false, false, false);
        assert!(
            off.ends_with("\x1f--cfg\x1foffload_panic_reporting_off"),
            "{off:?}"
        );
        let cached = device_rustflags(
            "sm_90",
            Path::new("/g/link"),
            Path::new("/p"),
            true,
            false,
            false,
            Some(Path::new("/c/sys")),
        );
        assert!(cached.ends_with("\x1f--sysroot=/c/sys"), "{cached:?}");
    }

    #[test]
    fn sm_90a_images_are_ptx_8_3() {
        let ptx83 = |arch| flags(arch, true, false, false).contains("ptx83");
        assert!(flags("sm_90a", true, false, false)
            .split('\x1f')
            .any(|f| f == "-Ctarget-feature=+ptx83"));
        assert!(!ptx83("sm_90"));
        assert!(!ptx83("sm_80"));
    }

    #[test]
    fn fma_contraction_is_a_link_argument() {
        assert!(!flags("sm_90", true, false, false).contains("fma"));
        assert!(flags("sm_90", true, true, false).ends_with("\x1f-Clink-arg=--fma-contraction"));
    }

    #[test]
    fn fast_math_is_a_cfg_and_a_link_argument() {
        assert!(!flags("sm_90", true, false, false).contains("fast"));
        assert!(flags("sm_90", true, false, true)
            .ends_with("\x1f--cfg\x1foffload_fast_math\x1f-Clink-arg=--fast-math"));
    }
}
