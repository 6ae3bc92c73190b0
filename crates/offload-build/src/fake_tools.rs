//! Stand-in LLVM tools for the link scripts' tests: each records its name and arguments in a
//! shared log (paths in a script's work directory written `W/<name>`) and creates its `-o`
//! output, so that a test checks a script's pipeline without LLVM.

use crate::make_executable;
use crate::sh_quote::sh_quote;
use std::path::PathBuf;

/// A scratch directory of stand-in tools and their log, removed when dropped.
pub(crate) struct FakeTools {
    pub(crate) dir: PathBuf,
    log: PathBuf,
}

impl FakeTools {
    /// An empty directory named after `test` (and this process, so that test runs do not meet).
    pub(crate) fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        FakeTools { dir, log }
    }

    /// A tool that logs its calls as `name`.
    pub(crate) fn tool(&self, name: &str) -> PathBuf {
        let body = format!(
            "#!/bin/sh\nprintf '{name}' >> {log}\nfor a in \"$@\"; do case $a in /tmp/offload-link.*/*) a=\"W/${{a##*/}}\";; esac; printf ' %s' \"$a\" >> {log}; done\necho >> {log}\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && : > \"$2\"; shift; done\n",
            log = sh_quote(self.log.to_str().unwrap()),
        );
        self.executable(name, &body)
    }

    /// `text` as the executable file `name` in the directory.
    pub(crate) fn executable(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        make_executable(&path);
        path
    }

    /// The tools' calls so far, a line each.
    pub(crate) fn calls(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap();
        log.lines().map(str::to_string).collect()
    }
}

impl Drop for FakeTools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
