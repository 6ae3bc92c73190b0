//! A content-addressed cache of the device pass's images, shared by every build of one target
//! directory (`<target>/offload-image-cache/`, beside the profiles' directories).
//!
//! Cargo re-runs a kernel crate's build script whenever the outer compilation differs: `cargo
//! clippy` after `cargo test`, a `-p` build whose features differ from the `--workspace` one. Each
//! run has its own `OUT_DIR`, so without this cache each repeats every nested device build. The
//! key hashes everything the images are made from: the build script's settings, the resolved
//! architectures, the environment variables the pass reads, `PATH`, the identity (path, size,
//! modification time) of every tool that makes an image (device rustc, cargo, LLVM tools, `ptxas`,
//! `ld.lld`, the SPIR-V pass's compiler), the contents of the kernel sources, of `offload` and the
//! crates it re-exports, of offload-build itself and of the `Cargo.lock` the device build starts
//! from. An entry also lists every file the nested builds' dep-info names (an `include_str!`
//! target, a `#[path]` module elsewhere) with its content hash, and the value of every
//! environment variable rustc's dep-info says the compilation read (`env!`); a lookup re-checks
//! them and misses on any difference. `OFFLOAD_IMAGE_CACHE=0` turns the cache off.
//!
//! Warnings the pass printed while building an entry (a missing `spirv-val`, say) are not
//! repeated on a hit.

use crate::images::{ImageFile, ImageKind};
use crate::toolchain::DeviceToolchain;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Bumped when an entry's layout or the key's composition changes.
const LAYOUT_VERSION: u32 = 1;

/// FNV-1a over 128 bits: stable across Rust releases (the key names a directory), and wide
/// enough that distinct inputs do not collide by accident.
#[derive(Clone)]
struct Fnv(u128);

impl Fnv {
    fn new() -> Self {
        Fnv(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        // Length first: ("ab", "c") and ("a", "bc") hash differently.
        for &b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= b as u128;
            self.0 = self
                .0
                .wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
        }
    }

    fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

fn content_hash(path: &Path) -> std::io::Result<String> {
    let mut h = Fnv::new();
    h.bytes(&fs::read(path)?);
    Ok(h.hex())
}

/// What an entry is looked up by. `text` lists the inputs one per line (it is stored in the
/// entry as `key.txt`, to tell what a key was made of); the key is its hash.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyBuilder {
    text: String,
}

impl KeyBuilder {
    pub(crate) fn new() -> Self {
        let mut k = KeyBuilder::default();
        k.value("layout", &LAYOUT_VERSION.to_string());
        k
    }

    pub(crate) fn value(&mut self, name: &str, value: &str) {
        // Debug formatting escapes newlines, so one input is one line.
        self.text.push_str(&format!("{name} {value:?}\n"));
    }

    /// A file's contents, or every file under a directory (sorted, with their relative paths).
    /// A missing path is an input too (`missing`).
    pub(crate) fn path(&mut self, name: &str, path: &Path) -> std::io::Result<()> {
        if path.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files)?;
            files.sort();
            self.value(name, &format!("dir {}", path.display()));
            for f in files {
                let rel = f.strip_prefix(path).unwrap_or(&f);
                self.value(&format!("  {}", rel.display()), &content_hash(&f)?);
            }
        } else if path.exists() {
            self.value(name, &format!("{} {}", path.display(), content_hash(path)?));
        } else {
            self.value(name, &format!("{} missing", path.display()));
        }
        Ok(())
    }

    /// An executable, by its resolved path, size and modification time: a reinstall or upgrade
    /// changes them, and hashing compilers' contents on every build would cost seconds.
    pub(crate) fn tool(&mut self, name: &str, path: Option<&Path>) {
        let id = match path {
            None => "none".to_string(),
            Some(p) => {
                let real = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
                match fs::metadata(&real) {
                    Ok(m) => {
                        let mtime = m
                            .modified()
                            .ok()
                            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                            .map_or(0, |d| d.as_nanos());
                        format!("{} {} {mtime}", real.display(), m.len())
                    }
                    Err(_) => format!("{} missing", real.display()),
                }
            }
        };
        self.value(name, &id);
    }

    pub(crate) fn finish(self) -> Key {
        let mut h = Fnv::new();
        h.bytes(self.text.as_bytes());
        Key {
            hex: h.hex(),
            text: self.text,
        }
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
pub(crate) struct Key {
    pub hex: String,
    text: String,
}

/// Everything the device pass's key is made of, besides the files it hashes.
pub(crate) struct PassInputs<'a> {
    pub tc: &'a DeviceToolchain,
    pub cargo: &'a Path,
    pub ptxas: Option<&'a Path>,
    /// The build script's settings (`Kernels`, Debug-formatted) and the resolved architectures.
    pub settings: String,
    pub watched_env: &'a [&'a str],
    /// Kernel sources, offload's sources, the lockfile: hashed by content.
    pub sources: Vec<PathBuf>,
}

