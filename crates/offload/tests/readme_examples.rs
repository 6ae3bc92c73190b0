//! The README's Rust examples are copies of doctests (the `offload` crate's docs, `offload::blas`'s
//! in offload-runtime, `offload-build`'s for build scripts, and the user guide's chapters, which
//! lib.rs includes as doctests), which compile and run: each of their lines must be a visible line
//! of some doctest, so renaming a method without updating the copies (or the other way round)
//! fails here or in the doctests. Every chapter of the guide (docs/guide/SUMMARY.md) must be one
//! of those doctest modules, no rustdoc or guide example is `ignore`d, and the relative links of
//! the README, the guide and docs/*.md lead to files and headings that exist.

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
    for chapter in guide_chapters(&root) {
        doctests.extend(visible_doctest_lines(&read(&format!(
            "docs/guide/{chapter}"
        ))));
    }
    for file in [
        "crates/offload/src/lib.rs",
        "crates/offload-runtime/src/api/blas.rs",
        "crates/offload-build/src/lib.rs",
    ] {
        doctests.extend(visible_doctest_lines(&doc_comments(&read(file))));
    }
    let readme = read("README.md");
    let examples = blocks(&readme, compiled_rust);
    assert!(
        examples.len() >= 3,
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
         docs/guide, offload's lib.rs, offload::blas, offload-build's docs):\n{}",
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

/// The chapter files that docs/guide/SUMMARY.md links to, in its order.
fn guide_chapters(root: &Path) -> Vec<String> {
    let summary = std::fs::read_to_string(root.join("docs/guide/SUMMARY.md")).unwrap();
    links(&summary)
        .into_iter()
        .filter(|l| l.ends_with(".md"))
        .collect()
}

/// The targets of the markdown links and images in `text` (`[..](target)`), outside code.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Leave out inline code spans, whose brackets are not links.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            found.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    found
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of markdown `text`.
fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            !in_code && l.starts_with('#')
        })
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_guide_chapter_is_a_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let chapters = guide_chapters(&root);
    assert!(
        chapters.len() >= 9,
        "docs/guide/SUMMARY.md lists too few chapters: {chapters:?}"
    );
    let lib = std::fs::read_to_string(root.join("crates/offload/src/lib.rs")).unwrap();
    let mut problems = Vec::new();
    for chapter in &chapters {
        let include = format!("include_str!(\"../../../docs/guide/{chapter}\")");
        if !lib.contains(&include) {
            problems.push(format!(
                "{chapter}: not a doctest module in crates/offload/src/lib.rs"
            ));
        }
    }
    let mut rust_blocks = 0;
    for entry in std::fs::read_dir(root.join("docs/guide")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".md") || name == "SUMMARY.md" {
            continue;
        }
        if !chapters.contains(&name) {
            problems.push(format!("{name}: not in docs/guide/SUMMARY.md"));
        }
        let text = std::fs::read_to_string(root.join("docs/guide").join(&name)).unwrap();
        rust_blocks += blocks(&text, compiled_rust).len();
        let untested = blocks(&text, |info| {
            info.split(',').any(|t| t.trim() == "rust") && !compiled_rust(info)
        });
        if !untested.is_empty() {
            problems.push(format!(
                "{name}: {} Rust example(s) that rustdoc would not run",
                untested.len()
            ));
        }
    }
    assert!(
        rust_blocks >= 30,
        "the guide's Rust examples were not found ({rust_blocks})"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn relative_links_of_the_docs_lead_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "docs/guide"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                let heads = anchors(&std::fs::read_to_string(&target).unwrap_or_default());
                if !heads.iter().any(|h| h == fragment) {
                    broken.push(format!("{}: {link} (no such heading)", file.display()));
                }
            }
        }
    }
    assert!(files.len() >= 10, "the docs were not found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_github_s() {
    assert_eq!(
        anchor(" Element-wise, 16 bytes at a time"),
        "element-wise-16-bytes-at-a-time"
    );
    assert_eq!(anchor(" `cargo offload`"), "cargo-offload");
    assert_eq!(
        links("see [a](b.md#c) and `[x](y)`\n```\n[p](q)\n```\n![i](j.png)"),
        ["b.md#c", "j.png"]
    );
}
