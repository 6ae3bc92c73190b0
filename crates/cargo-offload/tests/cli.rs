//! `cargo offload` as a user runs it: the binary, its output and its exit codes, on this machine.
//! (`images` on a program that embeds kernels: examples/tests/cargo_offload_images.rs.)
//!
//! `doctor` must find the device toolchain when `OFFLOAD_REQUIRE_DEVICE_BUILD=1` (scripts/test
//! installs it); otherwise that one check prints `SKIPPED` when the toolchain is missing.

use std::io::Write;
use std::process::Command;

/// Runs `cargo-offload ARGS` as cargo does (`cargo offload ARGS` passes `offload` first) with
/// extra environment; its exit code and stdout.
fn cargo_offload(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .arg("offload")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("cargo-offload runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    let code = out.status.code().expect("an exit code");
    (code, stdout)
}

fn line_with<'a>(text: &'a str, what: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no line with {what:?} in:\n{text}"))
}

#[test]
fn doctor_finds_the_build_pass_toolchain() {
    let expected = offload_build::find_device_toolchain();
    let (code, text) = cargo_offload(&["doctor"], &[]);
    let tc = match expected {
        Ok(tc) => tc,
        Err(e) => {
            if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
                panic!("OFFLOAD_REQUIRE_DEVICE_BUILD=1 but no device toolchain: {e}");
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED doctor_finds_the_build_pass_toolchain: {e}"
            );
            assert_eq!(code, 1, "{text}");
            return;
        }
    };
    assert_eq!(code, 0, "{text}");
    let rustc = line_with(&text, "device rustc");
    assert!(rustc.trim_start().starts_with("ok"), "{rustc}");
    assert!(rustc.contains(&tc.rustc.display().to_string()), "{rustc}");
    assert!(
        rustc.contains(&format!("LLVM {}", tc.llvm_major)),
        "{rustc}"
    );
    let tools = line_with(&text, "LLVM tools");
    assert!(
        tools.contains(&format!(
            "LLVM {} (rustc's is {})",
            tc.tools_llvm_major, tc.llvm_major
        )),
        "{tools}"
    );
    assert!(tools.contains(&tc.llc.display().to_string()), "{tools}");
    assert!(
        text.ends_with("result: device images can be built\n"),
        "{text}"
    );
}

#[test]
fn doctor_names_what_is_missing_and_how_to_install_it() {
    let (code, text) = cargo_offload(
        &["doctor"],
        &[("OFFLOAD_DEVICE_RUSTC", "/nonexistent/rustc")],
    );
    assert_eq!(code, 1, "{text}");
    let rustc = line_with(&text, "device rustc");
    assert!(rustc.trim_start().starts_with("missing"), "{rustc}");
    assert!(
        rustc.contains("OFFLOAD_DEVICE_RUSTC=/nonexistent/rustc: not found"),
        "{rustc}"
    );
    let after = text.split(rustc).nth(1).unwrap();
    assert!(
        after
            .lines()
            .nth(1)
            .unwrap()
            .contains("install: apt-get install rustc-web rust-web-src"),
        "{text}"
    );
    assert!(
        text.contains("result: no device images can be built here"),
        "{text}"
    );

    // A rustc is found, its LLVM tools are not.
    if offload_build::find_device_toolchain().is_ok() {
        let (code, text) = cargo_offload(&["doctor"], &[("OFFLOAD_LLVM_BIN", "/nonexistent")]);
        assert_eq!(code, 1, "{text}");
        assert!(
            line_with(&text, "device rustc")
                .trim_start()
                .starts_with("ok"),
            "{text}"
        );
        let tools = line_with(&text, "LLVM tools");
        assert!(
            tools.contains("missing") && tools.contains("OFFLOAD_LLVM_BIN=/nonexistent"),
            "{tools}"
        );
        assert!(text.contains("install: apt-get install llvm-"), "{text}");
    }

    // ptxas is optional: a wrong path is reported, and images can still be built (as PTX).
    let (_, text) = cargo_offload(&["doctor"], &[("OFFLOAD_PTXAS", "/nonexistent/ptxas")]);
    let ptxas = line_with(&text, "ptxas");
    assert!(
        ptxas.contains("missing")
            && ptxas.contains("OFFLOAD_PTXAS=/nonexistent/ptxas does not exist"),
        "{ptxas}"
    );
}

#[test]
fn devices_lists_every_device_with_its_limits() {
    let (code, text) = cargo_offload(&["devices"], &[]);
    assert_eq!(code, 0, "{text}");
    // The same discovery in this process: each device in order, with its limits.
    for (i, device) in offload::devices().iter().enumerate() {
        let head = format!(
            "{i}: {} ({:?} device {})",
            device.name(),
            device.kind(),
            device.ordinal()
        );
        let block = text
            .split(&head)
            .nth(1)
            .unwrap_or_else(|| panic!("no {head:?} in:\n{text}"));
        let l = device.limits();
        for expected in [
            format!(
                "block: at most {} threads, {} x {} x {}",
                l.max_threads_per_block, l.max_block.x, l.max_block.y, l.max_block.z
            ),
            format!(
                "grid: at most {} x {} x {} blocks",
                l.max_grid.x, l.max_grid.y, l.max_grid.z
            ),
            format!("shared memory: {} bytes per block", l.max_shared_per_block),
        ] {
            assert!(
                block.contains(&expected),
                "{expected:?} not under {head:?}:\n{text}"
            );
        }
    }
    for note in offload::plugins_without_devices() {
        assert!(text.contains(&format!("no device: {note}")), "{text}");
    }

    // Forced to the host: the host alone, and no plugin asked.
    let (code, text) = cargo_offload(&["devices"], &[("OFFLOAD_BACKEND", "host")]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("0: host CPU"), "{text}");
    assert!(!text.contains("1: "), "{text}");
    assert!(!text.contains("no device:"), "{text}");
}

#[test]
fn images_of_files_that_hold_none() {
    let me = env!("CARGO_BIN_EXE_cargo-offload");
    let (code, text) = cargo_offload(&["images", me], &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("no device images (no .offload_images section"),
        "{text}"
    );

    let not_elf =
        std::env::temp_dir().join(format!("cargo-offload-not-elf-{}", std::process::id()));
    std::fs::write(&not_elf, "#!/bin/sh\necho hi\n").unwrap();
    let (code, text) = cargo_offload(&["images", not_elf.to_str().unwrap()], &[]);
    std::fs::remove_file(&not_elf).unwrap();
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is not an ELF program"), "{text}");

    let (code, text) = cargo_offload(&["images", "/nonexistent/program"], &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cannot read /nonexistent/program"), "{text}");
}

#[test]
fn usage_errors_exit_2_with_the_usage() {
    for args in [&[][..], &["images"], &["frobnicate"], &["devices", "extra"]] {
        let (code, text) = cargo_offload(args, &[]);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains("is not a command") && text.contains("usage: cargo offload"),
            "{text}"
        );
    }
    let (code, text) = cargo_offload(&["help"], &[]);
    assert_eq!(code, 0);
    assert!(text.starts_with("usage: cargo offload <command>"), "{text}");
}
