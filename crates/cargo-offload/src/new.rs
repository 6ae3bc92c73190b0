//! `cargo offload new NAME [--path DIR]`: a project whose kernels build and run at once, on a
//! GPU when there is one and on the host backend otherwise.
//!
//! The offload crates come from crates.io (`0.1`) unless `--path DIR` names a checkout of the
//! offload repository (the directory holding `crates/offload`).

use crate::{BAD_INPUT, OK};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The crates.io version requirement of the generated project's offload crates.
pub const DEFAULT_VERSION: &str = "0.1";

/// Where the generated Cargo.toml takes `offload` and `offload-build` from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A crates.io version requirement.
    Version(String),
    /// A checkout of the offload repository.
    Checkout(PathBuf),
}

pub fn run(args: &[String], out: &mut dyn Write) -> io::Result<i32> {
    let (name, source) = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            writeln!(out, "cargo offload new: {e}")?;
            return Ok(BAD_INPUT);
        }
    };
    let dir = Path::new(&name);
    let package = match package_name(dir) {
        Ok(p) => p,
        Err(e) => {
            writeln!(out, "cargo offload new: {e}")?;
            return Ok(BAD_INPUT);
        }
    };
    if dir.exists() {
        writeln!(out, "cargo offload new: {} already exists", dir.display())?;
        return Ok(BAD_INPUT);
    }
    for (file, text) in files(&package, &source) {
        let path = dir.join(file);
        let written = std::fs::create_dir_all(path.parent().unwrap_or(dir))
            .and_then(|()| std::fs::write(&path, text));
        if let Err(e) = written {
            writeln!(
                out,
                "cargo offload new: cannot write {}: {e}",
                path.display()
            )?;
            return Ok(BAD_INPUT);
        }
    }
    let from = match &source {
        Source::Version(v) => format!("offload {v} from crates.io"),
        Source::Checkout(p) => format!("offload from {}", p.display()),
    };
    writeln!(
        out,
        "created {} ({from}): `cd {} && cargo run --release`",
        dir.display(),
        dir.display()
    )?;
    Ok(OK)
}

/// `NAME [--path DIR]`, in either order.
fn parse_args(args: &[String]) -> Result<(String, Source), String> {
    let mut name = None;
    let mut source = Source::Version(DEFAULT_VERSION.to_string());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--path" => {
                let dir = args.next().ok_or("--path needs a directory")?;
                let dir = Path::new(dir);
                if !dir.join("crates/offload/Cargo.toml").is_file() {
                    return Err(format!(
                        "--path {}: no crates/offload/Cargo.toml there (give the root of an \
                         offload checkout)",
                        dir.display()
                    ));
                }
                let dir = dir
                    .canonicalize()
                    .map_err(|e| format!("--path {}: {e}", dir.display()))?;
                source = Source::Checkout(dir);
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other if name.is_none() => name = Some(other.to_string()),
            other => return Err(format!("one project at a time (also given: {other})")),
        }
    }
    let name = name.ok_or("usage: cargo offload new NAME [--path OFFLOAD_CHECKOUT]")?;
    Ok((name, source))
}

/// The package name: the directory's last component, which cargo must accept as a crate name.
fn package_name(dir: &Path) -> Result<String, String> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no usable last component", dir.display()))?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a package name (letters, digits, `-` and `_`, starting with a letter)"
        ));
    }
    Ok(name.to_string())
}

fn dependency(crate_name: &str, source: &Source) -> String {
    match source {
        Source::Version(v) => format!("{crate_name} = \"{v}\"\n"),
        Source::Checkout(root) => {
            let path = root.join("crates").join(crate_name);
            // A TOML basic string: `{:?}` escapes quotes and backslashes alike.
            format!(
                "{crate_name} = {{ path = {:?} }}\n",
                path.display().to_string()
            )
        }
    }
}

/// The generated project's files, relative to its directory.
pub fn files(package: &str, source: &Source) -> Vec<(&'static str, String)> {
    let mut cargo_toml = format!(
        "[package]\nname = \"{package}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
    );
    cargo_toml.push_str(&dependency("offload", source));
    cargo_toml.push_str(
        "\n# The device pass: compiles src/kernels.rs for the GPUs and embeds the images.\n",
    );
    cargo_toml.push_str("[build-dependencies]\n");
    cargo_toml.push_str(&dependency("offload-build", source));
    vec![
        ("Cargo.toml", cargo_toml),
        ("build.rs", BUILD_RS.to_string()),
        ("src/kernels.rs", KERNELS_RS.to_string()),
        ("src/main.rs", MAIN_RS.to_string()),
        (".gitignore", "/target\n".to_string()),
    ]
}

const BUILD_RS: &str = "\
// Compiles the kernels module for the GPUs (PTX and a cubin for NVIDIA, code objects for AMD)
// and embeds the images; without a device toolchain it warns once and the kernels run on the
// host backend.
fn main() {
    offload_build::Kernels::new(\"src/kernels.rs\").build();
}
";

const KERNELS_RS: &str = "\
// The kernels: plain Rust, compiled for the GPU too, so no_std-compatible.
use offload::prelude::*;

/// y = a * x + y, each GPU thread on the elements it owns.
#[offload::kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (i, y) in y.iter_mine() {
        *y += a * x[i];
    }
}
";

const MAIN_RS: &str = "\
mod kernels;
offload::embed_images!();

fn main() -> offload::Result<()> {
    let device = offload::default_device()?;
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| (i % 100) as f32).collect();
    let mut y = vec![1.0f32; n];
    // Copies x to the device, y there and back, and launches with a grid fitted to the data.
    kernels::saxpy(2.0, &x, &mut y)?;
    let wrong = (0..n).filter(|&i| y[i] != 1.0 + 2.0 * x[i]).count();
    println!(\"saxpy on {} ({n} elements): {wrong} wrong\", device.name());
    if let Some(why) = __OFFLOAD_IMAGES.unavailable {
        println!(\"(no device images: {why})\");
    }
    assert_eq!(wrong, 0);
    Ok(())
}
";

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn crates_io_by_default() {
        let (name, source) = parse_args(&args(&["demo"])).unwrap();
        assert_eq!(name, "demo");
        assert_eq!(source, Source::Version("0.1".into()));
        let toml = &files("demo", &source)[0].1;
        assert!(
            toml.contains("\n[dependencies]\noffload = \"0.1\"\n"),
            "{toml}"
        );
        assert!(
            toml.contains("\n[build-dependencies]\noffload-build = \"0.1\"\n"),
            "{toml}"
        );
    }

    #[test]
    fn a_checkout_by_path() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let (_, source) = parse_args(&args(&["--path", root.to_str().unwrap(), "demo"])).unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(source, Source::Checkout(root.clone()));
        let toml = &files("demo", &source)[0].1;
        let offload = root.join("crates/offload").display().to_string();
        assert!(
            toml.contains(&format!("offload = {{ path = {offload:?} }}")),
            "{toml}"
        );
        assert!(parse_args(&args(&["demo", "--path", "/nonexistent"]))
            .unwrap_err()
            .contains("no crates/offload/Cargo.toml"));
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(package_name(Path::new("a/b/my-app")).unwrap(), "my-app");
        for bad in ["1app", "a b", "x.y"] {
            assert!(package_name(Path::new(bad)).is_err(), "{bad}");
        }
        assert!(parse_args(&args(&["a", "b"])).is_err());
        assert!(parse_args(&args(&["a", "--git"])).is_err());
        assert!(parse_args(&args(&[])).is_err());
    }
}
