//! Keeps `tests/readme.rs` in step with the READMEs: that file holds every ```` ```rust ````
//! block of README.md and of each crate's README.md as a `#[test]` (named `readme_<heading>`
//! and `readme_<crate>_<heading>`), and this test fails when a README changed without it
//! (`TRACE_BLESS=1` rewrites it, as for the golden files).
//!
//! Why a generated test file rather than rustdoc running the README
//! (`#[doc = include_str!("../../../README.md")]`): the examples use `?` and read
//! `testdata/…` relative to the repository root, the way a reader runs them. As doctests
//! they would each need hidden `# ` lines (a trailing `Ok::<(), E>(())` for `?`, a
//! `set_current_dir` because doctests run in `crates/tracekit`), and GitHub shows hidden
//! lines verbatim. Generated tests wrap the blocks in a `Result`-returning function and run
//! from the repository root, so the README stays exactly what a reader copies; the price is
//! this staleness check, which names the command that fixes it.
// Test code: panicking on a failed expectation is the point.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};

/// One ```` ```rust ```` block of the README.
#[derive(Debug, PartialEq)]
struct Block {
    /// Test function name, from the heading the block is under.
    name: String,
    /// The code, with the fence's indentation removed; ends with a newline.
    code: String,
}

/// The ```` ```rust ```` blocks of a Markdown text, in order.
///
/// Refuses what would otherwise be skipped or not run without anyone noticing: fence
/// attributes (`rust,ignore`, `no_run`, …), a `fn main` (it would be defined, not called)
/// and an unterminated fence.
fn rust_blocks(markdown: &str) -> Result<Vec<Block>, String> {
    rust_blocks_named(markdown, "readme", &[])
}

/// [`rust_blocks`] with test names that start with `prefix` and differ from those of
/// `taken` (the blocks of the READMEs before this one).
fn rust_blocks_named(markdown: &str, prefix: &str, taken: &[Block]) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut heading = String::from("top");
    // Inside a fence: its marker (e.g. "```"), its indentation, and the Rust code so far
    // (None for other languages).
    let mut open: Option<(String, String, Option<String>, usize)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim_start();
        if let Some((marker, indent, code, start)) = &mut open {
            let t = trimmed.trim_end();
            if t.len() >= marker.len() && t.chars().all(|c| marker.starts_with(c)) {
                if let Some(code) = code.take() {
                    if code.contains("fn main(") {
                        return Err(format!(
                            "line {start}: a block with `fn main` would not be run; write the \
                             body only (it runs inside a function returning a Result)"
                        ));
                    }
                    let name = unique_name(prefix, &heading, |n| {
                        blocks.iter().chain(taken).any(|b: &Block| b.name == n)
                    });
                    blocks.push(Block { name, code });
                }
                open = None;
            } else if let Some(code) = code {
                code.push_str(line.strip_prefix(indent.as_str()).unwrap_or(trimmed));
                code.push('\n');
            }
            continue;
        }
        let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = fence_char {
            let len = trimmed.chars().take_while(|x| *x == c).count();
            if len >= 3 {
                let (marker, info) = trimmed.split_at(len);
                let info = info.trim();
                let lang = info.split([',', ' ', '{']).next().unwrap_or("");
                let code = if lang == "rust" || lang == "rs" {
                    if info != lang {
                        return Err(format!(
                            "line {number}: ```{info}: only plain ```rust blocks are \
                             supported, every README example is compiled and run"
                        ));
                    }
                    Some(String::new())
                } else {
                    None
                };
                let indent = line[..line.len() - trimmed.len()].to_string();
                open = Some((marker.to_string(), indent, code, number));
                continue;
            }
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            let text = text.trim_start_matches('#');
            if text.starts_with(' ') {
                heading = text.trim().to_string();
            }
        }
    }
    if let Some((_, _, _, start)) = open {
        return Err(format!("line {start}: code block never closed"));
    }
    Ok(blocks)
}

/// `prefix` (`readme`, `readme_<crate>`) plus the heading as an identifier, with `_2`,
/// `_3`, … for later blocks under the same heading. The prefix keeps a name such as `dcfg`
/// from clashing with the crate the block `use`s.
fn unique_name(prefix: &str, heading: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut base = String::from(prefix);
    for word in heading
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        base.push('_');
        base.push_str(&word.to_ascii_lowercase());
    }
    let mut name = base.clone();
    let mut n = 1;
    while taken(&name) {
        n += 1;
        name = format!("{base}_{n}");
    }
    name
}

