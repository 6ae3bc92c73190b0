//! The programs in src/bin are std::offload programs with their import changed: this checks that
//! nothing else differs from the versions in std_originals/, and that each runs and checks its
//! own results (on the default device: a GPU when there is one, else the host backend).

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
