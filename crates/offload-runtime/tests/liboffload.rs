//! Discovery of the liboffload plugin on machines of every kind: each case runs in a child
//! process of this test binary (discovery happens once per process) with
//! `OFFLOAD_BACKEND=liboffload OFFLOAD_REQUIRE_GPU=1`, and the default device's error must name
//! why liboffload cannot be used: a missing library, a missing entry point, an unknown version.
//! Stand-in libraries are compiled with the C compiler. The real library (Debian's liboffload-22,
//! which scripts/test installs) must load and enumerate; on a machine without a GPU it lists
//! only its placeholder host device, which must never get an allocation or a queue (liboffload
//! 22 crashes on them): the child getting that far without crashing shows it got none.

use offload_runtime::{default_device, devices_of, BackendKind, Platform};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child: which case it runs (its output is the default device's error).
const CASE: &str = "OFFLOAD_TEST_LIBOFFLOAD_CASE";

/// Where Debian's liboffload-22 puts the library the loader finds.
const DEBIAN_LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/libLLVMOffload.so.22.1";

/// The entry points this runtime resolves, as the stand-ins define them.
const ENTRY_POINTS: &[&str] = &[
    "olInit",
    "olIterateDevices",
    "olGetDeviceInfo",
    "olGetDeviceInfoSize",
    "olGetPlatformInfo",
    "olGetPlatformInfoSize",
    "olCreateQueue",
    "olDestroyQueue",
    "olSyncQueue",
    "olCreateEvent",
    "olDestroyEvent",
    "olSyncEvent",
    "olGetEventInfo",
    "olWaitEvents",
    "olLaunchHostFunction",
    "olMemAlloc",
    "olMemFree",
    "olMemcpy",
    "olMemFill",
    "olCreateProgram",
    "olDestroyProgram",
    "olIsValidBinary",
    "olGetSymbol",
    "olGetSymbolInfo",
    "olLaunchKernel",
    "olCalculateOptimalOccupancy",
];

/// The child's side: prints what the default device says, for the parent to check.
#[test]
fn child() {
    if std::env::var_os(CASE).is_none() {
        return;
    }
    match default_device() {
        Ok(device) => println!("\nANSWER DEVICE {}", device.name()),
        Err(e) => println!("\nANSWER ERROR {e}"),
    }
    for gpu in devices_of(BackendKind::LibOffload) {
        assert_ne!(
            gpu.platform(),
            Platform::Host,
            "liboffload's host placeholder is never a device"
        );
    }
}

/// Runs the child with `library` as `OFFLOAD_LIBOFFLOAD` (unset for `None`); its one line.
fn run_child(case: &str, library: Option<&Path>) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .env("OFFLOAD_BACKEND", "liboffload")
        .env("OFFLOAD_REQUIRE_GPU", "1");
    match library {
        Some(path) => command.env("OFFLOAD_LIBOFFLOAD", path),
        None => command.env_remove("OFFLOAD_LIBOFFLOAD"),
    };
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{case}: the child failed ({:?}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("ANSWER "))
        .unwrap_or_else(|| panic!("{case}: no answer in\n{stdout}"))
        .to_string()
}

/// Compiles a stand-in liboffload named `file_name` in its own folder: every entry point
/// (succeeding, listing no device) except `omit`, plus `extra` ones.
fn stand_in(case: &str, file_name: &str, omit: &[&str], extra: &[&str]) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("offload-liboffload-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source: String = ENTRY_POINTS
        .iter()
        .filter(|f| !omit.contains(f))
        .chain(extra)
        .map(|f| format!("const void *{f}(void) {{ return 0; }}\n"))
        .collect();
    let c_file = dir.join("stand_in.c");
    std::fs::write(&c_file, source).unwrap();
    let library = dir.join(file_name);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&c_file)
        .status()
        .expect("a C compiler (cc) builds the stand-in libraries");
    assert!(status.success(), "cc failed for {case}");
    library
}

#[test]
fn a_missing_library_is_a_discovery_reason() {
    let answer = run_child("missing", Some(Path::new("/nonexistent/libLLVMOffload.so")));
    assert!(
        answer.starts_with("ERROR no usable device: OFFLOAD_BACKEND=liboffload, but ")
            && answer.contains("liboffload: /nonexistent/libLLVMOffload.so: ")
            && answer.contains(" (named by OFFLOAD_LIBOFFLOAD)"),
        "{answer}"
    );
}

#[test]
fn a_missing_entry_point_is_a_discovery_reason() {
    let library = stand_in("no-memfill", "libLLVMOffload.so", &["olMemFill"], &[]);
    let answer = run_child("no-memfill", Some(&library));
    assert!(
        answer.contains("no symbol olMemFill: not a liboffload of LLVM 22"),
        "{answer}"
    );
}

#[test]
fn an_unknown_version_is_a_discovery_reason_before_any_call() {
    // The version in the file name.
    let library = stand_in("v23-name", "libLLVMOffload.so.23.1", &[], &[]);
    let answer = run_child("v23-name", Some(&library));
    assert!(
        answer.contains("liboffload of LLVM 23 is not supported (this build speaks LLVM 22's API)"),
        "{answer}"
    );
    // An unversioned file with LLVM 23's context API.
    let library = stand_in("v23-api", "libLLVMOffload.so", &[], &["olCreateContext"]);
    let answer = run_child("v23-api", Some(&library));
    assert!(
        answer.contains("has olCreateContext, so it speaks LLVM 23's API or newer"),
        "{answer}"
    );
}

#[test]
fn a_library_without_devices_is_a_discovery_reason() {
    let library = stand_in("empty", "libLLVMOffload.so", &[], &[]);
    let answer = run_child("empty", Some(&library));
    assert!(
        answer.contains("lists no GPU, only its host placeholder"),
        "{answer}"
    );
}

#[test]
fn the_installed_library_loads_and_enumerates() {
    let answer = run_child("installed", None);
    if answer.starts_with("DEVICE ") {
        assert!(answer.contains("(liboffload "), "{answer}");
        return;
    }
    if Path::new(DEBIAN_LIBRARY).exists() {
        // Loaded, initialised, every device's platform asked: only the placeholder host device.
        assert!(
            answer.contains(
                "libLLVMOffload.so.22.1 (Llvm22) lists no GPU, only its host placeholder"
            ),
            "{answer}"
        );
    } else {
        assert!(
            answer.contains("LLVM's liboffload is not installed"),
            "{answer}"
        );
    }
}
