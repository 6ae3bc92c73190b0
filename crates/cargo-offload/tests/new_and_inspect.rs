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

use offload_scratch_crates as scratch_crates;
use std::path::Path;
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

/// `cargo ARGS` in `dir`, building the one AMD architecture inspect shows.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    scratch_crates::cargo(env!("CARGO_TARGET_TMPDIR"), dir, args)
        .env("OFFLOAD_AMDGPU_ARCH", "gfx942")
        .output()
        .expect("run cargo")
}

#[test]
fn new_project_runs_and_inspect_shows_its_kernel() {
    let root = scratch_crates::workspace_root();
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

    let binary = scratch_crates::target_dir(env!("CARGO_TARGET_TMPDIR")).join("release/hello");
    let binary = binary.to_str().unwrap();
    let (code, text) = cargo_offload(&parent, &["inspect", binary, "no_such_kernel"]);
    assert_eq!(code, cargo_offload::BAD_INPUT, "{text}");
    assert!(text.contains("its kernels: saxpy"), "{text}");

    let (code, text) = cargo_offload(&parent, &["inspect", binary, "saxpy"]);
    std::fs::remove_dir_all(&parent).unwrap();
    if !scratch_crates::had_device_pass(
        &stderr,
        "the new project",
        "the device-code checks of inspect",
    ) {
        assert_eq!(code, cargo_offload::NOT_READY, "{text}");
        assert!(text.contains("no device images"), "{text}");
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
