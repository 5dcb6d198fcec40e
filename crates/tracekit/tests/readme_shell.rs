//! Every shell line of README.md and of each crate's README runs as written: from the root
//! of a temporary copy of `testdata/`, with the built `tracekit` first on `PATH` (as after
//! the Quick start's `cargo install`), checking its exit code. The lines of one README run
//! in order in one folder, so a line may read what an earlier one wrote (`bbv` then
//! `simpoint`); each README gets a fresh copy.
//!
//! What a README may say to this test:
//!
//! - ```` ```sh ```` (or `shell`, `bash`) blocks are run, one command per line; empty lines
//!   and `#` comment lines are skipped. Other blocks (`text`, `rust`, `python`, `sql`) are
//!   not shell lines: the Rust ones are tests of their own (`tests/readme.rs`), the Python
//!   and SQL ones are run by the pytest suite and `tests/sql.rs`.
//! - A line expected to fail says so in its comment: `# exit 1: the runs differ` expects 1.
//!   Every other line must exit 0.
//! - An HTML comment on the line just before a block's fence:
//!   - `<!-- readme-test: needs NAME -->`: the block needs a tool, one of [`NEEDS`]
//!     (`gdb`; `duckdb`, the Python module; `ptrace`, for `tracekit record`). Without it the block is skipped with a note,
//!     or the test fails when the tool's `TRACEKIT_REQUIRE_*` variable is 1 (CI sets them
//!     and installs the tools, see `.ci/run`).
//!   - `<!-- readme-test: not run: REASON -->`: the block is not run; the reason is
//!     required. For what cannot run in a test: the build and test commands themselves,
//!     a server that runs until Ctrl-C and requests to it, installs.
//!
//! Lines run under `bash -o pipefail`, so a failing command before a pipe is caught; each
//! has two minutes.
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
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// README.md's length limit: the front door stays short; reference goes to the crates'
/// READMEs and docs/.
const README_MAX_LINES: usize = 350;

/// How long one line may run.
const LINE_TIMEOUT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What the marker before a block says.
#[derive(Debug, Clone, PartialEq)]
enum Mode {
    Run,
    Needs(String),
    NotRun(String),
}

/// One shell line of a README.
#[derive(Debug, PartialEq)]
struct Line {
    /// 1-based line number in the README.
    number: usize,
    command: String,
    /// The exit code the line's `# exit N` comment expects, else 0.
    exit: i32,
    mode: Mode,
}

/// The marker of an HTML comment line, if it is one of this test's.
fn marker(line: &str, number: usize) -> Result<Option<Mode>, String> {
    let Some(body) = line
        .trim()
        .strip_prefix("<!--")
        .and_then(|l| l.strip_suffix("-->"))
    else {
        return Ok(None);
    };
    let Some(rest) = body.trim().strip_prefix("readme-test:") else {
        return Ok(None);
    };
    let rest = rest.trim();
    if let Some(need) = rest.strip_prefix("needs ") {
        return Ok(Some(Mode::Needs(need.trim().to_owned())));
    }
    if let Some(reason) = rest.strip_prefix("not run:").map(str::trim)
        && !reason.is_empty()
    {
        return Ok(Some(Mode::NotRun(reason.to_owned())));
    }
    Err(format!(
        "line {number}: unknown marker {rest:?}; expected `needs NAME` or `not run: REASON`"
    ))
}

