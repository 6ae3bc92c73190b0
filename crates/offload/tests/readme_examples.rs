//! The README's Rust examples, and the few rustdoc examples that cannot compile where they are
//! (`ignore`: the `offload!` macro's docs in offload-macros, `region`'s in offload-runtime), are
//! copies of doctests (the `offload` crate's docs, and `offload-build`'s for build scripts), which
//! compile and run: each of their lines must be a visible line of some doctest, so renaming a
//! method without updating the copies (or the other way round) fails here or in the doctests.

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
fn every_readme_and_ignored_example_line_is_in_a_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let mut doctests = visible_doctest_lines(&read("crates/offload/src/crate_docs.md"));
    doctests.extend(visible_doctest_lines(&doc_comments(&read(
        "crates/offload-build/src/lib.rs",
    ))));
    let readme = read("README.md");
    let mut examples = blocks(&readme, compiled_rust);
    assert!(
        examples.len() >= 10,
        "the README's Rust examples were not found"
    );
    for file in [
        "crates/offload-macros/src/lib.rs",
        "crates/offload-runtime/src/region.rs",
    ] {
        let ignored = blocks(&doc_comments(&read(file)), |info| info == "ignore");
        assert!(!ignored.is_empty(), "no `ignore` example left in {file}");
        examples.extend(ignored);
    }
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
        "example lines (README, `ignore` rustdoc examples) found in no doctest \
         (crates/offload/src/crate_docs.md, offload-build's docs):\n{}",
        missing.join("\n")
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
