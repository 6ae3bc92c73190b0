//! The device pass on user crates built from scratch outside this workspace, as a user lays them
//! out: a workspace with a kernels binary (`app`) and a sibling no_std crate (`mathlib`) that the
//! kernels call and that build.rs declares with a *relative* path,
//! `.dependency("mathlib", r#"{ path = "../mathlib" }"#)`.
//!
//! - The relative path is the app package's, not the generated device crate's in OUT_DIR (which
//!   failed with "failed to read …/out/mathlib/Cargo.toml").
//! - The host build of a kernels module that imports `offload::prelude::*` but whose kernels use
//!   only `iter_mine` (the README's first example) has no unused-import warning.
//!
//! The scratch crates build in `<target>/tmp/offload-scratch-target`, shared with the other
//! scratch-crate tests, so offload and its dependencies are compiled once for all of them.
//! Without a device toolchain the device-pass check prints `SKIPPED` (the host build and run are
//! still checked), unless `OFFLOAD_REQUIRE_DEVICE_BUILD=1`.

use offload_scratch_crates as scratch_crates;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

fn toml_path(p: &Path) -> String {
    format!("{:?}", p.to_str().expect("UTF-8 path"))
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// `cargo ARGS` in `dir`, building no AMD architecture: this test is about resolving the
/// dependency, which the nvptx build shows; the AMD builds would only add time.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    scratch_crates::cargo(env!("CARGO_TARGET_TMPDIR"), dir, args)
        .env("OFFLOAD_AMDGPU_ARCH", "none")
        .output()
        .expect("run cargo")
}

const KERNELS: &str = r#"// The README's first example, calling a sibling crate.
use offload::prelude::*;

#[offload::kernel]
pub fn scale(a: f32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        *y += mathlib::times(a, x[i]);
    }
}
"#;

const MAIN: &str = r#"mod kernels;
offload::embed_images!();

fn main() -> offload::Result<()> {
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut y = vec![1.0f32; 1000];
    kernels::scale(2.0, &x, &mut y)?;
    assert!(y.iter().enumerate().all(|(i, &v)| v == 1.0 + 2.0 * i as f32));
    println!("scale: ok");
    println!("device images: {}", __OFFLOAD_IMAGES.images.len());
    Ok(())
}
"#;

fn scratch_workspace(name: &str) -> PathBuf {
    let root = scratch_crates::workspace_root();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    write(
        &dir.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"app\", \"mathlib\"]\n",
    );
    // The same versions as this workspace: nothing new to resolve, and the host crates built
    // once in the shared target directory fit every scratch crate.
    fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    write(
        &dir.join("mathlib/Cargo.toml"),
        "[package]\nname = \"mathlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &dir.join("mathlib/src/lib.rs"),
        "#![no_std]\npub fn times(a: f32, x: f32) -> f32 {\n    a * x\n}\n",
    );
    write(
        &dir.join("app/Cargo.toml"),
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\noffload = {{ path = {} }}\nmathlib = {{ path = \"../mathlib\" }}\n\n\
             [build-dependencies]\noffload-build = {{ path = {} }}\n",
            toml_path(&root.join("crates/offload")),
            toml_path(&root.join("crates/offload-build")),
        ),
    );
    write(
        &dir.join("app/build.rs"),
        "fn main() {\n    offload_build::Kernels::new(\"src/kernels.rs\")\n        \
         .dependency(\"mathlib\", r#\"{ path = \"../mathlib\" }\"#)\n        .build();\n}\n",
    );
    write(&dir.join("app/src/kernels.rs"), KERNELS);
    write(&dir.join("app/src/main.rs"), MAIN);
    dir
}

#[test]
fn relative_path_dependency_and_no_unused_prelude_warning() {
    let dir = scratch_workspace("offload-relative-path-dependency");
    let out = cargo(&dir, &["run", "--release", "-p", "app"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the scratch crate failed to build or run:\n{stderr}\n{stdout}"
    );
    assert!(stdout.contains("scale: ok"), "{stdout}");
    assert!(
        !stderr.contains("unused import"),
        "the kernels module's prelude import warns:\n{stderr}"
    );
    assert!(
        !stderr.contains("warning: app@") || stderr.contains("no device toolchain"),
        "the build script warns:\n{stderr}"
    );
    if !scratch_crates::had_device_pass(&stderr, "the scratch crate", "the device pass part") {
        return;
    }
    assert!(
        !stdout.contains("device images: 0"),
        "the device pass built no image:\n{stderr}\n{stdout}"
    );
}
