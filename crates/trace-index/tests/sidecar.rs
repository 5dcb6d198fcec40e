//! The sidecar against the scans it replaces, on synthetic x64dbg traces.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quickcheck::{QuickCheck, TestResult};
use trac_x64dbg::testgen::{self, Options as GenOptions};
use trac_x64dbg::{Arch, RecorderOptions};

use trace_index::*;
use trace_model::steps::SeekIndex;
use trace_model::{Ctx, Handler, Input};

use trace_analyses::xref::{XrefQuery, xref};
use trace_model::Options;
use trace_registry::HANDLERS;

/// A fresh temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-index-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn x64dbg() -> &'static dyn Handler {
    HANDLERS[0]
}

/// `xref` lines for `query` on the trace at `path`, with the sidecar at `index` (a
/// path that does not exist: none).
fn lines(path: &Path, index: &Path, query: &XrefQuery) -> Vec<String> {
    let options = Options {
        index: Some(index.to_owned()),
        ..Options::default()
    };
    let mut input = Input::open(path.as_os_str()).unwrap();
    let mut out = Vec::new();
    xref(x64dbg(), &mut input, &mut Ctx::new(&options), query, |h| {
        out.push(h.to_json());
        Ok(())
    })
    .unwrap();
    out
}

fn build_at(path: &Path, out: &Path, run_pairs: usize) -> Built {
    let mut input = Input::open(path.as_os_str()).unwrap();
    let options = Options::default();
    build(
        x64dbg(),
        &mut input,
        &mut Ctx::new(&options),
        Some(out),
        BuildOptions {
            run_pairs,
            ..BuildOptions::default()
        },
    )
    .unwrap()
}

