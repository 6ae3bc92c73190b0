//! Finding a device toolchain: a rustc that can build `core` for nvptx64 (it needs rust-src for
//! `-Zbuild-std`), LLVM tools able to read its bitcode, and optionally `ptxas`.

use crate::install_hints;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// A usable device toolchain.
#[derive(Clone, Debug)]
pub struct DeviceToolchain {
    /// Where it came from, for messages.
    pub origin: String,
    /// The real rustc binary (never a rustup proxy).
    pub rustc: PathBuf,
    pub sysroot: PathBuf,
    /// rustc's host triple.
    pub host: String,
    /// `rustc -vV`: release, commit and LLVM version, which name cached builds of `core`.
    pub version: String,
    /// Major version of the LLVM rustc was built with.
    pub llvm_major: u32,
    /// Major version of the LLVM of `llvm-link`, `opt` and `llc` (at least `llvm_major`).
    pub tools_llvm_major: u32,
    pub llvm_link: PathBuf,
    pub opt: PathBuf,
    pub llc: PathBuf,
}

/// Why there is no device toolchain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolchainError {
    /// No rustc that builds `core` for nvptx64: each candidate's reason.
    Rustc(String),
    /// A device rustc, but no LLVM tools at least as new as its LLVM.
    LlvmTools {
        rustc: PathBuf,
        llvm_major: u32,
        reason: String,
    },
}

impl std::fmt::Display for ToolchainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolchainError::Rustc(reason) | ToolchainError::LlvmTools { reason, .. } => {
                f.write_str(reason)
            }
        }
    }
}

impl std::error::Error for ToolchainError {}

impl ToolchainError {
    /// The command that installs the missing piece.
    pub fn install_hint(&self) -> String {
        match self {
            ToolchainError::Rustc(_) => install_hints::DEVICE_RUSTC.to_string(),
            ToolchainError::LlvmTools { llvm_major, .. } => install_hints::llvm_tools(*llvm_major),
        }
    }
}

/// Finds a device toolchain, or says why there is none.
pub fn find_device_toolchain() -> Result<DeviceToolchain, ToolchainError> {
    let rustc = find_rustc().map_err(ToolchainError::Rustc)?;
    let ([llvm_link, opt, llc], tools_llvm_major) =
        find_llvm_tools(&rustc).map_err(|reason| ToolchainError::LlvmTools {
            rustc: rustc.path.clone(),
            llvm_major: rustc.llvm_major,
            reason,
        })?;
    Ok(DeviceToolchain {
        origin: rustc.origin,
        rustc: rustc.path,
        sysroot: rustc.sysroot,
        host: rustc.host,
        version: rustc.version,
        llvm_major: rustc.llvm_major,
        tools_llvm_major,
        llvm_link,
        opt,
        llc,
    })
}

struct Rustc {
    origin: String,
    path: PathBuf,
    sysroot: PathBuf,
    host: String,
    version: String,
    llvm_major: u32,
}

