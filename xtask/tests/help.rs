//! `cargo xtask TASK --help` prints the task's usage and runs nothing; an unknown flag is
//! an error before anything runs.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

fn xtask(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn every_task_prints_its_usage_with_help() {
    for task in ["fixtures", "synth", "bench", "fuzz", "ci"] {
        for flag in ["--help", "-h"] {
            let start = Instant::now();
            let o = xtask(&[task, flag]);
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(0), "{task} {flag}");
            assert!(
                out.starts_with(&format!("usage: cargo xtask {task} ")),
                "{out}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{task} {flag} ran"
            );
        }
    }
    let o = xtask(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bench"));
}

#[test]
fn unknown_flags_and_tasks_are_errors() {
    let o = xtask(&["bench", "--mbi", "3"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown flag --mbi"));
    let o = xtask(&["fixtures", "--chek"]);
    assert_eq!(o.status.code(), Some(1));
    let o = xtask(&["nosuch"]);
    assert_eq!(o.status.code(), Some(2));
}