/// The key of one device pass, or why there is none (an unreadable source).
pub(crate) fn pass_key(p: &PassInputs<'_>) -> Result<Key, String> {
    let mut k = KeyBuilder::new();
    k.value("settings", &p.settings);
    for var in p.watched_env.iter().chain(&["PATH"]) {
        let v = std::env::var_os(var).map(|v| v.to_string_lossy().into_owned());
        k.value(var, v.as_deref().unwrap_or("<unset>"));
    }
    k.value("rustc -vV", &p.tc.version);
    k.value("sysroot", &p.tc.sysroot.to_string_lossy());
    k.tool("rustc", Some(&p.tc.rustc));
    k.tool("cargo", Some(&resolve(p.cargo)));
    k.tool("llvm-link", Some(&p.tc.llvm_link));
    k.tool("opt", Some(&p.tc.opt));
    k.tool("llc", Some(&p.tc.llc));
    k.tool("ptxas", p.ptxas);
    k.tool(
        "ld.lld",
        crate::toolchain::find_lld(p.tc.llvm_major).ok().as_deref(),
    );
    // The SPIR-V pass plugin is compiled with these against that LLVM (spirv::pass_plugin).
    let opt_dir =
        p.tc.opt
            .canonicalize()
            .ok()
            .and_then(|o| Some(o.parent()?.to_path_buf()));
    for tool in ["clang++", "llvm-config"] {
        k.tool(tool, opt_dir.as_ref().map(|d| d.join(tool)).as_deref());
    }
    // offload-build itself, as compiled into this build script (cargo rebuilds the script when
    // these change, before running it).
    k.value("offload-build", env!("CARGO_PKG_VERSION"));
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if !own.is_dir() {
        return Err(format!(
            "offload-build's sources are gone from {}",
            own.display()
        ));
    }
    k.path("offload-build src", &own)
        .map_err(|e| format!("offload-build's sources: {e}"))?;
    for (i, s) in p.sources.iter().enumerate() {
        k.path(&format!("source {i}"), s)
            .map_err(|e| format!("{}: {e}", s.display()))?;
    }
    Ok(k.finish())
}

/// A bare `cargo` found on PATH, as `Command` would.
fn resolve(cargo: &Path) -> PathBuf {
    if cargo.components().count() == 1 {
        if let Some(p) = crate::toolchain::find_on_path(cargo) {
            return p;
        }
    }
    cargo.to_path_buf()
}

/// Whether `OFFLOAD_IMAGE_CACHE` leaves the cache on (anything but `0`, `false`, `off`).
pub(crate) fn enabled(value: Option<&str>) -> bool {
    !matches!(value.map(str::trim), Some("0" | "false" | "off"))
}

/// The cache directory of the target dir that holds `out_dir`: the first ancestor with cargo's
/// `CACHEDIR.TAG`, else the parent of the profile directory when `out_dir` has cargo's layout
/// (`<target>/<profile>/build/<pkg>/out`); else none.
pub(crate) fn root(out_dir: &Path) -> Option<PathBuf> {
    let target = match out_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
    {
        Some(tagged) => tagged,
        None => {
            let build = out_dir.ancestors().nth(2)?;
            if build.file_name()? != "build" {
                return None;
            }
            build.parent()?.parent()?
        }
    };
    Some(target.join("offload-image-cache"))
}

/// Hands back images and kernels.
pub(crate) type Hit = (Vec<ImageFile>, Vec<String>);

