//! `cargo xtask ci`: everything CI checks, in order, each step timed.

use std::process::Command;
use std::time::Instant;

use crate::{Flags, fuzz, run};

fn cargo(args: &[&str]) -> Command {
    let mut c = Command::new("cargo");
    c.args(args);
    c
}

type Step = Box<dyn Fn() -> Result<(), String>>;

pub fn task(args: &[String]) -> Result<(), String> {
    let flags = Flags::parse(args, &["fuzz-secs"], &["no-test"])?;
    let fuzz_secs = flags.number("fuzz-secs", 10)?;
    let mut steps: Vec<(&str, Step)> = Vec::new();
    if !flags.has("no-test") {
        // The README's test command.
        steps.push((
            "test",
            Box::new(|| run(&mut cargo(&["test", "--workspace"]))),
        ));
    }
    steps.push((
        "fmt",
        Box::new(|| run(&mut cargo(&["fmt", "--all", "--check"]))),
    ));
    steps.push((
        "clippy",
        Box::new(|| {
            run(&mut cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]))
        }),
    ));
    steps.push((
        "doc",
        Box::new(|| {
            run(cargo(&["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings"))
        }),
    ));
    steps.push((
        "benches compile and run once",
        Box::new(|| run(&mut cargo(&["test", "--workspace", "--benches"]))),
    ));
    steps.push(("fixtures --check", Box::new(|| crate::fixtures::run(true))));
    steps.push((
        "deny",
        Box::new(|| {
            if !Command::new("cargo")
                .args(["deny", "--version"])
                .output()
                .is_ok_and(|o| o.status.success())
            {
                // Unoptimised: builds in about half the time, and checks this small
                // workspace in seconds all the same.
                run(&mut cargo(&[
                    "install",
                    "--locked",
                    "--debug",
                    "cargo-deny",
                ]))?;
            }
            // cargo-deny reads `cargo metadata` for every platform, offline: fetch first.
            run(&mut cargo(&["fetch"]))?;
            run(&mut cargo(&[
                "deny",
                "--offline",
                "check",
                "bans",
                "licenses",
                "sources",
            ]))
        }),
    ));
    steps.push((
        "fuzz smoke",
        Box::new(move || {
            let targets = fuzz::targets()?;
            let mut args = targets;
            // Without AddressSanitizer and unoptimised: the smoke run's build is the slowest
            // step of CI, and with `unsafe_code` forbidden ASan finds what the Rust checks
            // already catch.
            args.extend([
                "--secs".to_owned(),
                fuzz_secs.to_string(),
                "--no-asan".to_owned(),
                "--dev".to_owned(),
            ]);
            fuzz::task(&args)
        }),
    ));
    for (name, step) in &steps {
        let t = Instant::now();
        eprintln!("==> {name}");
        step().map_err(|e| format!("step `{name}` failed: {e}"))?;
        eprintln!("==> {name}: ok in {:.0} s", t.elapsed().as_secs_f64());
    }
    Ok(())
}