/// The expected exit code from a `# exit N` in the line's comment.
fn expected_exit(command: &str) -> i32 {
    command
        .split_once(" # exit ")
        .and_then(|(_, rest)| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

/// The shell lines of a Markdown text, in order.
fn shell_lines(markdown: &str) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    // Inside a fence: its marker, whether it is a shell block, and its mode.
    let mut open: Option<(String, bool, Mode, usize)> = None;
    let mut previous = "";
    for (i, line) in markdown.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim();
        if let Some((fence, shell, mode, _)) = &open {
            if trimmed.len() >= fence.len() && trimmed.chars().all(|c| fence.starts_with(c)) {
                open = None;
            } else if *shell && !trimmed.is_empty() && !trimmed.starts_with('#') {
                if trimmed.ends_with('\\') {
                    return Err(format!(
                        "line {number}: one command per line, no `\\` continuations"
                    ));
                }
                lines.push(Line {
                    number,
                    command: trimmed.to_owned(),
                    exit: expected_exit(trimmed),
                    mode: mode.clone(),
                });
            }
            previous = line;
            continue;
        }
        if let Some(c) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') {
            let len = trimmed.chars().take_while(|x| *x == c).count();
            if len >= 3 {
                let (fence, info) = trimmed.split_at(len);
                let lang = info.trim().split([',', ' ']).next().unwrap_or("");
                let shell = matches!(lang, "sh" | "shell" | "bash");
                let mode = marker(previous, number - 1)?.unwrap_or(Mode::Run);
                if !shell && mode != Mode::Run {
                    return Err(format!(
                        "line {number}: a readme-test marker before a ```{lang} block"
                    ));
                }
                open = Some((fence.to_owned(), shell, mode, number));
                previous = line;
                continue;
            }
        }
        // A marker must be followed by its block at once.
        if marker(previous, number - 1)?.is_some() {
            return Err(format!(
                "line {}: a readme-test marker not followed by a code block",
                number - 1
            ));
        }
        previous = line;
    }
    if let Some((_, _, _, start)) = open {
        return Err(format!("line {start}: code block never closed"));
    }
    Ok(lines)
}

/// README.md, then every crate's README, relative to the repository root.
fn readmes() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("README.md")];
    let mut crates: Vec<PathBuf> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    for c in crates {
        let name = c.file_name().unwrap().to_owned();
        v.push(Path::new("crates").join(name).join("README.md"));
    }
    v
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A fresh temporary folder with a copy of `testdata/`, removed when dropped.
struct Workdir(PathBuf);

