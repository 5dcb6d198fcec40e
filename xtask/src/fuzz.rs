//! `cargo xtask fuzz [TARGET…] [--secs N] [--no-asan] [--dev]`: runs the cargo-fuzz targets of
//! `fuzz/` (installing cargo-fuzz if missing), with nightly and AddressSanitizer when nightly is
//! installed (unless `--no-asan`: a quicker build, as CI's smoke run uses, since
//! `unsafe_code` is forbidden), else on stable with `--sanitizer none`. `--dev` builds the
//! targets without optimisation (cargo-fuzz otherwise builds with one codegen unit, the
//! slowest step of CI on two cores): fewer runs per second, fine for a smoke run. Crashes found are copied to `testdata/fuzz-crashes/TARGET/`,
//! which the tracekit tests replay.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Flags, root, run};

/// The targets declared in `fuzz/Cargo.toml`.
pub fn targets() -> Result<Vec<String>, String> {
    let manifest = std::fs::read_to_string(root().join("fuzz/Cargo.toml"))
        .map_err(|e| format!("fuzz/Cargo.toml: {e}"))?;
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(v) = line.strip_prefix("name") {
            let v = v
                .trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches('"');
            names.push(v.to_owned());
        }
    }
    Ok(names)
}

/// The fixture folders of the formats `cli_any` detects.
const FORMAT_FIXTURES: &[&str] = &[
    "testdata/x64dbg",
    "testdata/gdb-tfile",
    "testdata/dcfg-trace",
    "testdata/dcfg",
    "testdata/amber",
    "testdata/tenet",
];

/// The committed inputs that seed a target's corpus: the fixtures of its format, or inputs
/// made for a target whose bytes are not a file format (`testdata/fuzz-seeds/TARGET`; see
/// docs/fuzzing.md). The first prefix that matches counts.
fn seed_dirs(target: &str) -> Vec<&'static str> {
    const SEEDS: &[(&str, &[&str])] = &[
        ("x64dbg", &["testdata/x64dbg"]),
        ("tfile", &["testdata/gdb-tfile"]),
        // Edge sequences of the fixtures, each with its dictionary.
        (
            "dcfg_trace_expand",
            &["testdata/fuzz-seeds/dcfg_trace_expand"],
        ),
        ("dcfg_trace", &["testdata/dcfg-trace"]),
        ("dcfg", &["testdata/dcfg"]),
        ("amber", &["testdata/amber"]),
        ("tenet", &["testdata/tenet"]),
        // Sidecar indexes of fixtures above (`tracekit index`): without them the fuzzer
        // never builds a header whose hashes pass.
        ("sidecar", &["testdata/sidecar"]),
        ("cli", FORMAT_FIXTURES),
    ];
    SEEDS
        .iter()
        .find(|(prefix, _)| target.starts_with(prefix))
        .map_or(&[][..], |(_, dirs)| dirs)
        .iter()
        .copied()
        .filter(|d| root().join(d).is_dir())
        .collect()
}

fn has(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn task(args: &[String]) -> Result<(), String> {
    let flags = Flags::parse(args, &["secs"], &["no-asan", "dev"])?;
    let secs = flags.number("secs", 30)?;
    let all = targets()?;
    let chosen = if flags.positional.is_empty() {
        all.clone()
    } else {
        flags.positional.clone()
    };
    for t in &chosen {
        if !all.contains(t) {
            return Err(format!("no fuzz target {t:?}; targets: {}", all.join(", ")));
        }
    }
    if !has("cargo", &["fuzz", "--version"]) {
        run(Command::new("cargo").args(["install", "--locked", "--debug", "cargo-fuzz"]))?;
    }
    let nightly = has("cargo", &["+nightly", "--version"]);
    let mut crashed = Vec::new();
    for t in &chosen {
        let corpus = root().join("fuzz/corpus").join(t);
        std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        let mut cmd = Command::new("cargo");
        if nightly {
            cmd.args(["+nightly", "fuzz", "run"]);
            if flags.has("no-asan") {
                cmd.args(["--sanitizer", "none"]);
            }
        } else {
            cmd.args(["fuzz", "run", "--sanitizer", "none"]);
        }
        if flags.has("dev") {
            cmd.arg("--dev");
        }
        cmd.arg(t).arg(&corpus);
        cmd.args(seed_dirs(t));
        cmd.args([
            "--",
            &format!("-max_total_time={secs}"),
            "-rss_limit_mb=4096",
            "-timeout=20",
        ]);
        if run(&mut cmd).is_err() {
            crashed.push(t.clone());
        }
        keep_artifacts(t)?;
    }
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz targets failed: {} (inputs kept in testdata/fuzz-crashes/)",
            crashed.join(", ")
        ))
    }
}

/// Copies crash, timeout and OOM inputs into `testdata/fuzz-crashes/TARGET/`.
fn keep_artifacts(target: &str) -> Result<(), String> {
    let dir = root().join("fuzz/artifacts").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let keep = root().join("testdata/fuzz-crashes").join(target);
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if ["crash-", "timeout-", "oom-", "leak-"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            std::fs::create_dir_all(&keep).map_err(|e| format!("{}: {e}", keep.display()))?;
            let to = keep.join(&name);
            std::fs::copy(e.path(), &to).map_err(|e| format!("{}: {e}", to.display()))?;
            eprintln!(
                "kept {}",
                Path::new("testdata/fuzz-crashes")
                    .join(target)
                    .join(&name)
                    .display()
            );
        }
    }
    Ok(())
}
