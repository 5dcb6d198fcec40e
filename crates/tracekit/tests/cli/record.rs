//! `tracekit record` end to end: a small static C program built with gcc here, recorded
//! twice (the binary is its own ptrace helper), then the recordings read by the other
//! commands: `validate`, `diff` (equal), `mem` after the program's `read` (the bytes given
//! on stdin), `state`, `export`, `serve` (its answers against `state`, `dump`, `mem`), and
//! `--format tenet`; `--range` and `--module`. Where gcc or ptrace is missing the
//! tests print "skipped: …" and pass, unless `TRACEKIT_REQUIRE_PTRACE=1` (set by CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use super::common::{stderr, stdout, tracekit};

/// Stores into a global array, reads stdin into a buffer, writes it back, exits with a
/// status that depends on both. Without libc (`-nostdlib`): glibc's start-up reads the
/// thread id, the CPU's APIC id (`cpuid`) and `getrandom`, which differ between runs, and
/// `diff` would rightly see them.
const PROGRAM: &str = r#"
static long sys3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile ("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
volatile long arr[16];
char buf[64];
void _start(void) {
    for (int i = 0; i < 16; i++) arr[i] = i * 3 + 1;
    long n = sys3(0, 0, (long)buf, sizeof buf);
    sys3(1, 1, (long)buf, n);
    sys3(60, arr[5] + n, 0, 0);
    for (;;) {}
}
"#;

const INPUT: &[u8] = b"bytes from stdin\n";

/// The program built, in its scratch folder.
pub struct Fixture {
    /// The scratch folder.
    pub dir: PathBuf,
    /// The program.
    pub exe: PathBuf,
}

/// The program built and recorded once (`None`, with a note, where it cannot be).
pub fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    let f = F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tk-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let exe = dir.join("prog");
        let built = Command::new("gcc")
            .args(["-O1", "-static", "-nostdlib", "-fno-stack-protector", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            return None;
        }
        let f = Fixture { dir, exe };
        let probe = record(&f, &["-o", &f.path("probe.trace64")], b"");
        (probe.status.code() == Some(16)).then_some(f).or_else(|| {
            eprintln!("recording failed: {}", stderr(&probe));
            None
        })
    });
    if f.is_none() {
        let why = "tracekit record: gcc or ptrace is not available here";
        if std::env::var_os("TRACEKIT_REQUIRE_PTRACE").is_some_and(|v| v == "1") {
            panic!("{why}, and TRACEKIT_REQUIRE_PTRACE=1");
        }
        eprintln!("skipped: {why} (set TRACEKIT_REQUIRE_PTRACE=1 to fail instead)");
    }
    f.as_ref()
}