/// The entry of `key`, copied into `images_dir`, when it is there and every file its dep-info
/// named still has the recorded contents.
pub(crate) fn lookup(root: &Path, key: &Key, images_dir: &Path) -> Option<Hit> {
    let entry = root.join(&key.hex);
    let inputs = fs::read_to_string(entry.join("inputs")).ok()?;
    for line in inputs.lines() {
        let (hash, path) = line.split_once(' ')?;
        if content_hash(Path::new(path)).ok()? != hash {
            return None;
        }
    }
    for line in fs::read_to_string(entry.join("env")).ok()?.lines() {
        let (name, value) = line.split_once(' ')?;
        if env_value(name) != value {
            return None;
        }
    }
    let mut images = Vec::new();
    for line in fs::read_to_string(entry.join("images")).ok()?.lines() {
        let mut fields = line.splitn(3, ' ');
        let (kind, arch, file) = (fields.next()?, fields.next()?, fields.next()?);
        let kind = [
            ImageKind::Cubin,
            ImageKind::Ptx,
            ImageKind::Spirv,
            ImageKind::HsaCodeObject,
        ]
        .into_iter()
        .find(|k| k.name() == kind)?;
        let bytes = fs::read(entry.join(file)).ok()?;
        let path = images_dir.join(file);
        crate::write_if_changed(&path, &bytes);
        images.push(ImageFile {
            kind,
            arch: arch.to_string(),
            path,
        });
    }
    let kernels = fs::read_to_string(entry.join("kernels"))
        .ok()?
        .lines()
        .map(String::from)
        .collect();
    crate::image_cache_budget::touch(&entry);
    Some((images, kernels))
}

/// A variable's value as an entry records it (one line).
fn env_value(name: &str) -> String {
    format!("{:?}", std::env::var_os(name))
}

