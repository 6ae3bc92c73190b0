//! The device pass (offload-build, run by this crate's build script) put every kernel into the
//! embedded images, and ptxas accepts the PTX for sm_90.
//!
//! Without a device toolchain these tests print `SKIPPED` and pass, unless
//! `OFFLOAD_REQUIRE_DEVICE_BUILD=1` (set by scripts/test, which installs the toolchain).

use offload::{ImageFormat, ImageSet};
use std::io::Write;
use std::process::Command;

const KERNELS: [&str; 16] = [
    "saxpy",
    "stencil5",
    "add_sub",
    "thread_ids",
    "math_mix",
    "iota_fixed",
    // One entry per declared instance of the generic kernels.
    "axpy__f32",
    "axpy__f64",
    "axpy__f16",
    "axpy__bf16",
    "batched_matmul__f32__2",
    "batched_matmul__f32__3",
    "batched_matmul__f32__4",
    "batched_matmul__f64__2",
    "batched_matmul__f64__3",
    "batched_matmul__f64__4",
];

fn images(test: &str) -> Option<&'static ImageSet> {
    let images = &offload_examples::__OFFLOAD_IMAGES;
    if !images.images.is_empty() {
        return Some(images);
    }
    let reason = images.unavailable.unwrap_or("unknown reason");
    if std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").is_ok_and(|v| v == "1") {
        panic!("{test}: OFFLOAD_REQUIRE_DEVICE_BUILD=1 but no device images were built: {reason}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: no device images ({reason})"
    );
    None
}

fn sm90_ptx(images: &ImageSet) -> &'static str {
    let ptx = images
        .images
        .iter()
        .find(|i| i.format == ImageFormat::Ptx && i.target == "sm_90")
        .expect("a PTX image for sm_90");
    std::str::from_utf8(ptx.bytes).expect("PTX is text")
}

#[test]
fn ptx_holds_every_kernel_entry() {
    let Some(images) = images("ptx_holds_every_kernel_entry") else {
        return;
    };
    let ptx = sm90_ptx(images);
    for kernel in KERNELS {
        assert!(
            images.kernels.contains(&kernel),
            "image set lists {kernel}: {:?}",
            images.kernels
        );
        assert!(
            ptx.contains(&format!(".entry {kernel}(")),
            "PTX has entry {kernel}"
        );
    }
    assert!(ptx.contains(".target sm_90"), "PTX targets sm_90");
}

/// The panic record survives linking under the names the runtime looks up, and the panic
/// handler claims it atomically.
#[test]
fn ptx_exports_the_panic_record() {
    let Some(images) = images("ptx_exports_the_panic_record") else {
        return;
    };
    let ptx = sm90_ptx(images);
    let bytes = std::mem::size_of::<offload::panic_record::PanicRecord>();
    assert!(
        ptx.contains(&format!(
            ".visible .global .align 4 .b8 OFFLOAD_PANIC_RECORD[{bytes}];"
        )),
        "PTX exports the record"
    );
    assert!(
        ptx.contains(".visible .global .align 8 .b8 OFFLOAD_PANIC_FLAG_PTR[8];"),
        "PTX exports the flag pointer"
    );
    assert!(
        ptx.lines().any(|l| l.contains("atom.")
            && l.contains(".cas.b32")
            && l.contains("[OFFLOAD_PANIC_RECORD]")),
        "the panic handler claims the record with a compare-and-swap"
    );
}

#[test]
fn ptxas_accepts_the_ptx_for_sm_90() {
    let Some(images) = images("ptxas_accepts_the_ptx_for_sm_90") else {
        return;
    };
    let cubin = images
        .images
        .iter()
        .find(|i| i.format == ImageFormat::Cubin && i.target == "sm_90");
    let Ok(ptxas) = std::env::var("OFFLOAD_PTXAS") else {
        // Without ptxas here, the build pass's own ptxas run (the cubin) is the evidence.
        assert!(
            cubin.is_some() || std::env::var("OFFLOAD_REQUIRE_DEVICE_BUILD").as_deref() != Ok("1")
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("offload-ptxas-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx_path = dir.join("kernels.ptx");
    std::fs::write(&ptx_path, sm90_ptx(images)).unwrap();
    let out = Command::new(&ptxas)
        .args(["-arch=sm_90", "-O3", "-o"])
        .arg(dir.join("kernels.cubin"))
        .arg(&ptx_path)
        .output()
        .expect("run ptxas");
    assert!(
        out.status.success(),
        "ptxas rejected the PTX: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cubin = cubin.expect("the build pass made a cubin too, as ptxas was available");
    assert_eq!(&cubin.bytes[..4], b"\x7fELF", "a cubin is an ELF file");
    std::fs::remove_dir_all(&dir).unwrap();
}
