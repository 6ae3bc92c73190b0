//! Which parts of the build script's environment must not reach the nested device build.
//!
//! Cargo hands a build script the settings of the *outer* compilation (host target, profile,
//! flags, wrapper, package metadata). Passed on, they would make the nested cargo build the
//! device crate for the wrong target, with the wrong rustc, or with host-only flags.

use std::process::Command;

/// Exact names that describe the outer compilation.
const LEAKY_NAMES: &[&str] = &[
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTUP_TOOLCHAIN",
    "RUSTC_LINKER",
    "TARGET",
    "HOST",
    "OUT_DIR",
    "OPT_LEVEL",
    "PROFILE",
    "DEBUG",
    "NUM_JOBS",
];

/// `CARGO_*` variables that are user configuration (where cargo keeps its caches, how it reaches
/// registries), not a description of the outer build, so the nested cargo should see them too.
const KEPT_CARGO_PREFIXES: &[&str] = &[
    "CARGO_NET_",
    "CARGO_HTTP_",
    "CARGO_REGISTRIES_",
    "CARGO_REGISTRY_",
];

/// True when `name` must be removed from the nested cargo's environment.
pub(crate) fn is_leaky(name: &str) -> bool {
    if LEAKY_NAMES.contains(&name) || name.starts_with("DEP_") || name.starts_with("__CARGO") {
        return true;
    }
    if let Some(rest) = name.strip_prefix("CARGO_") {
        // The jobserver handle lets the nested cargo share the outer build's job slots instead
        // of starting as many jobs again on top of them.
        if rest == "HOME" || rest == "MAKEFLAGS" {
            return false;
        }
        return !KEPT_CARGO_PREFIXES.iter().any(|p| name.starts_with(p));
    }
    name == "CARGO"
}

/// Removes every leaky variable of this process's environment from `cmd`.
pub(crate) fn scrub(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if let Some(name) = name.to_str() {
            if is_leaky(name) {
                cmd.env_remove(name);
            }
        }
    }
    // An empty wrapper also overrides a `build.rustc-wrapper` from a cargo config file found
    // above OUT_DIR (sccache, clippy-driver would otherwise wrap the device rustc).
    cmd.env("RUSTC_WRAPPER", "");
    cmd.env("RUSTC_WORKSPACE_WRAPPER", "");
}

#[cfg(test)]
mod tests {
    use super::is_leaky;

    #[test]
    fn outer_build_description_is_removed() {
        for name in [
            "CARGO",
            "CARGO_PKG_NAME",
            "CARGO_MANIFEST_DIR",
            "CARGO_CFG_TARGET_ARCH",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_INCREMENTAL",
            "RUSTC",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTFLAGS",
            "RUSTDOCFLAGS",
            "RUSTUP_TOOLCHAIN",
            "RUSTC_LINKER",
            "TARGET",
            "HOST",
            "OUT_DIR",
            "OPT_LEVEL",
            "PROFILE",
            "DEBUG",
            "NUM_JOBS",
            "DEP_OFFLOAD_ROOT",
            "DEP_Z_INCLUDE",
            "__CARGO_FIX_PLZ",
        ] {
            assert!(is_leaky(name), "{name} should be removed");
        }
    }

    #[test]
    fn user_configuration_is_kept() {
        for name in [
            "CARGO_HOME",
            "CARGO_MAKEFLAGS",
            "CARGO_NET_OFFLINE",
            "CARGO_HTTP_PROXY",
            "CARGO_REGISTRIES_CRATES_IO_PROTOCOL",
            "CARGO_REGISTRY_TOKEN",
            "PATH",
            "HOME",
            "RUSTUP_HOME",
            "OFFLOAD_CUDA_ARCH",
            "CARGOX",
            "RUSTC_BOOTSTRAP",
        ] {
            assert!(!is_leaky(name), "{name} should be kept");
        }
    }
}
