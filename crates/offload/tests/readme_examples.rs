//! The README's Rust examples are copies of doctests (the `offload` crate's docs, `offload::blas`'s
//! in offload-runtime, and `offload-build`'s for build scripts), which compile and run: each of
//! their lines must be a visible line of some doctest, so renaming a method without updating the
//! copies (or the other way round) fails here or in the doctests. No rustdoc example of the
//! crates is `ignore`d.

use std::path::Path;

/// The code blocks of markdown `text` whose info string `wanted` accepts.
fn blocks(text: &str, wanted: fn(&str) -> bool) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None if wanted(info) => current = Some(Vec::new()),
                // A block of another language: skip to its end.
                None => current = Some(vec!["\u{0}skip".to_string()]),
            }
            continue;
        }
        if let Some(block) = current.as_mut() {
            block.push(line.to_string());
        }
    }
    blocks.retain(|b| b.first().map(String::as_str) != Some("\u{0}skip"));
    blocks
}

/// Whether a code block with this info string is Rust that rustdoc compiles.
fn compiled_rust(info: &str) -> bool {
    info.split(',')
        .map(str::trim)
        .all(|t| matches!(t, "" | "rust" | "no_run" | "should_panic") || t.starts_with("edition"))
}

/// The markdown inside the doc comments (`//!`, `///`) of Rust source `text`.
fn doc_comments(text: &str) -> String {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let doc = l.strip_prefix("//!").or_else(|| l.strip_prefix("///"))?;
            Some(doc.strip_prefix(' ').unwrap_or(doc))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Doctest lines as rendered (hidden `# ` lines left out), trimmed.
fn visible_doctest_lines(markdown: &str) -> Vec<String> {
    blocks(markdown, compiled_rust)
        .into_iter()
        .flatten()
        .filter(|l| {
            let t = l.trim_start();
            !(t == "#" || t.starts_with("# "))
        })
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn every_readme_example_line_is_in_a_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let mut doctests = visible_doctest_lines(&read("crates/offload/src/crate_docs.md"));
    for file in [
        "crates/offload/src/lib.rs",
        "crates/offload-runtime/src/blas.rs",
        "crates/offload-build/src/lib.rs",
    ] {
        doctests.extend(visible_doctest_lines(&doc_comments(&read(file))));
    }
    let readme = read("README.md");
    let examples = blocks(&readme, compiled_rust);
    assert!(
        examples.len() >= 10,
        "the README's Rust examples were not found"
    );
    let mut missing = Vec::new();
    for block in &examples {
        for line in block.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            if !doctests.iter().any(|d| d == line) {
                missing.push(line.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README example lines found in no doctest (crates/offload/src/crate_docs.md, \
         offload's lib.rs, offload::blas, offload-build's docs):\n{}",
        missing.join("\n")
    );
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_rustdoc_example_of_the_crates_is_ignored() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in [
        "offload",
        "offload-kernel",
        "offload-runtime",
        "offload-macros",
    ] {
        rust_files(&crates.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 20, "the crates' sources were not found");
    let mut ignored = Vec::new();
    for file in &files {
        let docs = doc_comments(&std::fs::read_to_string(file).unwrap());
        if !blocks(&docs, |info| info.split(',').any(|t| t.trim() == "ignore")).is_empty() {
            ignored.push(file.display().to_string());
        }
    }
    let crate_docs = std::fs::read_to_string(crates.join("offload/src/crate_docs.md")).unwrap();
    if !blocks(&crate_docs, |info| {
        info.split(',').any(|t| t.trim() == "ignore")
    })
    .is_empty()
    {
        ignored.push("crates/offload/src/crate_docs.md".to_string());
    }
    assert!(
        ignored.is_empty(),
        "`ignore`d rustdoc examples in: {}",
        ignored.join(", ")
    );
}

#[test]
fn the_check_sees_a_renamed_method() {
    let doctests =
        visible_doctest_lines("```\nlet s = Launch::dynamic_shared(64);\n# hidden();\n```\n");
    assert_eq!(doctests, ["let s = Launch::dynamic_shared(64);"]);
    let readme = blocks(
        "```rust\nlet s = Launch::shared_mem(64);\n```\n```text\nlet z;\n```\n",
        compiled_rust,
    );
    assert_eq!(
        readme,
        [vec!["let s = Launch::shared_mem(64);".to_string()]]
    );
    assert!(!doctests.contains(&readme[0][0]));
}