impl Fixture {
    /// A path in the scratch folder.
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// `tracekit record ARGS -- prog` with `stdin`, in an empty environment (so that two
/// runs see the same stack).
pub fn record(f: &Fixture, args: &[&str], stdin: &[u8]) -> Output {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let input = f.dir.join(format!("stdin-{n}.bin"));
    std::fs::write(&input, stdin).unwrap();
    Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .env_clear()
        .arg("record")
        .args(args)
        .arg("--")
        .arg(&f.exe)
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// The address of `name` in `exe` (nm).
pub fn symbol(exe: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(exe).output().expect("nm");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .unwrap();
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

/// The pcs of a trace (`dump`).
fn pcs(trace: &str) -> Vec<u64> {
    let o = tracekit(["dump", "-q", trace]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| hex(&serde_json::from_str::<serde_json::Value>(l).unwrap()["pc"]))
        .collect()
}

fn hex(v: &serde_json::Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn record_then_validate_diff_mem_state_export() {
    let Some(f) = fixture() else {
        return;
    };
    let (a, b) = (f.path("a.trace64"), f.path("b.trace64"));
    let status = 16 + INPUT.len() as i32;
    for out in [&a, &b] {
        let o = record(f, &["-o", out, "--fixed-random"], INPUT);
        assert_eq!(o.status.code(), Some(status), "{}", stderr(&o));
        // The program's own output passes through; the summary goes to stderr.
        assert_eq!(o.stdout, INPUT);
        assert!(
            stderr(&o).contains(" instructions, 1 thread(s), "),
            "{}",
            stderr(&o)
        );
    }
    let o = tracekit(["validate", "-q", &a]);
    assert_eq!(stdout(&o), "ok\n", "{}", stderr(&o));
    let o = tracekit(["diff", "-q", &a, &b]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    // The read's step, and the memory after it.
    let buf = symbol(&f.exe, "buf");
    let arr = symbol(&f.exe, "arr");
    let o = tracekit(["dump", "-q", &a]);
    let mut read_at = None;
    let mut stores = Vec::new();
    let mut count = 0u64;
    let mut first_pc = None;
    for line in stdout(&o).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        count += 1;
        first_pc.get_or_insert_with(|| hex(&v["pc"]));
        for m in v["mem"].as_array().unwrap() {
            let addr = hex(&m["addr"]);
            if v["opcode"] == "0f05" && addr == buf {
                read_at = Some(v["i"].as_u64().unwrap());
            }
            if (arr..arr + 128).contains(&addr) && !m["new"].is_null() {
                stores.push((addr, hex(&m["new"])));
            }
        }
    }
    let expected: Vec<(u64, u64)> = (0..16).map(|i| (arr + 8 * i, i * 3 + 1)).collect();
    assert_eq!(stores, expected, "the loop's stores");
    let at = read_at.expect("the read system call wrote buf") + 1;
    let range = format!("{buf:#x}:{}", INPUT.len());
    let o = tracekit(["mem", "-q", &a, "--at", &at.to_string(), &range, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["bytes"], serde_json::json!(INPUT), "{}", stdout(&o));

    // The state before the first instruction: its pc.
    let o = tracekit(["state", "-q", &a, "--at", "0", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(Some(hex(&v["regs"]["rip"])), first_pc, "{v}");

    // Export: every instruction is a row.
    let dir = f.path("export");
    let o = tracekit(["export", &a, "-o", &dir, "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The per-table summary lines go to stderr.
    let rows = stderr(&o)
        .lines()
        .find(|l| l.starts_with("instructions "))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .map(|n| n.parse::<u64>().unwrap())
        });
    assert_eq!(rows, Some(count), "{}", stderr(&o));
}

#[test]
fn record_tenet_and_max() {
    let Some(f) = fixture() else {
        return;
    };
    let prefix = f.path("t");
    let o = record(
        f,
        &["--format", "tenet", "-o", &prefix, "--max", "20"],
        b"xy",
    );
    assert_eq!(o.status.code(), Some(18), "{}", stderr(&o));
    assert!(stderr(&o).contains("20 instructions"), "{}", stderr(&o));
    let logs: Vec<PathBuf> = std::fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("t.") && n.ends_with(".log")
        })
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let text = std::fs::read_to_string(&logs[0]).unwrap();
    assert_eq!(text.lines().count(), 20);
    assert!(text.lines().all(|l| l.contains("rip=0x")));
    assert_eq!(stdout(&o), "xy", "the program ran on after --max");
    // No x64dbg scratch trace is left behind.
    assert!(!std::fs::read_dir(&f.dir).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".record-")
    }));
}

#[test]
fn record_refuses_other_formats_and_reports_a_missing_program() {
    let o = tracekit(["record", "--format", "gdb-tfile", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let Some(f) = fixture() else {
        return;
    };
    let out = f.path("none.trace64");
    let o = tracekit(["record", "-o", &out, "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/nonexistent/program"),
        "{}",
        stderr(&o)
    );
    assert!(
        !Path::new(&out).exists(),
        "no trace for a program that did not start"
    );
}

#[test]
fn record_range_and_module() {
    let Some(f) = fixture() else {
        return;
    };
    let status = Some(16 + INPUT.len() as i32);
    let full = f.path("full.trace64");
    let o = record(f, &["-o", &full, "--force"], INPUT);
    assert_eq!(o.status.code(), status, "{}", stderr(&o));
    let all = pcs(&full);
    // The first 12 bytes of _start (hex start, decimal end: both accepted).
    let start = symbol(&f.exe, "_start");
    let end = start + 12;
    let ranged = f.path("range.trace64");
    let range = format!("{start:#x}:{end}");
    let o = record(f, &["-o", &ranged, "--force", "--range", &range], INPUT);
    assert_eq!(o.status.code(), status, "{}", stderr(&o));
    assert_eq!(o.stdout, INPUT, "the program's output is unchanged");
    assert!(
        stderr(&o).contains("1 range(s); left them 1 time(s)"),
        "{}",
        stderr(&o)
    );
    let inside: Vec<u64> = all
        .iter()
        .copied()
        .filter(|p| (start..end).contains(p))
        .collect();
    assert!(!inside.is_empty() && inside.len() < all.len());
    assert_eq!(pcs(&ranged), inside);
    // The whole (static) executable as a module: everything the full recording has.
    let module = f.path("module.trace64");
    let o = record(f, &["-o", &module, "--force", "--module", "prog"], INPUT);
    assert_eq!(o.status.code(), status, "{}", stderr(&o));
    assert!(stderr(&o).contains("--module prog: "), "{}", stderr(&o));
    assert_eq!(pcs(&module), all);
    // A module the program never maps: exit 1, said, and no trace.
    let none = f.path("nomodule.trace64");
    let o = record(f, &["-o", &none, "--module", "libnothere.so"], INPUT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("module \"libnothere.so\" is not mapped"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty(), "the program did not run");
    assert!(!Path::new(&none).exists());
    // Malformed ranges: usage errors.
    for bad in ["5:5", "9:2", "0x10", "a:b"] {
        let o = tracekit(["record", "--range", bad, "--", "/bin/true"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
    }
}
