//! `cargo offload images` on a program that embeds kernels: this test executable, which links
//! offload-examples and so carries its image record. What it prints must be what the runtime
//! itself sees in `__OFFLOAD_IMAGES`: every image's format, target and size, and every kernel.

use object::{Object, ObjectSection};
use offload::ImageFormat;

fn images_of(program: &std::path::Path) -> (i32, String) {
    let mut out = Vec::new();
    let args = [
        "offload".to_string(),
        "images".to_string(),
        program.display().to_string(),
    ];
    let code = cargo_offload::run(&args, &mut out);
    (code, String::from_utf8(out).expect("UTF-8 output"))
}

#[test]
fn lists_the_images_and_kernels_the_runtime_embeds() {
    let embedded = &offload_examples::__OFFLOAD_IMAGES;
    let (code, text) = images_of(&std::env::current_exe().unwrap());
    let header = text
        .lines()
        .find(|l| l.starts_with("crate offload-examples:"))
        .unwrap_or_else(|| panic!("no offload-examples record in:\n{text}"));
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let (n, k) = (embedded.images.len(), embedded.kernels.len());
    assert_eq!(
        header,
        format!(
            "crate offload-examples: {n} image{}, {k} kernel{}",
            plural(n),
            plural(k)
        )
    );
    let block = text.split(header).nth(1).unwrap();
    for image in embedded.images {
        let format = match image.format {
            ImageFormat::Cubin => "cubin",
            ImageFormat::Ptx => "ptx",
            ImageFormat::Spirv => "spirv",
            ImageFormat::HsaCodeObject => "hsaco",
        };
        let line = format!(
            "  image {format:<6} {:<8} {:>10} bytes",
            image.target,
            image.bytes.len()
        );
        assert!(block.contains(&line), "{line:?} not in:\n{text}");
    }
    for kernel in embedded.kernels {
        assert!(
            block.contains(&format!("  kernel {kernel}\n")),
            "{kernel} not in:\n{text}"
        );
    }
    match embedded.unavailable {
        None => assert_eq!(code, cargo_offload::OK, "{text}"),
        Some(why) => {
            // Built without a device toolchain: the record says why, and the exit code says none.
            assert_eq!(code, cargo_offload::NOT_READY, "{text}");
            assert!(
                block.contains(&format!("  no device images: {why}")),
                "{text}"
            );
        }
    }
}

#[test]
fn a_damaged_record_is_an_error() {
    let exe = std::env::current_exe().unwrap();
    let mut bytes = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let section = file
        .section_by_name(".offload_images")
        .expect("the images section");
    let (start, _) = section.file_range().expect("the section is in the file");
    // The first record's version, after its 8-byte magic.
    let version_at = start as usize + 8;
    bytes[version_at] = 9;
    let damaged = std::env::temp_dir().join(format!("offload-damaged-{}", std::process::id()));
    std::fs::write(&damaged, &bytes).unwrap();
    let (code, text) = images_of(&damaged);
    std::fs::remove_file(&damaged).unwrap();
    assert_eq!(code, cargo_offload::BAD_INPUT, "{text}");
    assert!(
        text.contains("damaged .offload_images section: record at byte 0: record version 9"),
        "{text}"
    );
}

/// `cargo offload inspect` on this executable: saxpy's PTX entry, exactly as in the embedded PTX
/// of each architecture (and, built without a device toolchain, the reason there is none).
#[test]
fn inspect_shows_a_kernels_ptx_entry() {
    let embedded = &offload_examples::__OFFLOAD_IMAGES;
    let args = [
        "offload".to_string(),
        "inspect".to_string(),
        std::env::current_exe().unwrap().display().to_string(),
        "saxpy".to_string(),
    ];
    let mut out = Vec::new();
    let code = cargo_offload::run(&args, &mut out);
    let text = String::from_utf8(out).expect("UTF-8 output");
    if let Some(why) = embedded.unavailable {
        assert_eq!(code, cargo_offload::NOT_READY, "{text}");
        assert!(text.contains(&format!("no device images: {why}")), "{text}");
        return;
    }
    assert_eq!(code, cargo_offload::OK, "{text}");
    assert!(
        text.starts_with("crate offload-examples: kernel saxpy\n"),
        "{text}"
    );
    let ptx_images = embedded
        .images
        .iter()
        .filter(|i| i.format == ImageFormat::Ptx);
    let mut any = false;
    for image in ptx_images {
        any = true;
        let ptx = std::str::from_utf8(image.bytes).expect("PTX is text");
        let start = ptx.find(".visible .entry saxpy(").expect("saxpy's entry");
        let end = start + ptx[start..].find("\n}").expect("the entry's end") + 2;
        let shown = format!("== PTX {}\n{}\n", image.target, &ptx[start..end]);
        assert!(text.contains(&shown), "{shown:?} not in:\n{text}");
    }
    assert!(any, "no PTX image: {text}");
}
