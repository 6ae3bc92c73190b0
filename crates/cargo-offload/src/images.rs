//! `cargo offload images BINARY`: the image records (`offload_build::image_record`) in a built
//! program's `.offload_images` section, one block per crate.

use crate::{BAD_INPUT, NOT_READY, OK};
use object::{Object, ObjectSection};
use offload_build::image_record::{decode_section, ImageRecord, SECTION};
use std::io::{self, Write};
use std::path::Path;

pub fn run(binary: &Path, out: &mut dyn Write) -> io::Result<i32> {
    let shown = binary.display();
    let data = match std::fs::read(binary) {
        Ok(d) => d,
        Err(e) => {
            writeln!(out, "cargo offload: cannot read {shown}: {e}")?;
            return Ok(BAD_INPUT);
        }
    };
    let file = match object::File::parse(&*data) {
        Ok(f) => f,
        Err(e) => {
            writeln!(out, "cargo offload: {shown} is not an ELF program: {e}")?;
            return Ok(BAD_INPUT);
        }
    };
    let Some(section) = file.section_by_name(SECTION) else {
        writeln!(
            out,
            "{shown}: no device images (no {SECTION} section: the program embeds no offload kernels)"
        )?;
        return Ok(NOT_READY);
    };
    let records = match section
        .data()
        .map_err(|e| e.to_string())
        .and_then(decode_section)
    {
        Ok(r) => r,
        Err(e) => {
            writeln!(
                out,
                "cargo offload: {shown}: damaged {SECTION} section: {e}"
            )?;
            return Ok(BAD_INPUT);
        }
    };
    let mut any_image = false;
    // A std::offload program embeds its crate's record once per kernel: show each once.
    let mut distinct: Vec<(ImageRecord<'_>, usize)> = Vec::new();
    for record in records {
        match distinct.iter_mut().find(|(r, _)| *r == record) {
            Some((_, copies)) => *copies += 1,
            None => distinct.push((record, 1)),
        }
    }
    for (record, copies) in &distinct {
        any_image |= !record.images.is_empty();
        show(record, *copies, out)?;
    }
    Ok(if any_image { OK } else { NOT_READY })
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