/// The text of `tests/readme.rs`.
fn render(blocks: &[Block]) -> String {
    let mut out = String::from(
        "// @generated by tests/readme_sync.rs from the READMEs: do not edit.
// Regenerate: TRACE_BLESS=1 cargo test -p tracekit --test readme_sync
//! Every ```rust block of README.md and of each crate's README.md as a test: compiled, then
//! run from the repository root (the READMEs' paths are relative to it) inside a function
//! returning a Result (the examples use `?`). Formatting is the README's own, hence
//! `rustfmt::skip`.
// README examples are written as users would: arithmetic, indexing and unwrap included.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

/// Makes the repository root the current directory. Every test here wants the same
/// directory, so changing it for the whole process is not a race.
fn at_repo_root() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_current_dir(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../..\")).unwrap();
    });
}
",
    );
    for block in blocks {
        out.push_str("\n#[rustfmt::skip]\n#[test]\nfn ");
        out.push_str(&block.name);
        out.push_str("() -> Result<(), Box<dyn std::error::Error>> {\n    at_repo_root();\n");
        for line in block.code.lines() {
            if !line.trim().is_empty() {
                out.push_str("    ");
                out.push_str(line);
            }
            out.push('\n');
        }
        out.push_str("    Ok(())\n}\n");
    }
    out
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Crates whose README has no Rust example: the Python package (its README's example is
/// Python, run by its pytest suite) and the command-line tool (shell lines, run by
/// `tests/readme_shell.rs`).
const NO_RUST_EXAMPLE: &[&str] = &["tracekit", "tracekit-py"];

/// The ```` ```rust ```` blocks of README.md, then of each crate's README.md (crates in name
/// order).
fn all_blocks() -> Vec<Block> {
    let root = manifest_dir().join("../..");
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let mut blocks = rust_blocks(&readme).unwrap_or_else(|e| panic!("README.md {e}"));
    // A README whose examples stopped being ```rust would otherwise pass silently.
    assert!(!blocks.is_empty(), "README.md has no ```rust block");
    let mut crates: Vec<String> = fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|c| root.join("crates").join(c).join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    for c in crates {
        let path = root.join("crates").join(&c).join("README.md");
        let Ok(text) = fs::read_to_string(&path) else {
            panic!("crates/{c}/README.md is missing");
        };
        let prefix = format!("readme_{}", c.replace('-', "_"));
        let more = rust_blocks_named(&text, &prefix, &blocks)
            .unwrap_or_else(|e| panic!("crates/{c}/README.md {e}"));
        let wanted = !NO_RUST_EXAMPLE.contains(&c.as_str());
        assert_eq!(
            !more.is_empty(),
            wanted,
            "crates/{c}/README.md: {}",
            if wanted {
                "no ```rust example"
            } else {
                "a ```rust block where none is expected"
            }
        );
        blocks.extend(more);
    }
    blocks
}

#[test]
fn generated_readme_tests_match_the_readme() {
    let blocks = all_blocks();
    let expected = render(&blocks);
    let path = manifest_dir().join("tests/readme.rs");
    if std::env::var_os("TRACE_BLESS").is_some_and(|v| v == "1") {
        fs::write(&path, &expected).unwrap();
        return;
    }
    // A checkout with CRLF line endings holds the same text.
    let current = fs::read_to_string(&path)
        .unwrap_or_default()
        .replace("\r\n", "\n");
    assert!(
        current == expected,
        "{} does not match the ```rust blocks of the READMEs; regenerate it with\n  \
         TRACE_BLESS=1 cargo test -p tracekit --test readme_sync",
        Path::new("crates/tracekit/tests/readme.rs").display()
    );
}

#[test]
fn only_rust_blocks_are_taken_and_named_after_their_heading() {
    let md = "# Title\n```sh\ncargo test\n```\n## Library use\n### gdb-tfile\n\n```rust\n\
              let a = 1;\n\n    let b = a;\n```\n```text\nx\n```\n```rust\nlet c = 2;\n```\n\
              - item\n  ```rust\n  let d = 3;\n  ```\n~~~rs\nlet e = 4;\n~~~\n";
    let blocks = rust_blocks(md).unwrap();
    let got: Vec<(&str, &str)> = blocks
        .iter()
        .map(|b| (b.name.as_str(), b.code.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("readme_gdb_tfile", "let a = 1;\n\n    let b = a;\n"),
            ("readme_gdb_tfile_2", "let c = 2;\n"),
            ("readme_gdb_tfile_3", "let d = 3;\n"),
            ("readme_gdb_tfile_4", "let e = 4;\n"),
        ]
    );
}

#[test]
fn a_longer_fence_is_not_closed_by_a_shorter_one() {
    let md = "````rust\nlet s = \"```\";\n```\n````\n";
    let blocks = rust_blocks(md).unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].code, "let s = \"```\";\n```\n");
}

#[test]
fn blocks_that_would_escape_the_check_are_refused() {
    for (md, what) in [
        ("text\n```rust,ignore\nx\n```\n", "line 2: ```rust,ignore"),
        ("```rust no_run\nx\n```\n", "line 1: ```rust no_run"),
        (
            "```rust\nfn main() {}\n```\n",
            "line 1: a block with `fn main`",
        ),
        (
            "a\n\n```rust\nlet x = 1;\n",
            "line 3: code block never closed",
        ),
    ] {
        let err = rust_blocks(md).unwrap_err();
        assert!(err.starts_with(what), "{md:?}: {err}");
    }
}

#[test]
fn rendered_tests_wrap_each_block_in_a_result_function() {
    let blocks = [Block {
        name: "readme_x".into(),
        code: "let v = f()?;\n\nprintln!(\"{v}\");\n".into(),
    }];
    let out = render(&blocks);
    assert!(
        out.ends_with(
            "\n#[rustfmt::skip]\n#[test]\nfn readme_x() -> Result<(), Box<dyn std::error::Error>> {\n    \
             at_repo_root();\n    let v = f()?;\n\n    println!(\"{v}\");\n    Ok(())\n}\n"
        ),
        "{out}"
    );
}
