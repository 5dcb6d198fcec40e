//! Runs the Python package's pytest suite (`crates/tracekit-py/tests/test_tracekit.py`) from
//! `cargo test`: builds the extension with maturin into a virtual environment under the
//! target directory (`python3 -m venv --system-site-packages`, so that pytest and pyarrow come
//! from the system and nothing is downloaded) and runs pytest against this crate's `tracekit`
//! binary. It lives here, not in `tracekit-py`, for that binary: cargo builds it for this
//! crate's tests with the workspace's features, where a `cargo build -p tracekit` of its own
//! would build every dependency a second time (about 1 GB and minutes on CI). Without python3, maturin, pytest or pyarrow the test prints "skipped"
//! and passes, unless `TRACEKIT_REQUIRE_PYTHON=1` (CI), where it fails instead.

#![allow(clippy::panic, clippy::unwrap_used)] // test code outside #[test] functions

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python package's crate.
fn package() -> PathBuf {
    root().join("crates/tracekit-py")
}

/// The workspace's target directory (shared, so that a rerun builds nothing again).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn works(cmd: &mut Command) -> bool {
    cmd.output().is_ok_and(|o| o.status.success())
}

fn run(what: &str, cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(status.success(), "{what} failed ({status})");
}

#[test]
fn pytest_suite() {
    let required = std::env::var("TRACEKIT_REQUIRE_PYTHON").is_ok_and(|v| v == "1");
    let mut missing = Vec::new();
    if !works(Command::new("python3").arg("--version")) {
        missing.push("python3");
    } else {
        for module in ["pytest", "pyarrow"] {
            if !works(Command::new("python3").args(["-c", &format!("import {module}")])) {
                missing.push(module);
            }
        }
    }
    if !works(Command::new("maturin").arg("--version")) {
        missing.push("maturin");
    }
    if !missing.is_empty() {
        assert!(
            !required,
            "TRACEKIT_REQUIRE_PYTHON=1 but {missing:?} not installed"
        );
        eprintln!(
            "skipped pytest_suite: {missing:?} not installed (set TRACEKIT_REQUIRE_PYTHON=1 to fail instead)"
        );
        return;
    }

    let target = target_dir();
    let venv = target.join("tracekit-py-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        run(
            "python3 -m venv",
            Command::new("python3")
                .args(["-m", "venv", "--system-site-packages"])
                .arg(&venv),
        );
    }
    // A debug build: the suite checks behaviour, not speed. maturin builds the one package
    // `tracekit-py`, whose features differ from the workspace's, so its dependencies are
    // built once more (into the same target directory, where a rerun finds them).
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    run(
        "maturin develop",
        Command::new("maturin")
            .args(["develop", "--quiet"])
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(package()),
    );
    run(
        "pytest",
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(package().join("tests"))
            .env("TRACEKIT_BIN", env!("CARGO_BIN_EXE_tracekit"))
            .current_dir(root()),
    );
}
