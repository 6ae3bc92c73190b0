//! `cargo offload new` makes a project that builds and runs at once, and `cargo offload inspect`
//! shows its kernel's device code from the built binary.
//!
//! The project is made outside this workspace (in the system's temp dir) with `--path` to this
//! checkout, and built with `cargo run --release` in `<target>/tmp/offload-scratch-target`,
//! shared with offload-build's scratch-crate tests, from a copy of this workspace's Cargo.lock:
//! offload and its dependencies are compiled once for all of them. It builds one AMD
//! architecture (gfx942), so that inspect shows an AMD listing too, and no SPIR-V.
//!
//! Without a device toolchain the project still runs (host backend) and inspect must say the
//! binary embeds no images; the device-code checks print `SKIPPED`, unless
//! `OFFLOAD_REQUIRE_DEVICE_BUILD=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cargo_offload(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .current_dir(dir)
        .arg("offload")
        .args(args)
        .output()
        .expect("cargo-offload runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    (out.status.code().expect("an exit code"), stdout)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("offload-scratch-target")
}

/// `cargo ARGS` in `dir`, with none of the outer `cargo test`'s description of its own build.
fn cargo(dir: &Path, args: &[&str]) -> Output {
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
        .arg(target_dir())
        .env("OFFLOAD_AMDGPU_ARCH", "gfx942")
        .env_remove("OFFLOAD_SPIRV");
    cmd.output().expect("run cargo")
}

#[test]
fn new_project_runs_and_inspect_shows_its_kernel() {
    let root = workspace_root();
    let parent = std::env::temp_dir().join(format!("cargo-offload-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&parent);
    std::fs::create_dir_all(&parent).unwrap();

    let (code, text) = cargo_offload(&parent, &["new", "hello", "--path", root.to_str().unwrap()]);
    assert_eq!(code, cargo_offload::OK, "{text}");
    let project = parent.join("hello");
    for file in ["Cargo.toml", "build.rs", "src/kernels.rs", "src/main.rs"] {
        assert!(project.join(file).is_file(), "no {file}");
    }
    let (code, text) = cargo_offload(&parent, &["new", "hello"]);
    assert_eq!(code, cargo_offload::BAD_INPUT, "{text}");
    assert!(text.contains("already exists"), "{text}");

    // This workspace's versions: no resolution, and the shared target dir's builds fit.
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let started = std::time::Instant::now();
    let run = cargo(&project, &["run", "--release"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!(
        "cargo run --release of the new project: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(run.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("saxpy on "), "{stdout}");
    assert!(stdout.contains("elements): 0 wrong"), "{stdout}");
    assert!(
        !stderr.contains("unused"),
        "the new project warns:\n{stderr}"
    );

    let binary = target_dir().join("release/hello");
    let binary = binary.to_str().unwrap();
    let (code, text) = cargo_offload(&parent, &["inspect", binary, "no_such_kernel"]);
    assert_eq!(code, cargo_offload::BAD_INPUT, "{text}");
    assert!(text.contains("its kernels: saxpy"), "{text}");

    let (code, text) = cargo_offload(&parent, &["inspect", binary, "saxpy"]);
    std::fs::remove_dir_all(&parent).unwrap();
    if stderr.contains("offload: no device toolchain") {
        if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
            panic!(
                "OFFLOAD_REQUIRE_DEVICE_BUILD=1 but the new project had no device pass:\n{stderr}"
            );
        }
        assert_eq!(code, cargo_offload::NOT_READY, "{text}");
        assert!(text.contains("no device images"), "{text}");
        eprintln!("SKIPPED the device-code checks of inspect: no device toolchain");
        return;
    }
    assert_eq!(code, cargo_offload::OK, "{text}");
    assert!(text.starts_with("crate hello: kernel saxpy\n"), "{text}");
    assert!(
        text.contains("== PTX sm_90\n.visible .entry saxpy("),
        "{text}"
    );
    let ptx = text.split("== PTX sm_90\n").nth(1).unwrap();
    let ptx = &ptx[..ptx.find("\n}").expect("the entry's end") + 2];
    assert!(ptx.contains("ret;"), "{ptx}");
    // The cubin's SASS, or the tools named.
    assert!(
        text.contains("== SASS sm_90 (cuobjdump")
            || text.contains("== SASS sm_90 (nvdisasm")
            || text.contains("== SASS sm_90: not shown: neither cuobjdump nor nvdisasm is on PATH")
            || !text.contains("SASS"),
        "{text}"
    );
    if text.contains("== AMD ISA gfx942 (llvm-objdump") {
        assert!(text.contains("s_endpgm"), "{text}");
    } else {
        assert!(
            text.contains("== AMD ISA gfx942: not shown: no llvm-objdump"),
            "{text}"
        );
    }
}
