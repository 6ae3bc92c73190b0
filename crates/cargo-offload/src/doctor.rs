//! `cargo offload doctor`: each piece the device pass and the plugins need, found or why not,
//! with the command that installs what is missing. Discovery is the build pass's own
//! (`offload_build`) and the runtime's, so the answer is what a build and a launch would find.

use crate::{NOT_READY, OK};
use offload_build::{install_hints, ToolchainError};
use std::io::{self, Write};
use std::path::PathBuf;

/// The LLVM generation Debian packages the device toolchain with, for hints given before any
/// rustc was found.
const DEFAULT_LLVM: u32 = 22;

pub fn run(out: &mut dyn Write) -> io::Result<i32> {
    let toolchain = offload_build::find_device_toolchain();
    let llvm_major = match &toolchain {
        Ok(tc) => tc.llvm_major,
        Err(ToolchainError::LlvmTools { llvm_major, .. }) => *llvm_major,
        Err(ToolchainError::Rustc(_)) => DEFAULT_LLVM,
    };
    writeln!(
        out,
        "device toolchain (the build pass compiles kernels with it):"
    )?;
    match &toolchain {
        Ok(tc) => {
            found(
                out,
                "device rustc",
                &format!(
                    "{} ({}), LLVM {}, host {}",
                    tc.rustc.display(),
                    tc.origin,
                    tc.llvm_major,
                    tc.host
                ),
            )?;
            found(
                out,
                "LLVM tools",
                &format!(
                    "LLVM {} (rustc's is {}): {}, {}, {}",
                    tc.tools_llvm_major,
                    tc.llvm_major,
                    tc.llvm_link.display(),
                    tc.opt.display(),
                    tc.llc.display()
                ),
            )?;
        }
        Err(e @ ToolchainError::Rustc(reason)) => {
            missing(out, "device rustc", reason, &e.install_hint())?;
            writeln!(
                out,
                "  {:<9}{:<14}not checked: they must match a device rustc",
                "-", "LLVM tools"
            )?;
        }
        Err(
            e @ ToolchainError::LlvmTools {
                rustc,
                llvm_major,
                reason,
            },
        ) => {
            found(
                out,
                "device rustc",
                &format!("{}, LLVM {llvm_major}", rustc.display()),
            )?;
            missing(out, "LLVM tools", reason, &e.install_hint())?;
        }
    }
    optional(
        out,
        "ptxas",
        offload_build::find_ptxas(),
        "cubins are built and the PTX is checked at build time",
        "no cubins: the driver compiles the PTX at first load",
        install_hints::PTXAS,
    )?;
    optional(
        out,
        "lld",
        offload_build::find_lld(llvm_major),
        "links AMD GPU code objects",
        "no AMD GPU images",
        &install_hints::lld(llvm_major),
    )?;

    writeln!(out, "runtime (what a launch finds):")?;
    optional(
        out,
        "liboffload",
        find_liboffload(llvm_major),
        "LLVM's offload runtime",
        "no liboffload",
        &install_hints::liboffload(llvm_major),
    )?;
    let devices = offload::devices();
    for note in offload::plugins_without_devices() {
        let (plugin, reason) = note.split_once(": ").unwrap_or(("GPU plugin", note));
        let hint = match plugin {
            "CUDA" => install_hints::CUDA_DRIVER,
            _ => "",
        };
        missing(out, &format!("{plugin} driver"), reason, hint)?;
    }
    let gpus: Vec<String> = devices
        .iter()
        .filter(|d| d.is_gpu())
        .map(|d| format!("{} ({:?} {})", d.name(), d.kind(), d.ordinal()))
        .collect();
    if gpus.is_empty() {
        writeln!(
            out,
            "  {:<9}{:<14}none: kernels run on the host CPU",
            "-", "GPUs"
        )?;
    } else {
        found(out, "GPUs", &gpus.join(", "))?;
    }

    let ready = toolchain.is_ok();
    if ready {
        writeln!(out, "result: device images can be built")?;
        Ok(OK)
    } else {
        writeln!(
            out,
            "result: no device images can be built here: every kernel runs on the host backend"
        )?;
        Ok(NOT_READY)
    }
}

fn found(out: &mut dyn Write, what: &str, detail: &str) -> io::Result<()> {
    writeln!(out, "  {:<9}{what:<14}{detail}", "ok")
}

fn missing(out: &mut dyn Write, what: &str, why: &str, install: &str) -> io::Result<()> {
    writeln!(out, "  {:<9}{what:<14}{why}", "missing")?;
    if !install.is_empty() {
        writeln!(out, "  {:<23}install: {install}", "")?;
    }
    Ok(())
}

/// A piece the build or the runtime does without: found, or missing with what that costs.
fn optional(
    out: &mut dyn Write,
    what: &str,
    lookup: Result<PathBuf, String>,
    gives: &str,
    without: &str,
    install: &str,
) -> io::Result<()> {
    match lookup {
        Ok(path) => found(out, what, &format!("{} ({gives})", path.display())),
        Err(why) => missing(out, what, &format!("{why} ({without})"), install),
    }
}

/// LLVM's liboffload: `OFFLOAD_LIBOFFLOAD`, else `libLLVMOffload.so*` of LLVM `llvm_major` or
/// newer in Debian's places.
fn find_liboffload(llvm_major: u32) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("OFFLOAD_LIBOFFLOAD").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("OFFLOAD_LIBOFFLOAD={} does not exist", p.display()))
        };
    }
    let dirs =
        (llvm_major..=llvm_major + 4).map(|n| PathBuf::from(format!("/usr/lib/llvm-{n}/lib")));
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut libs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libLLVMOffload.so"))
            })
            .collect();
        libs.sort();
        if let Some(lib) = libs.into_iter().next() {
            return Ok(lib);
        }
    }
    Err(format!(
        "no libLLVMOffload.so in /usr/lib/llvm-{llvm_major}/lib.. and OFFLOAD_LIBOFFLOAD is not set"
    ))
}
