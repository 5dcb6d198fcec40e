//! CLI tests for `convert --to tfile`: the file is written and reads back as a tfile with
//! one frame per instruction of the thread asked for; usage errors (no `-o`, an unknown
//! thread, `--thread` with another target) exit 2 and write nothing; a damaged input exits
//! 1 and leaves no file.

use crate::common::*;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tk-to-tfile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The instructions per thread of an x64dbg file, from `dump`.
fn threads(file: &str) -> Vec<(u64, u64)> {
    let o = tracekit(["dump", "-q", file]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut counts: Vec<(u64, u64)> = Vec::new();
    for line in stdout(&o).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let t = v["thread"].as_u64().unwrap();
        match counts.iter_mut().find(|(id, _)| *id == t) {
            Some((_, n)) => *n += 1,
            None => counts.push((t, 1)),
        }
    }
    counts
}

#[test]
fn converts_the_first_thread_or_the_one_asked_for() {
    let file = testdata("x64dbg/basic.trace64");
    let file = file.to_str().unwrap();
    let counts = threads(file);
    assert!(counts.len() > 1, "the fixture has several threads");
    let dir = scratch("ok");
    for (k, (thread, n)) in counts.iter().enumerate() {
        let out = dir.join(format!("t{thread}.tf"));
        let out_s = out.to_str().unwrap();
        let t = thread.to_string();
        let mut args = vec!["convert", file, "--to", "tfile", "-o", out_s, "--force"];
        if k > 0 {
            args.extend(["--thread", &t]);
        }
        let o = tracekit(args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("thread {thread}, {n} frames")),
            "{}",
            stdout(&o)
        );
        let info = tracekit(["info", "--json", "-q", out_s]);
        assert!(info.status.success(), "{}", stderr(&info));
        let v: serde_json::Value = serde_json::from_str(&stdout(&info)).unwrap();
        assert_eq!(v["format"], "gdb-tfile");
        let dump = tracekit(["dump", "-q", out_s]);
        assert_eq!(stdout(&dump).lines().count() as u64, *n);
        let valid = tracekit(["validate", "-q", out_s]);
        assert!(valid.status.success(), "{}", stdout(&valid));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_exit_2_and_write_nothing() {
    let file = testdata("x64dbg/basic.trace64");
    let file = file.to_str().unwrap();
    let dir = scratch("usage");
    let out = dir.join("out.tf");
    let out_s = out.to_str().unwrap();

    let o = tracekit(["convert", file, "--to", "tfile"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-o OUT.tf"), "{}", stderr(&o));

    let o = tracekit([
        "convert", file, "--to", "tfile", "-o", out_s, "--thread", "7",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("thread 7 does not occur"),
        "{}",
        stderr(&o)
    );

    let o = tracekit(["convert", file, "--to", "din", "--thread", "7"]);
    assert_eq!(o.status.code(), Some(2));

    let amber = testdata("amber/example.tt6");
    let o = tracekit([
        "convert",
        amber.to_str().unwrap(),
        "--to",
        "tfile",
        "-o",
        out_s,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no file left");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_input_exits_1_and_leaves_no_file() {
    let dir = scratch("damaged");
    let mut bytes = std::fs::read(testdata("x64dbg/basic.trace64")).unwrap();
    bytes.truncate(bytes.len() - 5);
    let damaged = dir.join("cut.trace64");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = dir.join("out.tf");
    let o = tracekit([
        "convert",
        damaged.to_str().unwrap(),
        "--to",
        "tfile",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("offset"), "{}", stderr(&o));
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "only the input"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