impl Workdir {
    fn new(name: &str) -> Workdir {
        let dir = std::env::temp_dir().join(format!(
            "tracekit-readme-{}-{}",
            std::process::id(),
            name.replace(['/', '.'], "_")
        ));
        let _ = fs::remove_dir_all(&dir);
        copy_dir(&root().join("testdata"), &dir.join("testdata"));
        Workdir(dir)
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// What `<!-- readme-test: needs NAME -->` may name: the command that shows it is there,
/// and the variable under which its absence is a failure (`.ci/run` sets them all and
/// installs what they need).
const NEEDS: &[(&str, &[&str], &str)] = &[
    ("gdb", &["gdb", "--version"], "TRACEKIT_REQUIRE_GDB"),
    (
        "duckdb",
        &["python3", "-c", "import duckdb"],
        "TRACEKIT_REQUIRE_DUCKDB",
    ),
    // `tracekit record`: Linux x86-64 with ptrace allowed (Yama's scope 3 forbids it).
    (
        "ptrace",
        &[
            "sh",
            "-c",
            "[ \"$(uname -sm)\" = 'Linux x86_64' ] && ! grep -qx 3 /proc/sys/kernel/yama/ptrace_scope 2>/dev/null",
        ],
        "TRACEKIT_REQUIRE_PTRACE",
    ),
];

/// Whether what a block needs is installed; skips it with a note (false), or panics when
/// its `TRACEKIT_REQUIRE_*` variable is 1.
fn available(need: &str, what: &str) -> bool {
    let Some((_, probe, var)) = NEEDS.iter().find(|(name, _, _)| *name == need) else {
        panic!(
            "{what}: `needs {need}`: unknown; known: {}",
            NEEDS.iter().map(|n| n.0).collect::<Vec<_>>().join(", ")
        );
    };
    let found = Command::new(probe[0])
        .args(&probe[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    if std::env::var_os(var).is_some_and(|v| v == "1") {
        panic!("{what}: {need} is not installed and {var}=1");
    }
    eprintln!("skipped {what}: {need} is not installed (set {var}=1 to fail instead)");
    false
}

/// Runs `command` in `dir`; its exit code (None on a timeout) and its output.
fn run(dir: &Path, path_var: &std::ffi::OsStr, command: &str) -> (Option<i32>, String) {
    let out_path = dir.join(".readme-test-output");
    let out = fs::File::create(&out_path).unwrap();
    let mut child = Command::new("bash")
        .args(["-o", "pipefail", "-c", command])
        .current_dir(dir)
        .env("PATH", path_var)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > LINE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = fs::read_to_string(&out_path).unwrap_or_default();
    let _ = fs::remove_file(&out_path);
    (status.and_then(|s| s.code()), output)
}

#[test]
fn every_shell_line_of_the_readmes_runs() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tracekit"));
    let mut path_var = std::ffi::OsString::from(bin.parent().unwrap());
    if let Some(p) = std::env::var_os("PATH") {
        path_var.push(":");
        path_var.push(p);
    }
    let mut failures = Vec::new();
    let (mut ran, mut not_run) = (0, 0);
    for readme in readmes() {
        let text = fs::read_to_string(root().join(&readme))
            .unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
        let lines = shell_lines(&text).unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
        let work = Workdir::new(&readme.to_string_lossy());
        for line in lines {
            let what = format!("{}:{}", readme.display(), line.number);
            match &line.mode {
                Mode::NotRun(_) => {
                    not_run += 1;
                    continue;
                }
                Mode::Needs(need) if !available(need, &what) => continue,
                _ => {}
            }
            ran += 1;
            let (code, output) = run(&work.0, &path_var, &line.command);
            if code != Some(line.exit) {
                failures.push(format!(
                    "{what}: `{}` exited {code:?}, expected {}:\n{output}",
                    line.command, line.exit
                ));
            }
        }
    }
    eprintln!("ran {ran} README shell lines ({not_run} marked not run)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(ran > 0, "no shell line ran");
}

/// The front door stays short, and every crate has a README that cargo shows.
#[test]
fn readme_is_short_and_every_crate_has_its_readme() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines, at most {README_MAX_LINES}: move reference to a crate's README or docs/"
    );
    for path in readmes().into_iter().skip(1) {
        let dir = root().join(path.parent().unwrap());
        assert!(root().join(&path).is_file(), "{} missing", path.display());
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            manifest
                .lines()
                .any(|l| l.trim() == "readme = \"README.md\""),
            "{}: no `readme = \"README.md\"`",
            dir.join("Cargo.toml").display()
        );
    }
}

#[test]
fn shell_lines_markers_and_exit_codes_are_parsed() {
    let md = "# T\n```sh\n# a comment\ntracekit info x   # summary\n\n\
              tracekit diff a b   # exit 1: they differ\n```\n```text\nnot a line\n```\n\
              <!-- readme-test: needs duckdb -->\n```sh\nduckdb -c 'select 1'\n```\n\
              <!-- readme-test: not run: the build itself -->\n```bash\ncargo test\n```\n";
    let got = shell_lines(md).unwrap();
    let want = [
        (4, "tracekit info x   # summary", 0, Mode::Run),
        (6, "tracekit diff a b   # exit 1: they differ", 1, Mode::Run),
        (
            13,
            "duckdb -c 'select 1'",
            0,
            Mode::Needs("duckdb".to_owned()),
        ),
        (
            17,
            "cargo test",
            0,
            Mode::NotRun("the build itself".to_owned()),
        ),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, (number, command, exit, mode)) in got.iter().zip(want) {
        assert_eq!(
            (g.number, g.command.as_str(), g.exit, &g.mode),
            (number, command, exit, &mode)
        );
    }
}

#[test]
fn bad_markers_are_refused() {
    for (md, what) in [
        (
            "<!-- readme-test: not run: -->\n```sh\nx\n```\n",
            "line 1: unknown marker",
        ),
        (
            "<!-- readme-test: skip -->\n```sh\nx\n```\n",
            "line 1: unknown marker",
        ),
        (
            "<!-- readme-test: needs duckdb -->\n\n```sh\nx\n```\n",
            "line 1: a readme-test marker not followed",
        ),
        (
            "<!-- readme-test: needs duckdb -->\n```sql\nx\n```\n",
            "line 2: a readme-test marker before",
        ),
        (
            "```sh\ntracekit a \\\n  b\n```\n",
            "line 2: one command per line",
        ),
        ("```sh\nx\n", "line 1: code block never closed"),
    ] {
        let err = shell_lines(md).unwrap_err();
        assert!(err.starts_with(what), "{md:?}: {err}");
    }
}
