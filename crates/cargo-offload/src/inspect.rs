//! `cargo offload inspect BINARY KERNEL`: a kernel's device code, from the images a built program
//! embeds: its PTX entry; SASS of each cubin (cuobjdump, else nvdisasm); the AMD ISA of each
//! HSA code object (llvm-objdump); the SPIR-V function (spirv-dis). Each tool is looked up on
//! PATH; a missing one is named, with where it comes from, in place of its listing.
//!
//! `KERNEL` is a kernel's name, or a generic kernel's (every instance, `axpy` for `axpy__f32`,
//! `axpy__f64`, ...).

use crate::images::with_records;
use crate::{BAD_INPUT, NOT_READY, OK};
use offload_build::image_record::{ImageRecord, RecordImage};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn run(binary: &Path, kernel: &str, out: &mut dyn Write) -> io::Result<i32> {
    with_records(binary, out, |distinct, out| {
        show_kernel(binary, kernel, distinct, out)
    })
}

/// [`run`] on the program's distinct image records.
fn show_kernel(
    binary: &Path,
    kernel: &str,
    distinct: &[(ImageRecord<'_>, usize)],
    out: &mut dyn Write,
) -> io::Result<i32> {
    let mut found = false;
    let mut shown = false;
    for (record, _) in distinct {
        let names: Vec<&str> = record
            .kernels
            .iter()
            .copied()
            .filter(|k| is_kernel(k, kernel))
            .collect();
        if names.is_empty() {
            continue;
        }
        found = true;
        if let Some(why) = record.unavailable {
            writeln!(
                out,
                "crate {}: kernel {kernel}: no device images: {why}",
                record.crate_name
            )?;
        }
        for name in names {
            writeln!(out, "crate {}: kernel {name}", record.crate_name)?;
            // The PTX first: the code as offload produced it, then what it became.
            let mut images: Vec<&RecordImage<'_>> = record.images.iter().collect();
            images.sort_by_key(|i| {
                ["ptx", "cubin", "hsaco", "spirv"]
                    .iter()
                    .position(|f| *f == i.format)
            });
            for image in images {
                show(image, name, out)?;
                shown = true;
            }
        }
    }
    if !found {
        let all: Vec<&str> = distinct
            .iter()
            .flat_map(|(r, _)| r.kernels.iter().copied())
            .collect();
        writeln!(
            out,
            "cargo offload: {} embeds no kernel `{kernel}` (its kernels: {})",
            binary.display(),
            if all.is_empty() {
                "none".to_string()
            } else {
                all.join(", ")
            }
        )?;
        return Ok(BAD_INPUT);
    }
    Ok(if shown { OK } else { NOT_READY })
}

/// `name` is `kernel` or one of its instances (`kernel__f32`).
fn is_kernel(name: &str, kernel: &str) -> bool {
    name == kernel
        || name
            .strip_prefix(kernel)
            .is_some_and(|rest| rest.starts_with("__"))
}

fn show(image: &RecordImage<'_>, kernel: &str, out: &mut dyn Write) -> io::Result<()> {
    let target = image.target;
    match image.format {
        "ptx" => {
            let text = String::from_utf8_lossy(image.bytes);
            match ptx_entry(&text, kernel) {
                Some(entry) => writeln!(out, "== PTX {target}\n{entry}")?,
                None => writeln!(out, "== PTX {target}: no .entry {kernel} in the PTX")?,
            }
        }
        "cubin" => {
            let listing = if let Some(tool) = on_path(&["cuobjdump"]) {
                disassemble(&tool, &["-sass", "-fun", kernel], image.bytes, "cubin")
                    .map(|text| (format!("cuobjdump {}", tool.display()), text))
            } else if let Some(tool) = on_path(&["nvdisasm"]) {
                disassemble(&tool, &["-c"], image.bytes, "cubin").map(|text| {
                    let only = nvdisasm_function(&text, kernel).unwrap_or(text);
                    (format!("nvdisasm {}", tool.display()), only)
                })
            } else {
                Err(
                    "not shown: neither cuobjdump nor nvdisasm is on PATH (both come with the \
                     CUDA toolkit, or the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm \
                     wheels)"
                        .to_string(),
                )
            };
            section(out, &format!("SASS {target}"), listing)?;
        }
        "hsaco" => {
            let names = ["llvm-objdump-22", "llvm-objdump"];
            let listing = match llvm_objdump(&names) {
                Some(tool) => {
                    let symbols = format!("--disassemble-symbols={kernel}");
                    let mcpu = format!("--mcpu={target}");
                    disassemble(&tool, &["-d", &symbols, &mcpu], image.bytes, "hsaco")
                        .map(|text| (format!("llvm-objdump {}", tool.display()), text))
                }
                None => Err(
                    "not shown: no llvm-objdump-22 or llvm-objdump on PATH or in OFFLOAD_LLVM_BIN \
                     (apt-get install llvm-22)"
                        .to_string(),
                ),
            };
            section(out, &format!("AMD ISA {target}"), listing)?;
        }
        "spirv" => {
            let listing = match on_path(&["spirv-dis"]) {
                Some(tool) => disassemble(&tool, &[], image.bytes, "spv").map(|text| {
                    let only = spirv_function(&text, kernel).unwrap_or(text);
                    (format!("spirv-dis {}", tool.display()), only)
                }),
                None => {
                    Err("not shown: no spirv-dis on PATH (apt-get install spirv-tools)".to_string())
                }
            };
            section(out, &format!("SPIR-V {target}"), listing)?;
        }
        other => writeln!(
            out,
            "== {other} {target}: a format cargo offload cannot show"
        )?,
    }
    Ok(())
}

fn section(
    out: &mut dyn Write,
    title: &str,
    listing: Result<(String, String), String>,
) -> io::Result<()> {
    match listing {
        Ok((tool, text)) => writeln!(out, "== {title} ({tool})\n{}", text.trim_end()),
        Err(why) => writeln!(out, "== {title}: {why}"),
    }
}

/// The first of `names` found in a directory of PATH.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// llvm-objdump: in `OFFLOAD_LLVM_BIN` (where the device pass takes its LLVM tools), else PATH.
fn llvm_objdump(names: &[&str]) -> Option<PathBuf> {
    let in_bin = std::env::var_os("OFFLOAD_LLVM_BIN").and_then(|dir| {
        names
            .iter()
            .map(|n| Path::new(&dir).join(n))
            .find(|p| p.is_file())
    });
    in_bin.or_else(|| on_path(names))
}

/// Runs `tool ARGS FILE` on the image written to a temporary file; its stdout, or why not.
fn disassemble(tool: &Path, args: &[&str], bytes: &[u8], ext: &str) -> Result<String, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let file = std::env::temp_dir().join(format!(
        "cargo-offload-inspect-{}-{}.{ext}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&file, bytes).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let run = Command::new(tool).args(args).arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let run = run.map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !run.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            tool.display(),
            run.status,
            String::from_utf8_lossy(&run.stderr).trim()
        ));
    }
    // Tools name the file they read: the image's temporary copy, which is gone.
    let listing = String::from_utf8_lossy(&run.stdout);
    Ok(listing.replace(&file.display().to_string(), &format!("<image>.{ext}")))
}

