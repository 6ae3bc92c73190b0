//! Built OpenCL programs kept on disk between processes. A driver compiles a SPIR-V image at
//! every load (Intel's CPU runtime takes tens of seconds for a large one, in every process that
//! loads it), so the binary it built is kept in `~/.cache/offload/opencl/`
//! (`OFFLOAD_OPENCL_CACHE`: another directory, or `0` for none), named by a hash of the image,
//! the build options, and the device and driver that built it. A later load hands the binary
//! to the driver instead. An entry that does not check out (its length or checksum), or that the
//! driver refuses, is rebuilt from the SPIR-V and replaced: the cache can only save time.

use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

/// An entry's first bytes: what it is and its layout's version.
const MAGIC: &[u8; 8] = b"offcl\0\0\x01";

/// Where the cache lives: `OFFLOAD_OPENCL_CACHE`, else `$XDG_CACHE_HOME/offload/opencl`, else
/// `$HOME/.cache/offload/opencl`; `None` when it is turned off (`0`) or there is no home.
pub fn directory() -> Option<PathBuf> {
    match std::env::var_os("OFFLOAD_OPENCL_CACHE") {
        Some(v) if v == "0" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(base.join("offload").join("opencl"))
        }
    }
}

/// One image's entry: built by `device` (its name, version and driver) with `options`.
pub struct Entry {
    path: PathBuf,
}

impl Entry {
    /// The entry of `spirv` built with `options` by the device `device` names, in `dir`.
    pub fn new(dir: &Path, spirv: &[u8], options: &str, device: &str) -> Entry {
        let mut h = DefaultHasher::new();
        (spirv, options, device).hash(&mut h);
        Entry {
            path: dir.join(format!("{:016x}-{}.bin", h.finish(), spirv.len())),
        }
    }

    /// The binary kept for this image, if there is one that checks out.
    pub fn read(&self) -> Option<Vec<u8>> {
        let bytes = fs::read(&self.path).ok()?;
        let body = bytes.strip_prefix(MAGIC.as_slice())?;
        let (header, binary) = body.split_at_checked(16)?;
        let (len, sum) = header.split_at(8);
        let len = u64::from_le_bytes(len.try_into().ok()?);
        let sum = u64::from_le_bytes(sum.try_into().ok()?);
        (len == binary.len() as u64 && sum == checksum(binary)).then(|| binary.to_vec())
    }

    /// Keep `binary` for this image: written beside the entry, then renamed over it, so a reader
    /// in another process sees the old entry or the new one, never a part.
    pub fn write(&self, binary: &[u8]) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir)?;
        let mut bytes = Vec::with_capacity(MAGIC.len() + 16 + binary.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(binary.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&checksum(binary).to_le_bytes());
        bytes.extend_from_slice(binary);
        let partial = self
            .path
            .with_extension(format!("{}.partial", std::process::id()));
        fs::write(&partial, &bytes)?;
        fs::rename(&partial, &self.path).inspect_err(|_| {
            let _ = fs::remove_file(&partial);
        })
    }

    /// Where the entry is (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// FNV-1a over 64 bits: catches a truncated or damaged entry.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "offload-opencl-cache-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_entry_gives_back_what_was_kept_and_nothing_for_another_image_or_device() {
        let dir = scratch_dir("round-trip");
        let entry = Entry::new(&dir, b"spirv one", "-O", "CPU 1.0 driver 7");
        assert_eq!(entry.read(), None, "nothing kept yet");
        entry.write(b"binary one").unwrap();
        assert_eq!(entry.read().as_deref(), Some(&b"binary one"[..]));
        for other in [
            Entry::new(&dir, b"spirv two", "-O", "CPU 1.0 driver 7"),
            Entry::new(&dir, b"spirv one", "", "CPU 1.0 driver 7"),
            Entry::new(&dir, b"spirv one", "-O", "CPU 1.0 driver 8"),
        ] {
            assert_ne!(other.path(), entry.path());
            assert_eq!(other.read(), None);
        }
        // Replaced whole, with nothing left beside it.
        entry.write(b"binary two").unwrap();
        assert_eq!(entry.read().as_deref(), Some(&b"binary two"[..]));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_or_damaged_entry_reads_as_none() {
        let dir = scratch_dir("damaged");
        let entry = Entry::new(&dir, b"spirv", "", "device");
        entry.write(&[7u8; 100]).unwrap();
        let whole = fs::read(entry.path()).unwrap();
        fs::write(entry.path(), &whole[..whole.len() - 1]).unwrap();
        assert_eq!(entry.read(), None, "truncated");
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 1;
        fs::write(entry.path(), &flipped).unwrap();
        assert_eq!(entry.read(), None, "a changed byte");
        fs::write(entry.path(), b"not an entry").unwrap();
        assert_eq!(entry.read(), None, "no header");
        fs::remove_dir_all(&dir).unwrap();
    }
}
