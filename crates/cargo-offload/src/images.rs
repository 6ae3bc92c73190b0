//! `cargo offload images BINARY`: the image records (`offload_build::image_record`) in a built
//! program's `.offload_images` section, one block per crate.

use crate::{BAD_INPUT, NOT_READY, OK};
use object::{Object, ObjectSection};
use offload_build::image_record::{decode_section, ImageRecord, SECTION};
use std::io::{self, Write};
use std::path::Path;

pub fn run(binary: &Path, out: &mut dyn Write) -> io::Result<i32> {
    with_records(binary, out, |distinct, out| {
        let mut any_image = false;
        for (record, copies) in distinct {
            any_image |= !record.images.is_empty();
            show(record, *copies, out)?;
        }
        Ok(if any_image { OK } else { NOT_READY })
    })
}

/// Runs `body` on the distinct image records of `binary`, each with how many times the program
/// embeds it (a std::offload program embeds its crate's record once per kernel), in the order of
/// their first copies, and returns its exit code. A program that cannot be read, or whose
/// records cannot ([`read`], [`records`]), gets why on `out` and that failure's code instead.
pub(crate) fn with_records(
    binary: &Path,
    out: &mut dyn Write,
    body: impl FnOnce(&[(ImageRecord<'_>, usize)], &mut dyn Write) -> io::Result<i32>,
) -> io::Result<i32> {
    let data = read(binary);
    let records = data
        .as_deref()
        .map_err(Clone::clone)
        .and_then(|data| records(binary, data));
    match records {
        Ok(records) => {
            let mut distinct: Vec<(ImageRecord<'_>, usize)> = Vec::new();
            for record in records {
                match distinct.iter_mut().find(|(r, _)| *r == record) {
                    Some((_, copies)) => *copies += 1,
                    None => distinct.push((record, 1)),
                }
            }
            body(&distinct, out)
        }
        Err((code, why)) => {
            writeln!(out, "{why}")?;
            Ok(code)
        }
    }
}

/// The program's bytes, or the exit code and message for a file that cannot be read.
fn read(binary: &Path) -> Result<Vec<u8>, (i32, String)> {
    std::fs::read(binary).map_err(|e| {
        (
            BAD_INPUT,
            format!("cargo offload: cannot read {}: {e}", binary.display()),
        )
    })
}

/// The image records of a program's `.offload_images` section (`data` is the program), or the
/// exit code and message: not an ELF program, no section, a damaged section.
fn records<'a>(binary: &Path, data: &'a [u8]) -> Result<Vec<ImageRecord<'a>>, (i32, String)> {
    let shown = binary.display();
    let file = object::File::parse(data).map_err(|e| {
        (
            BAD_INPUT,
            format!("cargo offload: {shown} is not an ELF program: {e}"),
        )
    })?;
    let Some(section) = file.section_by_name(SECTION) else {
        return Err((
            NOT_READY,
            format!(
                "{shown}: no device images (no {SECTION} section: the program embeds no offload kernels)"
            ),
        ));
    };
    // The section's bytes borrow `data` (the file is parsed in place).
    let bytes = section.data().map_err(|e| {
        (
            BAD_INPUT,
            format!("cargo offload: {shown}: damaged {SECTION} section: {e}"),
        )
    })?;
    decode_section(bytes).map_err(|e| {
        (
            BAD_INPUT,
            format!("cargo offload: {shown}: damaged {SECTION} section: {e}"),
        )
    })
}

fn show(record: &ImageRecord<'_>, copies: usize, out: &mut dyn Write) -> io::Result<()> {
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    write!(
        out,
        "crate {}: {}, {}",
        record.crate_name,
        plural(record.images.len(), "image"),
        plural(record.kernels.len(), "kernel")
    )?;
    if copies > 1 {
        write!(out, " (embedded {copies} times)")?;
    }
    writeln!(out)?;
    if let Some(why) = record.unavailable {
        writeln!(out, "  no device images: {why}")?;
    }
    for image in &record.images {
        writeln!(
            out,
            "  image {:<6} {:<8} {:>10} bytes",
            image.format,
            image.target,
            image.bytes.len()
        )?;
    }
    for kernel in &record.kernels {
        writeln!(out, "  kernel {kernel}")?;
    }
    Ok(())
}