/// The major version in text like `LLVM version: 22.1.8` (`rustc -vV`), `Debian LLVM version
/// 22.1.8` or `LLVM version 20.1.1-rust-1.87.0-stable` (`llc --version`).
pub(crate) fn parse_llvm_major(text: &str) -> Option<u32> {
    let at = text.find("LLVM version")? + "LLVM version".len();
    let rest = text[at..].trim_start_matches([':', ' ', '\t']);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// The `host:` line of `rustc -vV`.
pub(crate) fn parse_host(verbose_version: &str) -> Option<String> {
    verbose_version
        .lines()
        .find_map(|l| l.strip_prefix("host:"))
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Runs a probe command; its stdout on success, else a one-line reason.
pub(crate) fn capture(cmd: &mut Command) -> Result<String, String> {
    // A rustup proxy would otherwise pick the outer build's toolchain.
    cmd.env_remove("RUSTUP_TOOLCHAIN");
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!(
            "{program} failed ({}): {}",
            out.status,
            first.trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Tries, in order: `OFFLOAD_DEVICE_RUSTC`, a rustup toolchain, Debian's rustc-web. A candidate
/// the user named explicitly is the only one tried, so a typo is reported instead of being
/// papered over by another toolchain.
fn find_rustc() -> Result<Rustc, String> {
    if let Some(path) = env_nonempty("OFFLOAD_DEVICE_RUSTC") {
        return check_rustc(Path::new(&path), "OFFLOAD_DEVICE_RUSTC".into())
            .map_err(|e| format!("OFFLOAD_DEVICE_RUSTC={path}: {e}"));
    }
    let mut reasons = Vec::new();
    let explicit_toolchain = env_nonempty("OFFLOAD_DEVICE_TOOLCHAIN");
    let toolchain = explicit_toolchain.as_deref().unwrap_or("nightly");
    match rustup_rustc(toolchain)
        .and_then(|p| check_rustc(&p, format!("rustup toolchain {toolchain}")))
    {
        Ok(r) => return Ok(r),
        Err(e) => reasons.push(format!("rustup toolchain `{toolchain}`: {e}")),
    }
    if explicit_toolchain.is_none() {
        match check_rustc(Path::new("/usr/bin/rustc"), "/usr/bin/rustc".into()) {
            Ok(r) => return Ok(r),
            Err(e) => reasons.push(format!("/usr/bin/rustc: {e}")),
        }
    }
    Err(reasons.join("; "))
}

fn rustup_rustc(toolchain: &str) -> Result<PathBuf, String> {
    let sysroot = capture(
        Command::new("rustup")
            .args(["run", toolchain, "rustc", "--print", "sysroot"])
            // Never install a missing toolchain from inside a build.
            .env("RUSTUP_AUTO_INSTALL", "0"),
    )?;
    let rustc = Path::new(sysroot.trim())
        .join("bin")
        .join(format!("rustc{}", std::env::consts::EXE_SUFFIX));
    Ok(rustc)
}

fn check_rustc(path: &Path, origin: String) -> Result<Rustc, String> {
    if !path.is_file() {
        return Err("not found".into());
    }
    let vv = capture(Command::new(path).arg("-vV"))?;
    let llvm_major = parse_llvm_major(&vv).ok_or("no LLVM version in `rustc -vV`")?;
    let host = parse_host(&vv).ok_or("no host in `rustc -vV`")?;
    let sysroot = PathBuf::from(capture(Command::new(path).args(["--print", "sysroot"]))?.trim());
    let src = sysroot.join("lib/rustlib/src/rust/library");
    if !src.join("core").is_dir() {
        return Err(format!("no rust-src (missing {})", src.display()));
    }
    let targets = capture(Command::new(path).args(["--print", "target-list"]))?;
    if !targets.lines().any(|t| t.trim() == NVPTX_TARGET) {
        return Err(format!("does not support {NVPTX_TARGET}"));
    }
    // A proxy given as OFFLOAD_DEVICE_RUSTC is replaced by the binary it stands for.
    let real = sysroot
        .join("bin")
        .join(format!("rustc{}", std::env::consts::EXE_SUFFIX));
    let path = if real.is_file() {
        real
    } else {
        path.to_path_buf()
    };
    Ok(Rustc {
        origin,
        path,
        sysroot,
        host,
        version: vv,
        llvm_major,
    })
}

const TOOLS: [&str; 3] = ["llvm-link", "opt", "llc"];

/// `llvm-link`, `opt` and `llc` of one installation whose LLVM is at least as new as rustc's
/// (an older LLVM cannot read newer bitcode), and the oldest of their LLVM versions.
fn find_llvm_tools(rustc: &Rustc) -> Result<([PathBuf; 3], u32), String> {
    let major = rustc.llvm_major;
    if let Some(dir) = env_nonempty("OFFLOAD_LLVM_BIN") {
        let dir = PathBuf::from(dir);
        let set = |suffix: &str| TOOLS.map(|t| dir.join(format!("{t}{suffix}")));
        let mut last_err = String::new();
        for suffix in
            std::iter::once(String::new()).chain((major..=major + 4).map(|n| format!("-{n}")))
        {
            match check_tools(set(&suffix), major) {
                Ok(tools) => return Ok(tools),
                Err(e) if suffix.is_empty() => last_err = e,
                Err(_) => {}
            }
        }
        return Err(format!("OFFLOAD_LLVM_BIN={}: {last_err}", dir.display()));
    }

    let mut candidates: Vec<[Option<PathBuf>; 3]> = Vec::new();
    // rustup's llvm-tools component.
    let rustlib_bin = rustc
        .sysroot
        .join("lib/rustlib")
        .join(&rustc.host)
        .join("bin");
    candidates.push(TOOLS.map(|t| Some(rustlib_bin.join(t))));
    // Versioned packages (Debian/Ubuntu `llvm-N`) from rustc's LLVM up: any of them reads its
    // bitcode.
    for n in major..=major + 4 {
        candidates.push(TOOLS.map(|t| find_on_path(format!("{t}-{n}"))));
        let dir = PathBuf::from(format!("/usr/lib/llvm-{n}/bin"));
        candidates.push(TOOLS.map(|t| Some(dir.join(t))));
    }
    candidates.push(TOOLS.map(find_on_path));

    let mut too_old = None;
    for candidate in candidates {
        let [Some(a), Some(b), Some(c)] = candidate else {
            continue;
        };
        if ![&a, &b, &c].iter().all(|p| p.is_file()) {
            continue;
        }
        match check_tools([a, b, c], major) {
            Ok(tools) => return Ok(tools),
            Err(e) => {
                too_old.get_or_insert(e);
            }
        }
    }
    Err(match too_old {
        Some(e) => format!("no usable LLVM tools: {e}"),
        None => format!(
            "no llvm-link/opt/llc of LLVM {major} or newer (looked in {}, for llvm-link-{major}.. on PATH, in /usr/lib/llvm-{major}/bin.., and for llvm-link on PATH)",
            rustlib_bin.display()
        ),
    })
}

/// Checks that each tool runs and its LLVM major is at least `major`; the oldest major found.
fn check_tools(tools: [PathBuf; 3], major: u32) -> Result<([PathBuf; 3], u32), String> {
    let mut oldest = u32::MAX;
    for tool in &tools {
        if !tool.is_file() {
            return Err(format!("{} not found", tool.display()));
        }
        let text = capture(Command::new(tool).arg("--version"))?;
        match parse_llvm_major(&text) {
            Some(v) if v >= major => oldest = oldest.min(v),
            Some(v) => {
                return Err(format!(
                    "{} is LLVM {v}, older than rustc's LLVM {major}",
                    tool.display()
                ))
            }
            None => return Err(format!("no LLVM version in `{} --version`", tool.display())),
        }
    }
    Ok((tools, oldest))
}

pub(crate) fn find_on_path(name: impl AsRef<OsStr>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name.as_ref()))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// `ld.lld` of LLVM `llvm_major` or newer (`ld.lld-N` on PATH, `/usr/lib/llvm-N/bin`), else plain
/// `ld.lld` on PATH; else where it was looked for.
pub fn find_lld(llvm_major: u32) -> Result<PathBuf, String> {
    for n in llvm_major..=llvm_major + 4 {
        if let Some(p) = find_on_path(format!("ld.lld-{n}")) {
            return Ok(p);
        }
        let p = PathBuf::from(format!("/usr/lib/llvm-{n}/bin/ld.lld"));
        if is_executable(&p) {
            return Ok(p);
        }
    }
    find_on_path("ld.lld").ok_or_else(|| {
        format!(
            "no ld.lld-{llvm_major}.. on PATH, none in /usr/lib/llvm-{llvm_major}/bin.., no ld.lld on PATH"
        )
    })
}

/// `ptxas`: `OFFLOAD_PTXAS`, then PATH, then a CUDA install, then the `nvidia-cuda-nvcc` Python
/// wheel; else why there is none. `OFFLOAD_PTXAS=none` turns cubin generation off.
pub fn find_ptxas() -> Result<PathBuf, String> {
    if let Some(p) = env_nonempty("OFFLOAD_PTXAS") {
        if p == "none" {
            return Err("OFFLOAD_PTXAS=none".into());
        }
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(format!("OFFLOAD_PTXAS={} does not exist", p.display()));
        }
        return Ok(p);
    }
    if let Some(p) = find_on_path("ptxas") {
        return Ok(p);
    }
    let cuda = PathBuf::from("/usr/local/cuda/bin/ptxas");
    if cuda.is_file() {
        return Ok(cuda);
    }
    let not_found = "not on PATH, not in /usr/local/cuda/bin, no nvidia-cuda-nvcc Python wheel";
    let python = find_on_path("python3").ok_or(not_found)?;
    // The wheel may be a namespace package without __file__, so ask for __path__.
    let dir = capture(Command::new(python).args([
        "-c",
        "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
    ]))
    .map_err(|_| not_found)?;
    let p = Path::new(dir.trim()).join("bin/ptxas");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("the nvidia-cuda-nvcc wheel has no {}", p.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_major_from_rustc() {
        let vv = "rustc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)\n\
                  binary: rustc\nhost: x86_64-unknown-linux-gnu\nrelease: 1.96.0\n\
                  LLVM version: 22.1.8\n";
        assert_eq!(parse_llvm_major(vv), Some(22));
        assert_eq!(parse_host(vv).as_deref(), Some("x86_64-unknown-linux-gnu"));
    }

    #[test]
    fn llvm_major_from_tools() {
        assert_eq!(
            parse_llvm_major("Debian LLVM version 22.1.8\n  Optimized build.\n"),
            Some(22)
        );
        assert_eq!(
            parse_llvm_major(
                "LLVM (http://llvm.org/):\n  LLVM version 20.1.1-rust-1.87.0-stable\n"
            ),
            Some(20)
        );
        assert_eq!(parse_llvm_major("Ubuntu LLVM version 18.1.3"), Some(18));
        assert_eq!(parse_llvm_major("clang version 17"), None);
        assert_eq!(parse_llvm_major("LLVM version: unknown"), None);
    }

    #[test]
    fn no_host_line() {
        assert_eq!(parse_host("rustc 1.0\nhost: \n"), None);
        assert_eq!(parse_host("rustc 1.0\n"), None);
    }
}
