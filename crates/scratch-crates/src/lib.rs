//! Support for the tests that build a scratch crate outside this workspace with a nested cargo,
//! as a user would (offload-build's `scratch_crates`, cargo-offload's `new_and_inspect`): this
//! workspace's root, the nested cargo command with the target directory they share, and the
//! skip of their device-pass checks without a device toolchain.

use std::path::{Path, PathBuf};
use std::process::Command;

/// This workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The target directory every scratch crate builds in, `offload-scratch-target` under
/// `target_tmpdir` (the calling test's `CARGO_TARGET_TMPDIR`), so that offload and its
/// dependencies are compiled once for all of them.
pub fn target_dir(target_tmpdir: &str) -> PathBuf {
    Path::new(target_tmpdir).join("offload-scratch-target")
}

/// `cargo ARGS` in `dir` into [`target_dir`], with none of the outer `cargo test`'s description
/// of its own build (its `CARGO_*` variables but the user configuration, `RUSTC`, the wrapper),
/// and without SPIR-V; the caller adds what else it sets and runs it.
pub fn cargo(target_tmpdir: &str, dir: &Path, args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (name, _) in std::env::vars() {
        let keep = ["CARGO_HOME", "CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTR"]
            .iter()
            .any(|k| name.starts_with(k));
        if (name.starts_with("CARGO") && !keep) || name == "RUSTC" || name == "RUSTC_WRAPPER" {
            cmd.env_remove(&name);
        }
    }
    cmd.current_dir(dir)
        .args(args)
        .arg("--target-dir")
        .arg(target_dir(target_tmpdir))
        .env_remove("OFFLOAD_SPIRV");
    cmd
}

/// Whether the build whose output is `stderr` ran the device pass. When it had no device
/// toolchain: false after printing `SKIPPED <checks>: no device toolchain`, or a panic naming
/// `what` under `OFFLOAD_REQUIRE_DEVICE_BUILD=1`.
pub fn had_device_pass(stderr: &str, what: &str, checks: &str) -> bool {
    if !stderr.contains("offload: no device toolchain") {
        return true;
    }
    if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
        panic!("OFFLOAD_REQUIRE_DEVICE_BUILD=1 but {what} had no device pass:\n{stderr}");
    }
    eprintln!("SKIPPED {checks}: no device toolchain");
    false
}
