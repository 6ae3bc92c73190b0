//! Keeping the image cache under a size budget: without it every change to a kernel source adds
//! an entry (about 2 MB with AMD images) that nothing removes until `cargo clean`. After each
//! store, the entries used least recently go until the rest fits `OFFLOAD_IMAGE_CACHE_MB`
//! (default 1024); the entry just stored always stays. An entry's last use is the modification
//! time of its `used` file, which a store and every hit rewrite.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file whose modification time says when an entry was last stored or hit.
pub(crate) const USED: &str = "used";

/// Default budget in MiB.
const DEFAULT_MB: u64 = 1024;

/// A staging directory this old belongs to a build that died before renaming it.
const ABANDONED: Duration = Duration::from_secs(3600);

/// The budget in bytes from `OFFLOAD_IMAGE_CACHE_MB`'s value, or why it is not a number.
pub(crate) fn budget(value: Option<&str>) -> Result<u64, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(DEFAULT_MB << 20),
        Some(v) => v
            .parse::<u64>()
            .map(|mb| mb << 20)
            .map_err(|_| format!("OFFLOAD_IMAGE_CACHE_MB={v:?} is not a whole number of MiB")),
    }
}

/// Mark the entry at `entry` as used now.
pub(crate) fn touch(entry: &Path) {
    let _ = fs::write(entry.join(USED), "");
}

struct Entry {
    path: PathBuf,
    bytes: u64,
    used: SystemTime,
}

fn size_of(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Remove the least recently used entries of `root` until the others fit in `budget` bytes,
/// never `keep` (an entry's directory name), and staging directories abandoned an hour ago.
/// Returns the names of the entries removed. Errors are ignored: a build that reads an entry
/// while it goes misses and builds its images itself.
pub(crate) fn prune(root: &Path, budget: u64, keep: &str) -> Vec<String> {
    let now = SystemTime::now();
    let mut entries = Vec::new();
    for dir in fs::read_dir(root).into_iter().flatten().flatten() {
        let path = dir.path();
        let name = dir.file_name().to_string_lossy().into_owned();
        let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
        if name.ends_with(".tmp") {
            let age = modified(&path).and_then(|m| now.duration_since(m).ok());
            if age.is_some_and(|a| a > ABANDONED) {
                let _ = fs::remove_dir_all(&path);
            }
            continue;
        }
        if !path.is_dir() {
            continue;
        }
        let used = modified(&path.join(USED))
            .or_else(|| modified(&path))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        entries.push(Entry {
            bytes: size_of(&path),
            path,
            used,
        });
    }
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    entries.sort_by_key(|e| e.used);
    let mut removed = Vec::new();
    for e in entries {
        if total <= budget {
            break;
        }
        let name = e
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name == keep {
            continue;
        }
        if fs::remove_dir_all(&e.path).is_ok() {
            total -= e.bytes;
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(root: &Path, name: &str, bytes: usize, used_secs_ago: u64) {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("image"), vec![0u8; bytes]).unwrap();
        touch(&dir);
        let when = SystemTime::now() - Duration::from_secs(used_secs_ago);
        fs::File::options()
            .write(true)
            .open(dir.join(USED))
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn least_recently_used_go_first_and_the_new_entry_stays() {
        let root =
            std::env::temp_dir().join(format!("offload-cache-budget-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        entry(&root, "old", 1000, 300);
        entry(&root, "middle", 1000, 200);
        entry(&root, "recent", 1000, 100);
        entry(&root, "new", 1500, 400);
        // Under the budget: nothing goes.
        assert!(prune(&root, 10_000, "new").is_empty());
        // 4500 bytes in all, 2600 allowed: "new" is the oldest but is kept; then "old",
        // "middle" go, which leaves 2500.
        assert_eq!(prune(&root, 2600, "new"), ["old", "middle"]);
        assert!(root.join("recent").is_dir() && root.join("new").is_dir());
        // Even a budget of 0 keeps the entry just stored.
        assert_eq!(prune(&root, 0, "new"), ["recent"]);
        assert!(root.join("new").is_dir());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn abandoned_staging_directories_go() {
        let root =
            std::env::temp_dir().join(format!("offload-cache-staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let (stale, live) = (root.join("k.1.tmp"), root.join("k.2.tmp"));
        fs::create_dir_all(&stale).unwrap();
        fs::create_dir_all(&live).unwrap();
        let old = SystemTime::now() - Duration::from_secs(7200);
        fs::File::open(&stale).unwrap().set_modified(old).unwrap();
        prune(&root, u64::MAX, "");
        assert!(!stale.exists(), "abandoned two hours ago");
        assert!(live.exists(), "another build's, in progress");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn budget_from_the_variable() {
        assert_eq!(budget(None), Ok(1024 << 20));
        assert_eq!(budget(Some(" 64 ")), Ok(64 << 20));
        assert!(budget(Some("1G"))
            .unwrap_err()
            .contains("whole number of MiB"));
    }
}