/// The `.entry KERNEL(...) { ... }` of a PTX module: from its line to the `}` that closes it at
/// the start of a line.
pub(crate) fn ptx_entry(ptx: &str, kernel: &str) -> Option<String> {
    let lines: Vec<&str> = ptx.lines().collect();
    let head = format!(".entry {kernel}(");
    let start = lines.iter().position(|l| l.contains(&head))?;
    let end = lines[start..].iter().position(|l| l.starts_with('}'))? + start;
    Some(lines[start..=end].join("\n"))
}

/// The function of the SPIR-V entry point `kernel` in spirv-dis output: from its `OpFunction`
/// to its `OpFunctionEnd`.
pub(crate) fn spirv_function(text: &str, kernel: &str) -> Option<String> {
    let quoted = format!("\"{kernel}\"");
    let id = text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some("OpEntryPoint") && l.contains(&quoted))
            .then(|| words.nth(1).map(str::to_string))
            .flatten()
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let head = format!("{id} = OpFunction ");
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&head))?;
    let end = lines[start..]
        .iter()
        .position(|l| l.trim() == "OpFunctionEnd")?
        + start;
    Some(lines[start..=end].join("\n"))
}

/// The `.text.KERNEL` section of nvdisasm's listing, up to the next section.
fn nvdisasm_function(text: &str, kernel: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let head = format!(".text.{kernel}");
    let start = lines.iter().position(|l| {
        l.contains(".section")
            && l.split_whitespace()
                .any(|w| w.split(',').next() == Some(head.as_str()))
    })?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with(".section"))
        .map_or(lines.len(), |e| e + start + 1);
    Some(lines[start..end].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.version 8.5
.target sm_90
.address_size 64

.visible .entry other(
\t.param .u64 other_param_0
)
{
\tret;
}

\t// .globl\tsaxpy
.visible .entry saxpy(
\t.param .f32 saxpy_param_0
)
.maxntid 1024, 1, 1
{
\t.reg .b32 \t%r<3>;
\t{ // inner braces stay
\t}
\tret;
}
";

    #[test]
    fn one_ptx_entry() {
        let entry = ptx_entry(PTX, "saxpy").unwrap();
        assert!(entry.starts_with(".visible .entry saxpy("), "{entry}");
        assert!(entry.ends_with("\tret;\n}"), "{entry}");
        assert!(!entry.contains("other"), "{entry}");
        assert_eq!(ptx_entry(PTX, "sax"), None);
    }

    #[test]
    fn one_spirv_function() {
        let text = "\
OpCapability Kernel
OpEntryPoint Kernel %1 \"other\"
OpEntryPoint Kernel %saxpy \"saxpy\" %gid
%1 = OpFunction %void None %5
OpFunctionEnd
%saxpy = OpFunction %void None %5
%a = OpFunctionParameter %float
OpReturn
OpFunctionEnd
";
        let f = spirv_function(text, "saxpy").unwrap();
        assert_eq!(
            f,
            "%saxpy = OpFunction %void None %5\n%a = OpFunctionParameter %float\nOpReturn\nOpFunctionEnd"
        );
        assert_eq!(spirv_function(text, "none"), None);
    }

    #[test]
    fn instances_of_a_generic_kernel() {
        assert!(is_kernel("axpy__f32", "axpy"));
        assert!(is_kernel("axpy", "axpy"));
        assert!(!is_kernel("axpy2", "axpy"));
        assert!(!is_kernel("ax", "axpy"));
    }

    #[test]
    fn one_nvdisasm_section() {
        let text = "\t.section\t.text.other,\"ax\",@progbits\nA\n\t.section\t.text.saxpy,\"ax\",@progbits\nB\nC\n\t.section\t.nv.info\nD\n";
        let f = nvdisasm_function(text, "saxpy").unwrap();
        assert!(
            f.contains("B\nC") && !f.contains('A') && !f.contains('D'),
            "{f}"
        );
    }
}
