//! CLI tests for GDB tracepoint files: dump/info goldens next to the fixtures
//! (`testdata/gdb-tfile/*.expected`, `TRACE_BLESS=1` rewrites them), validate, negative
//! fixtures with their error messages, the dump JSON shape, `--big-endian`, stdin.

use crate::common::*;

/// Positive fixtures with a golden dump (amd64.tf is checked field by field instead).
const POSITIVE: &[&str] = &[
    "tfile-basic.tf",
    "tfile-error.tf",
    "s390-big-endian.tf",
    "no-tdesc.tf",
    "quirks.tf",
];

const NEGATIVE: &[&str] = &[
    "err-magic.tf",
    "err-short.tf",
    "err-long-line.tf",
    "err-no-rsize.tf",
    "err-status.tf",
    "err-bad-hex.tf",
    "err-unterminated.tf",
    "err-truncated-frame.tf",
    "err-unknown-block.tf",
    "err-block-overrun.tf",
    "err-no-terminator.tf",
];

fn path(rel: &str) -> String {
    testdata(&format!("gdb-tfile/{rel}"))
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn dump_goldens_and_validate() {
    for name in POSITIVE {
        assert_dump_golden_and_valid(
            &path(name),
            &testdata(&format!("gdb-tfile/{name}.dump.expected")),
        );
    }
}

#[test]
fn info_goldens() {
    for name in [
        "tfile-basic.tf",
        "tfile-error.tf",
        "amd64.tf",
        "quirks.tf",
        "s390-big-endian.tf",
    ] {
        let o = tracekit(["info", "-q", &path(name)]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_golden(
            &testdata(&format!("gdb-tfile/{name}.info.expected")),
            &stdout(&o),
        );
    }
    let o = tracekit(["info", "--json", "-q", &path("amd64.tf")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["register_size"], 560);
    assert_eq!(v["architecture"], "i386:x86-64");
    assert_eq!(v["frames"], 40);
    assert_eq!(v["frames_per_tracepoint"]["2"], 38);
    assert_eq!(v["status"]["username"], "alice");
    assert_eq!(v["tracepoints"][0]["cond"], "i % 100 == 7");
    assert_eq!(v["tsvs"][2]["initial"], -5);
}

#[test]
fn negative_fixtures_fail_with_offsets() {
    for name in NEGATIVE {
        let o = tracekit(["--format", "gdb-tfile", "validate", "-q", &path(name)]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = stderr(&o);
        let last = err.lines().last().unwrap();
        assert!(last.starts_with("error: "), "{name}: {err}");
        assert!(last.contains(" at offset 0x"), "{name}: {err}");
        assert_golden(
            &testdata(&format!("gdb-tfile/{name}.expected")),
            &format!("{last}\n"),
        );
    }
}

#[test]
fn dump_of_a_truncated_file_prints_complete_frames_first() {
    let o = tracekit(["dump", "-q", &path("err-truncated-frame.tf")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 39);
    assert!(
        stderr(&o).contains("trace frame 39 is truncated"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn dump_json_shape() {
    // The testsuite's basic file: one frame of three M blocks, no registers. Offsets from
    // the notes: 8 + 6 + 59 + 19 + 1 = 93.
    let o = tracekit(["dump", "-q", &path("tfile-basic.tf")]);
    assert_eq!(
        stdout(&o),
        "{\"i\":0,\"offset\":93,\"tracepoint\":1,\"pc\":null,\"mem\":[{\"addr\":\"0x40402c\",\"len\":4,\"data\":\"b77a0000\"},{\"addr\":\"0x404030\",\"len\":1,\"data\":\"d4\"},{\"addr\":\"0x404031\",\"len\":3,\"data\":\"250400\"}],\"tsv\":{}}\n"
    );
    // Named registers from the description, rip decoded as an integer, xmm as bytes.
    let o = tracekit(["dump", "-q", &path("amd64.tf")]);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 40);
    assert_eq!(lines[0]["regs"]["rip"], "0x401134");
    // The description's pc register (rip), decoded like the `regs` entry.
    for l in &lines {
        assert_eq!(l["pc"], l["regs"]["rip"]);
    }
    assert_eq!(lines[15]["regs"]["rip"], format!("{:#x}", 0x40118b + 3 * 4));
    assert_eq!(lines[15]["tracepoint"], 3);
    assert!(lines[15]["mem"].as_array().unwrap().is_empty());
    assert_eq!(lines[0]["regs"]["xmm0"].as_str().unwrap().len(), 32);
    assert!(lines[0].get("regs_raw").is_none());
    assert_eq!(lines[7]["mem"][0]["data"], "15000000");
    assert_eq!(lines[7]["tsv"]["2"], 8);
    // Without a description: the raw register block.
    let o = tracekit(["dump", "-q", &path("no-tdesc.tf")]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(first["regs_raw"].as_str().unwrap().len(), 2 * 560);
    assert!(first.get("regs").is_none());
}

#[test]
fn big_endian_option_and_stdin() {
    let bytes = std::fs::read(path("s390-big-endian.tf")).unwrap();
    // The description's architecture (s390) says big-endian; --big-endian agrees.
    let a = tracekit(["dump", "-q", &path("s390-big-endian.tf")]);
    let b = tracekit_stdin(["--big-endian", "dump", "-q", "-"], &bytes);
    assert!(a.status.success() && b.status.success(), "{}", stderr(&b));
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).contains("\"pswa\":\"0x10000400\""));
    // A little-endian target read as big-endian: byte-swapped frame sizes.
    let o = tracekit(["--big-endian", "validate", "-q", &path("tfile-basic.tf")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
}

#[test]
fn warnings_go_to_stderr() {
    let o = tracekit(["validate", "-q", &path("quirks.tf")]);
    assert_eq!(stdout(&o), "ok\n");
    assert!(stderr(&o).contains("warning: Ignoring trace file definition \"future-line 1 2 3\""));
}

#[test]
fn stdin_and_gzip_use_the_streaming_reader_with_the_same_output() {
    use std::io::Write;
    let bytes = std::fs::read(path("amd64.tf")).unwrap();
    let from_file = tracekit(["dump", "-q", &path("amd64.tf")]);
    let from_stdin = tracekit_stdin(["dump", "-q", "-"], &bytes);
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    assert_eq!(stdout(&from_file), stdout(&from_stdin));
    let gz = std::env::temp_dir().join(format!("tracekit-gdb-tfile-{}.tf.gz", std::process::id()));
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&bytes).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let from_gz = tracekit(["dump", "-q", gz.to_str().unwrap()]);
    let _ = std::fs::remove_file(&gz);
    assert_eq!(stdout(&from_file), stdout(&from_gz), "{}", stderr(&from_gz));
    // A truncated stream: every complete frame, then the error.
    let cut = std::fs::read(path("err-truncated-frame.tf")).unwrap();
    let o = tracekit_stdin(["dump", "-q", "-"], &cut);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 39);
    assert!(
        stderr(&o).contains("trace frame 39 is truncated"),
        "{}",
        stderr(&o)
    );
    let o = tracekit_stdin(["validate", "-q", "-"], &cut);
    assert_eq!(o.status.code(), Some(1));
}
