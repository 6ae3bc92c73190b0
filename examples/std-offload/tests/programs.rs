//! The programs in src/bin are std::offload programs with their import changed: this checks that
//! nothing else differs from the versions in std_originals/, and that each runs and checks its
//! own results (on the default device: a GPU when there is one, else the host backend).

use std::io::Write;
use std::path::Path;
use std::process::Command;

const PROGRAMS: [(&str, &str); 3] = [
    ("std_offload_fill", env!("CARGO_BIN_EXE_std_offload_fill")),
    ("std_offload_scale", env!("CARGO_BIN_EXE_std_offload_scale")),
    ("std_offload_dot", env!("CARGO_BIN_EXE_std_offload_dot")),
];

#[test]
fn only_the_import_changed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, _) in PROGRAMS {
        let ours =
            std::fs::read_to_string(root.join("src/bin").join(format!("{name}.rs"))).unwrap();
        let std =
            std::fs::read_to_string(root.join("std_originals").join(format!("{name}.rs"))).unwrap();
        let (ours, std): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), std.lines().collect());
        assert_eq!(ours.len(), std.len(), "{name}: same number of lines");
        let changed: Vec<(&str, &str)> = ours
            .iter()
            .zip(&std)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        assert_eq!(
            changed,
            [
                (
                    "// std::offload: #![feature(gpu_offload)]",
                    "#![feature(gpu_offload)]"
                ),
                (
                    "use offload::std_offload::{offload, offload_kernel};",
                    "use core::offload::{offload, offload_kernel};"
                ),
            ],
            "{name}: only the feature gate and the import differ"
        );
    }
}

#[test]
fn programs_run_and_check_their_results() {
    for (name, exe) in PROGRAMS {
        let out = Command::new(exe).output().expect("run the program");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name} failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.starts_with("ok: "), "{name}: {stdout}");
    }
}

/// The images the programs embed: what the device pass built from the three files.
static IMAGES: offload::ImageSet = include!(concat!(env!("OUT_DIR"), "/offload_images.rs"));

/// The device pass compiled the three program files as modules of one device crate: every
/// kernel, and each inferred instance of the generic `fill`, has its entry.
#[test]
fn device_images_hold_every_kernel_and_instance() {
    if IMAGES.images.is_empty() {
        let reason = IMAGES.unavailable.unwrap_or("unknown reason");
        if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
            panic!("OFFLOAD_REQUIRE_DEVICE_BUILD=1 but no device images were built: {reason}");
        }
        // Straight to stderr: libtest captures eprintln!, and a skip must be visible.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED device_images_hold_every_kernel_and_instance: {reason}"
        );
        return;
    }
    let instances = [
        "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f32", "f64", "f16", "bf16",
    ];
    let expected = ["scale", "axpy", "dot"]
        .map(String::from)
        .into_iter()
        .chain(instances.iter().map(|t| format!("fill__{t}")));
    for kernel in expected {
        assert!(
            IMAGES.kernels.contains(&kernel.as_str()),
            "{kernel} in {:?}",
            IMAGES.kernels
        );
    }
}