/// With the sidecar (built in memory or from many spilled runs) `xref` prints what the
/// scan prints, for addresses the trace touches, ranges around them and pcs.
#[test]
fn sidecar_answers_as_the_scan_does() {
    fn prop(
        seed: u64,
        threads: u8,
        x86: bool,
        n: u16,
        run_pairs: u8,
        pick: Vec<(u16, u8)>,
    ) -> TestResult {
        let arch = if x86 { Arch::X86 } else { Arch::X64 };
        let opts = GenOptions {
            arch,
            threads: 1 + u32::from(threads % 4),
            max_run: 1 + seed % 300,
            seed,
        };
        let bytes = testgen::trace(
            opts,
            1 + u64::from(n % 1500),
            RecorderOptions::default(),
            "q.exe",
        );
        let dir = temp_dir("qc");
        let path = dir.join("t.trace64");
        std::fs::write(&path, &bytes).unwrap();
        let none = dir.join("none.tkidx");
        let index = dir.join("t.tkidx");
        let built = build_at(&path, &index, 1 + usize::from(run_pairs));
        let all: Vec<String> = lines(
            &path,
            &none,
            &XrefQuery {
                mem: Some((0, Some(u64::MAX))),
                pc: None,
            },
        );
        let mut queries = Vec::new();
        for (k, len) in pick.iter().take(3) {
            let Some(line) = (!all.is_empty()).then(|| &all[usize::from(*k) % all.len()]) else {
                break;
            };
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let hex = |s: &serde_json::Value| {
                u64::from_str_radix(s.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
            };
            let addr = hex(&v["addr"]);
            let len = u64::from(*len % 40);
            let start = addr.saturating_sub(len / 2);
            queries.push(XrefQuery {
                mem: Some((start, (len > 0).then_some(len))),
                pc: None,
            });
            queries.push(XrefQuery {
                mem: None,
                pc: Some(hex(&v["pc"])),
            });
        }
        queries.push(XrefQuery {
            mem: Some((0x10, Some(8))),
            pc: None,
        });
        for q in &queries {
            let scanned = lines(&path, &none, q);
            let indexed = lines(&path, &index, q);
            if scanned != indexed {
                return TestResult::error(format!(
                    "{q:?}: {} lines scanned, {} from the index",
                    scanned.len(),
                    indexed.len()
                ));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
        TestResult::from_bool(built.index_bytes <= built.trace_bytes)
    }
    QuickCheck::new()
        .tests(15)
        .quickcheck(prop as fn(u64, u8, bool, u16, u8, Vec<(u16, u8)>) -> TestResult);
}

/// An index of another trace, or of this one before it changed, is not used: the
/// steps say so, and `xref` answers from the trace.
#[test]
fn stale_and_foreign_indexes_are_ignored_with_a_note() {
    let dir = temp_dir("stale");
    let make = |seed| {
        let opts = GenOptions {
            arch: Arch::X64,
            threads: 2,
            max_run: 50,
            seed,
        };
        testgen::trace(opts, 2000, RecorderOptions::default(), "s.exe")
    };
    let path = dir.join("a.trace64");
    std::fs::write(&path, make(1)).unwrap();
    let index = default_path(&path);
    build_at(&path, &index, 1 << 20);
    assert!(Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg").is_ok());
    assert!(matches!(
        Sidecar::open(&index, &Identity::of(&path).unwrap(), "gdb-tfile"),
        Err(Unusable::Stale(_))
    ));
    // Same size, other content.
    std::fs::write(&path, make(2)).unwrap();
    let why = Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg").unwrap_err();
    assert!(matches!(why, Unusable::Stale(_)), "{why:?}");
    let options = Options::default();
    let mut notes = Vec::new();
    let mut input = Input::open(path.as_os_str()).unwrap();
    let mut ctx = Ctx::new(&options).on_diagnostic(|l| notes.push(l.to_owned()));
    let mut steps = x64dbg().steps(&mut input, &mut ctx).unwrap();
    steps.seek(1500).unwrap();
    drop(steps);
    drop(ctx);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("has changed"), "{notes:?}");
    // A damaged one is caught by its hashes and ignored too.
    build_at(&path, &index, 1 << 20);
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[HEADER_LEN + 3] ^= 0x40;
    std::fs::write(&index, &bytes).unwrap();
    let mut sidecar = Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg").unwrap();
    assert!(sidecar.seek_index().is_err());
    notes.clear();
    let mut input = Input::open(path.as_os_str()).unwrap();
    let mut ctx = Ctx::new(&options).on_diagnostic(|l| notes.push(l.to_owned()));
    x64dbg()
        .steps(&mut input, &mut ctx)
        .unwrap()
        .seek(1500)
        .unwrap();
    drop(ctx);
    assert!(
        notes.len() == 1 && notes[0].contains("damaged"),
        "{notes:?}"
    );
    let len = bytes.len();
    bytes[len - 1] ^= 1; // the last directory entry
    std::fs::write(&index, &bytes).unwrap();
    assert!(matches!(
        Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg"),
        Err(Unusable::Damaged(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The x64dbg steps seek with the sidecar's seek index, and land where a seek with a
/// fresh index pass lands.
#[test]
fn steps_seek_with_the_sidecar() {
    let dir = temp_dir("seek");
    let opts = GenOptions {
        arch: Arch::X64,
        threads: 3,
        max_run: 80,
        seed: 7,
    };
    let path = dir.join("a.trace64");
    std::fs::write(
        &path,
        testgen::trace(opts, 5000, RecorderOptions::default(), "s.exe"),
    )
    .unwrap();
    let options = Options::default();
    let at = |n: u64| {
        let mut input = Input::open(path.as_os_str()).unwrap();
        let mut steps = x64dbg().steps(&mut input, &mut Ctx::new(&options)).unwrap();
        steps.seek(n).unwrap();
        let step = steps.next_step().unwrap().unwrap().clone();
        (step, steps.regs().to_vec())
    };
    let before: Vec<_> = [0, 511, 512, 4999, 2345].map(at).into();
    let built = build_at(&path, &default_path(&path), 1 << 20);
    assert!(built.seek_bytes > 0);
    let mut sidecar = Sidecar::open(
        &default_path(&path),
        &Identity::of(&path).unwrap(),
        "x64dbg",
    )
    .unwrap();
    let saved = trac_x64dbg::Index::from_bytes(&sidecar.seek_index().unwrap()).unwrap();
    assert_eq!(saved.full_dumps(), 10);
    let after: Vec<_> = [0, 511, 512, 4999, 2345].map(at).into();
    assert_eq!(before, after);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The progress hook sees the steps indexed grow, in steps of [`PROGRESS_STEPS`], up
/// to the count the index then holds; a seek index given is kept as it is (no second
/// pass), and the same one as the pass makes gives the same file.
#[test]
fn progress_and_a_seek_index_given() {
    let dir = temp_dir("progress");
    let opts = GenOptions {
        arch: Arch::X64,
        threads: 2,
        max_run: 60,
        seed: 11,
    };
    let path = dir.join("a.trace64");
    let bytes = testgen::trace(opts, 10_000, RecorderOptions::default(), "s.exe");
    std::fs::write(&path, &bytes).unwrap();
    let options = Options::default();
    let run = |out: &Path, build_options: BuildOptions| {
        let mut input = Input::open(path.as_os_str()).unwrap();
        build(
            x64dbg(),
            &mut input,
            &mut Ctx::new(&options),
            Some(out),
            build_options,
        )
        .unwrap()
    };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = Arc::clone(&seen);
    let plain = run(
        &dir.join("plain.tkidx"),
        BuildOptions {
            progress: Some(Arc::new(move |n| hook.lock().unwrap().push(n))),
            ..BuildOptions::default()
        },
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(plain.steps, 10_000);
    assert_eq!(seen, [4096, 8192, 10_000]);

    // The seek index of the same trace, made first: the same file.
    let trace = trac_x64dbg::Trace::parse(&bytes).unwrap();
    let seek = trace.build_index().unwrap().to_bytes();
    let given = run(
        &dir.join("given.tkidx"),
        BuildOptions {
            seek_index: Some(SeekIndex::new(seek)),
            ..BuildOptions::default()
        },
    );
    assert_eq!(
        std::fs::read(&plain.path).unwrap(),
        std::fs::read(&given.path).unwrap()
    );
    // That of the trace's first third (valid, but not what the pass
    // makes) is what the file keeps: taken, not rebuilt.
    let head = bytes.len() / 3;
    let prefix = trac_x64dbg::Trace::parse(&bytes[..head])
        .unwrap()
        .index_builder()
        .finish()
        .0
        .to_bytes();
    let kept = run(
        &dir.join("kept.tkidx"),
        BuildOptions {
            seek_index: Some(SeekIndex::new(prefix.clone())),
            ..BuildOptions::default()
        },
    );
    let mut sidecar = Sidecar::open(&kept.path, &Identity::of(&path).unwrap(), "x64dbg").unwrap();
    assert_eq!(sidecar.seek_index().unwrap(), prefix);
    let mut full = Sidecar::open(&plain.path, &Identity::of(&path).unwrap(), "x64dbg").unwrap();
    assert_ne!(full.seek_index().unwrap(), prefix);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Any bytes, and any damage to a real index, give an answer or an error.
#[test]
fn reading_never_panics() {
    let dir = temp_dir("fuzz");
    let path = dir.join("a.trace64");
    let opts = GenOptions {
        arch: Arch::X64,
        threads: 2,
        max_run: 30,
        seed: 3,
    };
    std::fs::write(
        &path,
        testgen::trace(opts, 1500, RecorderOptions::default(), "s.exe"),
    )
    .unwrap();
    let index = dir.join("a.tkidx");
    build_at(&path, &index, 100);
    let good = std::fs::read(&index).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    fn probe(bytes: &[u8]) {
        let Ok(mut s) = Sidecar::read(Path::new("x"), Cursor::new(bytes), bytes.len() as u64)
        else {
            return;
        };
        let _ = s.seek_index();
        for k in [0, 1, 0x14_fe00, u64::MAX] {
            let _ = s.executions(k);
            let _ = s.accesses(k, k.saturating_add(64));
        }
    }
    probe(&good);
    static GOOD: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    GOOD.set(good).unwrap();
    fn raw(b: Vec<u8>) -> bool {
        probe(&b);
        true
    }
    // Damage anywhere: the header and directories are caught by their hashes, the
    // entries by the decoder's checks.
    fn mutated(flips: Vec<(u32, u8)>) -> bool {
        let mut b = GOOD.get().unwrap().clone();
        for (at, x) in flips {
            let i = at as usize % b.len();
            b[i] ^= x;
        }
        probe(&b);
        true
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(raw as fn(Vec<u8>) -> bool);
    QuickCheck::new()
        .tests(500)
        .quickcheck(mutated as fn(Vec<(u32, u8)>) -> bool);
}

/// The timeline kept in the sidecar gives each step's thread and each thread's next and
/// previous steps as a walk over the steps does; a sidecar of an older index format is
/// stale (rebuilt by the commands that build one), not damaged.
#[test]
fn the_timeline_equals_the_steps_threads_and_an_older_format_is_stale() {
    let dir = temp_dir("timeline");
    let opts = GenOptions {
        arch: Arch::X64,
        threads: 3,
        max_run: 20,
        seed: 7,
    };
    let path = dir.join("t.trace64");
    std::fs::write(
        &path,
        testgen::trace(opts, 3000, RecorderOptions::default(), "t.exe"),
    )
    .unwrap();
    let index = default_path(&path);
    // Few pairs in memory: the runs spill and merge.
    build_at(&path, &index, 64);
    let mut input = Input::open(path.as_os_str()).unwrap();
    let options = Options::default();
    let mut steps = x64dbg().steps(&mut input, &mut Ctx::new(&options)).unwrap();
    let mut threads = Vec::new();
    while let Some(s) = steps.next_step() {
        threads.push(s.unwrap().thread);
    }
    drop(steps);
    let sidecar = Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg").unwrap();
    let t = sidecar.timeline().unwrap();
    assert_eq!(t.count(), threads.len() as u64);
    let mut ids = threads.clone();
    ids.dedup();
    assert_eq!(t.runs(), ids.len() as u64);
    for i in (0..threads.len() as u64).step_by(13) {
        assert_eq!(t.thread_at(i).unwrap(), Some(threads[i as usize]));
        for &th in t.threads() {
            let first = (i..threads.len() as u64).find(|&j| threads[j as usize] == th);
            let last = (0..i).rev().find(|&j| threads[j as usize] == th);
            assert_eq!(t.first_from(th, i).unwrap(), first, "{th} from {i}");
            assert_eq!(t.last_before(th, i).unwrap(), last, "{th} before {i}");
        }
    }
    // Version 2 of the format: the same magic but its last byte.
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[15] = 2;
    std::fs::write(&index, &bytes).unwrap();
    let why = Sidecar::open(&index, &Identity::of(&path).unwrap(), "x64dbg").unwrap_err();
    assert!(
        matches!(&why, Unusable::Stale(w) if w.contains("index format 2, not 3")),
        "{why:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
