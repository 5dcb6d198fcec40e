//! `tracekit export` on any input: an error or a complete dataset, never a panic and never
//! a half-written folder. (The SQL engines' checks of the datasets are in `tests/sql.rs`.)

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use clap::Parser;
use quickcheck::{QuickCheck, TestResult};
use trace_registry::HANDLERS;

fn temp(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("tracekit-export-{}-{tag}-{n}", std::process::id()))
}

/// Exports `data` as `format` (or detected) in process; checks what is left behind.
fn export(data: &[u8], format: Option<&str>) -> Result<(), String> {
    let file = temp("in");
    let out = temp("out");
    std::fs::write(&file, data).unwrap();
    let mut args = vec!["tracekit".to_owned(), "-q".into()];
    if let Some(f) = format {
        args.extend(["--format".into(), f.to_owned()]);
    }
    args.extend(["export".into(), file.display().to_string(), "-o".into()]);
    args.push(out.display().to_string());
    let cli = tracekit::Cli::try_parse_from(&args).unwrap();
    let result = tracekit::run(&cli, &mut Vec::new(), &mut Vec::new());
    let manifest = out.join("_tracekit.json");
    let verdict = match &result {
        Err(e) if out.exists() => Err(format!(
            "{format:?}: failed ({e}) but left {}",
            out.display()
        )),
        Ok(()) if !manifest.exists() => Err(format!("{format:?}: succeeded without a manifest")),
        Ok(()) => {
            let m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
            if m["complete"] == true {
                Ok(())
            } else {
                Err(format!("{format:?}: succeeded with {m}"))
            }
        }
        Err(_) => Ok(()),
    };
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&out);
    // Nothing of a temporary folder stays beside the output either.
    let stray = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&format!(".{}", out.file_name().unwrap().to_string_lossy()))
        });
    if stray {
        return Err(format!("{format:?}: a temporary folder was left"));
    }
    verdict
}

#[test]
fn any_input_gives_an_error_or_a_complete_dataset() {
    fn prop(data: Vec<u8>, pick: u8) -> TestResult {
        let format = HANDLERS
            .get(usize::from(pick) % (HANDLERS.len() + 1))
            .map(|h| h.name());
        match export(&data, format) {
            Ok(()) => TestResult::passed(),
            Err(e) => TestResult::error(e),
        }
    }
    QuickCheck::new()
        .tests(60)
        .quickcheck(prop as fn(Vec<u8>, u8) -> TestResult);
}

#[test]
fn every_fixture_prefix_gives_an_error_or_a_complete_dataset() {
    // Truncations of real fixtures of every format reach deeper than random bytes.
    for rel in [
        "x64dbg/basic.trace64",
        "gdb-tfile/amd64.tf",
        "dcfg/sample.dcfg.json",
        "dcfg-trace/basic.trace.json",
        "amber/escapes.tt6e",
        "tenet/basic.log",
        "amber/full-1008.full",
    ] {
        let data = std::fs::read(crate::common::testdata(rel)).unwrap();
        for cut in [
            0,
            1,
            7,
            data.len() / 3,
            data.len() / 2,
            data.len() - 1,
            data.len(),
        ] {
            export(&data[..cut], None).unwrap_or_else(|e| panic!("{rel} cut at {cut}: {e}"));
        }
    }
}
