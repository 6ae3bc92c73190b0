//! `cargo offload`: a new project (`new NAME`), the device toolchain's health (`doctor`), the
//! devices the runtime sees (`devices`), the device images a built program embeds
//! (`images BINARY`) and one kernel's device code in them (`inspect BINARY KERNEL`).
//!
//! Output is plain text on stdout; the exit code says the outcome: [`OK`], [`NOT_READY`] (the
//! toolchain cannot build device images; the program embeds no device image), [`BAD_INPUT`]
//! (a usage error, or a file that cannot be read as a program).

mod devices;
mod doctor;
mod images;
mod inspect;
mod new;

use std::io::Write;

/// Everything asked for is there.
pub const OK: i32 = 0;
/// `doctor`: no device images can be built here. `images`: the program embeds none.
pub const NOT_READY: i32 = 1;
/// A usage error, or a file that is not a readable program.
pub const BAD_INPUT: i32 = 2;

const USAGE: &str = "\
usage: cargo offload <command>

commands:
  new NAME [--path DIR]
                  a project in directory NAME (Cargo.toml, build.rs, src/kernels.rs, src/main.rs)
                  that builds and runs at once (`cargo run --release`), on the host backend where
                  there is no GPU. Its offload crates come from crates.io (0.1), or with --path
                  from the offload checkout DIR.
  doctor          is the device toolchain complete? (rustc, LLVM tools, ptxas, lld, liboffload,
                  drivers, devices); each missing piece with the command that installs it.
                  Exit 0: device images can be built; 1: they cannot.
  devices         every device of every plugin, with its limits; for a plugin without devices, why
  images BINARY   the device images a built program embeds: per crate, each image's format,
                  target and size, and the kernels. Exit 0: images found; 1: none embedded;
                  2: not a readable program
  inspect BINARY KERNEL
                  KERNEL's device code in a built program (every instance of a generic kernel):
                  the PTX entry; SASS of each cubin (cuobjdump or nvdisasm); AMD ISA of each code
                  object (llvm-objdump); the SPIR-V function (spirv-dis). A tool not on PATH is
                  named in place of its listing. Exit 0: shown; 1: no images embedded;
                  2: no such kernel, or not a readable program
  help            this text
";

/// Runs the command in `args` (without the program name; a leading `offload`, as cargo passes
/// it to `cargo-offload`, is skipped), writing to `out`. Returns the exit code.
pub fn run(args: &[String], out: &mut dyn Write) -> i32 {
    let args = match args.first().map(String::as_str) {
        Some("offload") => &args[1..],
        _ => args,
    };
    let code = match args {
        [cmd] if cmd == "doctor" => doctor::run(out),
        [cmd] if cmd == "devices" => devices::run(out),
        [cmd, binary] if cmd == "images" => images::run(binary.as_ref(), out),
        [cmd, binary, kernel] if cmd == "inspect" => inspect::run(binary.as_ref(), kernel, out),
        [cmd, rest @ ..] if cmd == "new" => new::run(rest, out),
        [cmd] if matches!(cmd.as_str(), "help" | "--help" | "-h") => {
            out.write_all(USAGE.as_bytes()).map(|()| OK)
        }
        _ => {
            let given = if args.is_empty() {
                "no command".to_string()
            } else {
                format!("`{}`", args.join(" "))
            };
            write!(out, "cargo offload: {given} is not a command\n\n{USAGE}").map(|()| BAD_INPUT)
        }
    };
    code.unwrap_or_else(|e| {
        eprintln!("cargo offload: cannot write the output: {e}");
        BAD_INPUT
    })
}