/// Stores a pass's images under `key`, replacing an entry whose inputs went stale. `inputs`: what
/// to re-check on lookup.
pub(crate) fn store(
    root: &Path,
    key: &Key,
    images: &[ImageFile],
    kernels: &[String],
    inputs: &Inputs,
) -> Result<(), String> {
    let entry = root.join(&key.hex);
    let staging = root.join(format!("{}.{}.tmp", key.hex, std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    fs::create_dir_all(&staging).map_err(|e| io(&staging.display().to_string(), e))?;
    let mut listing = String::new();
    for image in images {
        let file = image
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{}: no file name", image.path.display()))?;
        fs::copy(&image.path, staging.join(file)).map_err(|e| io(file, e))?;
        listing.push_str(&format!("{} {} {file}\n", image.kind.name(), image.arch));
    }
    let mut checked = String::new();
    for input in &inputs.files {
        let hash = content_hash(input).map_err(|e| io(&input.display().to_string(), e))?;
        let path = input
            .to_str()
            .filter(|p| !p.contains('\n'))
            .ok_or_else(|| format!("{}: not a storable path", input.display()))?;
        checked.push_str(&format!("{hash} {path}\n"));
    }
    let env: String = inputs
        .env
        .iter()
        .map(|name| format!("{name} {}\n", env_value(name)))
        .collect();
    let kernels: String = kernels.iter().map(|k| format!("{k}\n")).collect();
    for (name, text) in [
        ("images", &listing),
        ("kernels", &kernels),
        ("inputs", &checked),
        ("env", &env),
        ("key.txt", &key.text),
    ] {
        fs::write(staging.join(name), text).map_err(|e| io(name, e))?;
    }
    // Another build may have stored the same key meanwhile; a stale entry goes.
    let _ = fs::remove_dir_all(&entry);
    if fs::rename(&staging, &entry).is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    crate::image_cache_budget::touch(&entry);
    Ok(())
}

/// What the nested builds read besides the key's inputs.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Inputs {
    /// Files, re-hashed on lookup.
    pub files: Vec<PathBuf>,
    /// Environment variables (`env!`, `option_env!`), compared on lookup.
    pub env: Vec<String>,
}

/// What the nested builds under `target_root` read, from their dep-info: files from cargo's
/// (`<target_root>/<dir>/<triple>/release/*.d`), less those under `generated` (the device crate
/// written from the key's inputs) and `sysroot` (named by the toolchain in the key); variables
/// from rustc's (`release/deps/*.d`, `# env-dep:NAME=value`), less cargo's own `CARGO_*`, which
/// the nested cargo sets from the generated crate.
pub(crate) fn dep_info_inputs(target_root: &Path, generated: &Path, sysroot: &Path) -> Inputs {
    let mut inputs = Inputs::default();
    let dirs = |d: &Path| -> Vec<PathBuf> {
        fs::read_dir(d)
            .map(|it| it.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let dep_infos = |d: &Path| -> Vec<String> {
        dirs(d)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "d"))
            .filter_map(|p| fs::read_to_string(p).ok())
            .collect()
    };
    for build in dirs(target_root) {
        for triple in dirs(&build) {
            let release = triple.join("release");
            for text in dep_infos(&release) {
                for p in parse_dep_info(&text) {
                    if !p.starts_with(generated) && !p.starts_with(sysroot) {
                        inputs.files.push(p);
                    }
                }
            }
            for text in dep_infos(&release.join("deps")) {
                for line in text.lines() {
                    if let Some(dep) = line.strip_prefix("# env-dep:") {
                        let name = dep.split('=').next().unwrap_or(dep);
                        if !name.starts_with("CARGO_") {
                            inputs.env.push(name.to_string());
                        }
                    }
                }
            }
        }
    }
    inputs.files.sort();
    inputs.files.dedup();
    inputs.env.sort();
    inputs.env.dedup();
    inputs
}

/// The prerequisites of a make-style dep-info file (`target: a b\ c`), unescaped.
fn parse_dep_info(text: &str) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    // A backslash ending a line continues it.
    for line in text.replace("\\\n", " ").lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = deps.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => current.extend(chars.next()),
                c if c.is_whitespace() => {
                    if !current.is_empty() {
                        paths.push(PathBuf::from(std::mem::take(&mut current)));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            paths.push(PathBuf::from(current));
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("offload-image-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn key_of(src: &Path, setting: &str) -> Key {
        let mut k = KeyBuilder::new();
        k.value("settings", setting);
        k.path("source", src).unwrap();
        k.finish()
    }

    #[test]
    fn hash_separates_parts() {
        let of = |parts: &[&str]| {
            let mut h = Fnv::new();
            for p in parts {
                h.bytes(p.as_bytes());
            }
            h.hex()
        };
        assert_eq!(of(&["a", "b"]), of(&["a", "b"]));
        assert_ne!(of(&["ab", "c"]), of(&["a", "bc"]));
        assert_eq!(of(&[]).len(), 32);
    }

    #[test]
    fn key_follows_sources_and_settings() {
        let dir = temp("key");
        let src = dir.join("kernels");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("a.rs"), "fn a() {}").unwrap();
        fs::write(src.join("sub/b.rs"), "fn b() {}").unwrap();
        let base = key_of(&src, "sm_90").hex;
        assert_eq!(
            key_of(&src, "sm_90").hex,
            base,
            "unchanged inputs keep the key"
        );
        assert_ne!(key_of(&src, "sm_80").hex, base, "a setting");
        fs::write(src.join("sub/b.rs"), "fn b() { }").unwrap();
        let edited = key_of(&src, "sm_90").hex;
        assert_ne!(edited, base, "a nested file's contents");
        fs::write(src.join("sub/c.rs"), "").unwrap();
        assert_ne!(key_of(&src, "sm_90").hex, edited, "a new file");
        let missing = key_of(&dir.join("nowhere.rs"), "sm_90").hex;
        fs::write(dir.join("nowhere.rs"), "").unwrap();
        assert_ne!(
            key_of(&dir.join("nowhere.rs"), "sm_90").hex,
            missing,
            "a file appearing"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tool_identity_changes_with_the_binary() {
        let dir = temp("tool");
        let tool = dir.join("llc");
        fs::write(&tool, "v1").unwrap();
        let id = |p: Option<&Path>| {
            let mut k = KeyBuilder::new();
            k.tool("llc", p);
            k.finish().hex
        };
        let before = id(Some(&tool));
        assert_eq!(id(Some(&tool)), before);
        fs::write(&tool, "v22").unwrap();
        assert_ne!(id(Some(&tool)), before);
        assert_ne!(id(None), before);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn store_then_hit_then_miss_on_a_changed_input() {
        let dir = temp("entry");
        let (root, built, images_dir) = (dir.join("cache"), dir.join("built"), dir.join("out"));
        fs::create_dir_all(&built).unwrap();
        fs::create_dir_all(&images_dir).unwrap();
        let src = dir.join("kernels.rs");
        fs::write(&src, "kernel").unwrap();
        let included = dir.join("table.bin");
        fs::write(&included, [1u8, 2, 3]).unwrap();
        let ptx = built.join("kernels.sm_90.ptx");
        fs::write(&ptx, ".entry saxpy").unwrap();
        let hsaco = built.join("kernels.gfx942.hsaco");
        fs::write(&hsaco, [0x7fu8, b'E', b'L', b'F']).unwrap();
        let images = vec![
            ImageFile {
                kind: ImageKind::Ptx,
                arch: "sm_90".into(),
                path: ptx,
            },
            ImageFile {
                kind: ImageKind::HsaCodeObject,
                arch: "gfx942".into(),
                path: hsaco,
            },
        ];
        let kernels = vec!["saxpy".to_string()];
        let inputs = Inputs {
            files: vec![included.clone()],
            env: vec!["OFFLOAD_IMAGE_CACHE_TEST_UNSET".to_string()],
        };
        let key = key_of(&src, "sm_90");
        assert!(lookup(&root, &key, &images_dir).is_none(), "empty cache");
        store(&root, &key, &images, &kernels, &inputs).unwrap();

        let (hit, hit_kernels) = lookup(&root, &key, &images_dir).expect("a hit");
        assert_eq!(hit_kernels, kernels);
        assert_eq!(hit.len(), 2);
        assert_eq!(hit[0].kind, ImageKind::Ptx);
        assert_eq!(hit[1].arch, "gfx942");
        assert_eq!(hit[0].path, images_dir.join("kernels.sm_90.ptx"));
        assert_eq!(fs::read(&hit[1].path).unwrap(), [0x7fu8, b'E', b'L', b'F']);

        // A variable the compilation read that now has another value: a miss.
        let env_file = root.join(&key.hex).join("env");
        let recorded = fs::read_to_string(&env_file).unwrap();
        assert_eq!(recorded, "OFFLOAD_IMAGE_CACHE_TEST_UNSET None\n");
        fs::write(&env_file, "OFFLOAD_IMAGE_CACHE_TEST_UNSET Some(\"x\")\n").unwrap();
        assert!(lookup(&root, &key, &images_dir).is_none());
        fs::write(&env_file, recorded).unwrap();
        assert!(lookup(&root, &key, &images_dir).is_some());
        // A changed source is a new key: a miss.
        fs::write(&src, "kernel v2").unwrap();
        assert!(lookup(&root, &key_of(&src, "sm_90"), &images_dir).is_none());
        // A changed file from the dep-info: the old key misses too.
        fs::write(&included, [9u8]).unwrap();
        assert!(lookup(&root, &key, &images_dir).is_none());
        // Storing again replaces the stale entry.
        store(&root, &key, &images, &kernels, &inputs).unwrap();
        assert!(lookup(&root, &key, &images_dir).is_some());
        fs::remove_file(&included).unwrap();
        assert!(
            lookup(&root, &key, &images_dir).is_none(),
            "a vanished input"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dep_info_parsing() {
        let text = "/t/release/k.ptx: /a/src/lib.rs /b/my\\ file.rs \\\n /c/x.rs\n\n/d.rs:\n";
        assert_eq!(
            parse_dep_info(text),
            [
                PathBuf::from("/a/src/lib.rs"),
                PathBuf::from("/b/my file.rs"),
                PathBuf::from("/c/x.rs")
            ]
        );
    }

    #[test]
    fn dep_info_inputs_skip_generated_and_sysroot() {
        let dir = temp("depinfo");
        let release = dir.join("target/sm_90/nvptx64-nvidia-cuda/release");
        fs::create_dir_all(release.join("deps")).unwrap();
        fs::write(
            release.join("deps/k-1.d"),
            "/x/k.rlib: /src/kernels.rs\n\n# env-dep:KERNEL_TABLE=big\n# env-dep:CARGO_PKG_NAME=k\n# env-dep:UNSET_ONE\n",
        )
        .unwrap();
        fs::write(
            release.join("k.d"),
            format!(
                "{0}/k.ptx: {0}/gen/src/lib.rs /src/kernels.rs /sys/lib/core.rs /src/table.bin\n",
                dir.display()
            ),
        )
        .unwrap();
        let inputs = dep_info_inputs(&dir.join("target"), &dir.join("gen"), Path::new("/sys"));
        assert_eq!(
            inputs.files,
            [
                PathBuf::from("/src/kernels.rs"),
                PathBuf::from("/src/table.bin")
            ]
        );
        assert_eq!(inputs.env, ["KERNEL_TABLE", "UNSET_ONE"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn switch_and_root() {
        assert!(enabled(None));
        assert!(enabled(Some("1")));
        assert!(!enabled(Some("0")));
        assert!(!enabled(Some(" off ")));
        assert_eq!(
            root(Path::new("/nonexistent/t/release/build/k-1/out")),
            Some(PathBuf::from("/nonexistent/t/offload-image-cache"))
        );
        assert_eq!(root(Path::new("/nonexistent/t/release/k-1/out")), None);
        assert_eq!(root(Path::new("/out")), None);
    }
}
