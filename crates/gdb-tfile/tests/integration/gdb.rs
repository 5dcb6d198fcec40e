//! A helper that makes real trace files on this machine with gdb and gdbserver, and runs
//! gdb in batch mode on trace files.
//!
//! gdbserver is driven over a pipe (`target remote | gdbserver - PROG`), so it listens on
//! no network interface at all (stricter than loopback). Every gdb run is killed after a
//! timeout. Without gdb, gdbserver or gcc the tests print that they are skipped, unless
//! `TRACEKIT_REQUIRE_GDB=1` (set by CI), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The traced program: a loop calling `traceme` (tracepoint with registers, memory and a
/// TSV) and `cond_fn` (conditional tracepoint with while-stepping).
const TRACEE: &str = r#"
#include <stdlib.h>
int testglob = 0;
unsigned char buf[64];
long counter = 0;
void end_marker(void) {}
__attribute__((noinline)) int traceme(int i) {
  testglob = i * 3;
  buf[i % 64] = (unsigned char)i;
  counter += i;
  return testglob;
}
__attribute__((noinline)) int cond_fn(int i) { int r = i + 1; r *= 2; return r; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1200;
  long s = 0;
  for (int i = 0; i < n; i++) { s += traceme(i); s += cond_fn(i); }
  end_marker();
  return (int)(s & 1);
}
"#;

/// Iterations of the tracee's loop: one `traceme` frame each.
pub const ITERATIONS: u64 = 1000;

const RECORD: &str = r#"set pagination off
set confirm off
file ./tracee
target remote | gdbserver - ./tracee 1000
break main
continue
break end_marker
tvariable $hits = 0
tvariable $neg = -5
trace traceme
actions
  collect $regs
  collect testglob, buf, counter
  teval $hits = $hits + 1
  collect $hits
end
trace cond_fn if i % 500 == 7
actions
  collect $rip, $rsp
  while-stepping 3
    collect $rip
  end
end
set trace-buffer-size 67108864
set trace-user alice
set trace-notes first-notes
tstart
continue
tstop done-tracing
tsave out.tf
kill
"#;

/// A real recording.
#[derive(Debug)]
pub struct Recording {
    /// The directory holding the tracee and the files.
    pub dir: PathBuf,
    /// The trace file `tsave` wrote.
    pub tfile: PathBuf,
    /// Address of `testglob`.
    pub testglob: u64,
    /// Address of `traceme`.
    pub traceme: u64,
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether gdb, gdbserver and gcc are there; prints the skip message otherwise (or panics
/// with `TRACEKIT_REQUIRE_GDB=1`).
pub fn available(test: &str) -> bool {
    let missing: Vec<&str> = ["gdb", "gdbserver", "gcc"]
        .into_iter()
        .filter(|t| !have(t))
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("TRACEKIT_REQUIRE_GDB").is_some_and(|v| v == "1") {
        panic!("{test}: {missing:?} not installed and TRACEKIT_REQUIRE_GDB=1");
    }
    eprintln!(
        "skipped {test}: {missing:?} not installed (set TRACEKIT_REQUIRE_GDB=1 to fail instead)"
    );
    false
}

/// Runs a command with a timeout; returns stdout + stderr.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> String {
    let dir = std::env::temp_dir();
    let tag = format!(
        "gdb-tfile-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let out_path = dir
        .join(format!("{tag}.out"))
        .to_string_lossy()
        .replace(['(', ')', ' '], "_");
    let out_file = std::fs::File::create(&out_path).unwrap();
    let err_file = out_file.try_clone().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out_file)
        .stderr(err_file)
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            panic!("{cmd:?} timed out after {limit:?}; output so far:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = std::fs::read(&out_path).unwrap();
    let _ = std::fs::remove_file(&out_path);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `gdb -batch -nx -x SCRIPT` in `dir` with a 120 s limit.
pub fn gdb_batch(dir: &Path, script: &str) -> String {
    // The script goes to the temporary directory, never next to the inputs.
    let name = format!(
        "gdb-tfile-{}-{:?}.gdb",
        std::process::id(),
        std::thread::current().id()
    )
    .replace(['(', ')', ' '], "_");
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, script).unwrap();
    let mut cmd = Command::new("gdb");
    cmd.current_dir(dir)
        .args(["-batch", "-nx", "-x"])
        .arg(&path);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(120));
    let _ = std::fs::remove_file(&path);
    out
}

fn symbol(dir: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(dir.join("tracee")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(name))
        .unwrap_or_else(|| panic!("{name} not in nm output"));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

/// Builds the tracee and records a trace (once per test run).
pub fn recording() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(concat!(env!("CARGO_PKG_NAME"), "-gdb-tfile-real"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tracee.c"), TRACEE).unwrap();
        let mut cc = Command::new("gcc");
        cc.current_dir(&dir).args([
            "-g", "-O0", "-fno-pie", "-no-pie", "-o", "tracee", "tracee.c",
        ]);
        let out = run_with_timeout(&mut cc, Duration::from_secs(60));
        assert!(dir.join("tracee").exists(), "gcc failed:\n{out}");
        let log = gdb_batch(&dir, RECORD);
        let tfile = dir.join("out.tf");
        assert!(tfile.exists(), "tsave wrote nothing; gdb said:\n{log}");
        Recording {
            testglob: symbol(&dir, "testglob"),
            traceme: symbol(&dir, "traceme"),
            tfile,
            dir,
        }
    })
}

/// What GDB prints for every frame of a file (no executable loaded): frame number,
/// tracepoint, `$rip` (or `-` when unavailable) and, for frames of tracepoint `mem_tp`,
/// the `int` at `mem_addr` and the TSV `$hits`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GdbFrame {
    pub index: u64,
    pub tracepoint: i64,
    pub rip: Option<u64>,
    pub mem: Option<i64>,
    pub hits: Option<i64>,
}

/// Runs the `tfind` loop in gdb over `tfile`; also returns the `tstatus` text.
pub fn gdb_frames(dir: &Path, tfile: &Path, mem_tp: i64, mem_addr: u64) -> (String, Vec<GdbFrame>) {
    gdb_frames_with(dir, tfile, mem_tp, mem_addr, true, false)
}

/// [`gdb_frames`], printing `$hits` only if `hits`, and loading `./tracee` first if `exe`
/// (GDB then renumbers the tracepoints it recreates from 1).
pub fn gdb_frames_with(
    dir: &Path,
    tfile: &Path,
    mem_tp: i64,
    mem_addr: u64,
    hits: bool,
    exe: bool,
) -> (String, Vec<GdbFrame>) {
    let script = format!(
        r#"set pagination off
set confirm off
{exe_line}target tfile {}
tstatus
tfind start
while ($trace_frame != -1)
  printf "F %d %d\n", $trace_frame, $tracepoint
  printf "R %lx\n", (unsigned long) $rip
  if $tracepoint == {mem_tp}
    printf "M %d\n", *(int *) {mem_addr:#x}
{hits_line}  end
  tfind
end
"#,
        tfile.display(),
        exe_line = if exe { "file ./tracee\n" } else { "" },
        hits_line = if hits {
            "    printf \"H %d\\n\", $hits\n"
        } else {
            ""
        }
    );
    let out = gdb_batch(dir, &script);
    let mut frames: Vec<GdbFrame> = Vec::new();
    for line in out.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("F"), Some(i), Some(t)) => frames.push(GdbFrame {
                index: i.parse().unwrap(),
                tracepoint: t.parse().unwrap(),
                ..GdbFrame::default()
            }),
            (Some("R"), Some(v), None) => {
                frames.last_mut().unwrap().rip = Some(u64::from_str_radix(v, 16).unwrap())
            }
            (Some("M"), Some(v), None) => frames.last_mut().unwrap().mem = Some(v.parse().unwrap()),
            (Some("H"), Some(v), None) => {
                frames.last_mut().unwrap().hits = Some(v.parse().unwrap())
            }
            _ => {}
        }
    }
    (out, frames)
}

/// A number after `prefix` in GDB's output, e.g. "Collected " → 1234.
pub fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

const FAST_TRACEE: &str = r#"
#include <stdlib.h>
long fcount_g = 0;
__attribute__((noinline)) long fastfn(long x) {
  asm volatile(".globl fast_site\nfast_site:\n\taddq $0x12345678, %0" : "+r"(x));
  fcount_g += 1;
  return x;
}
void end_marker(void) {}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  long s = 0;
  for (int i = 0; i < n; i++) s += fastfn(i);
  end_marker();
  return (int)(s & 1);
}
"#;

/// A recording of a fast tracepoint (`ftrace`, run by gdbserver's in-process agent) on a
/// 6-byte `add $imm32,%rax`: 100 frames of registers and `fcount_g`. `None` (with a note)
/// when the agent library is not installed or the agent cannot run here.
pub fn fast_recording() -> Option<Recording> {
    let agent = [
        "/usr/lib/libinproctrace.so",
        "/usr/lib/x86_64-linux-gnu/libinproctrace.so",
        "/usr/lib64/libinproctrace.so",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists());
    let Some(agent) = agent else {
        eprintln!("skipped fast tracepoints: gdbserver's libinproctrace.so not found");
        return None;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(concat!(env!("CARGO_PKG_NAME"), "-gdb-tfile-fast"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fast.c"), FAST_TRACEE).unwrap();
    let mut cc = Command::new("gcc");
    cc.current_dir(&dir)
        .args(["-g", "-O0", "-fno-pie", "-no-pie", "-o", "tracee", "fast.c"]);
    let out = run_with_timeout(&mut cc, Duration::from_secs(60));
    assert!(dir.join("tracee").exists(), "gcc failed:\n{out}");
    let script = format!(
        "set pagination off\nset confirm off\nfile ./tracee\ntarget remote | gdbserver --wrapper env LD_PRELOAD={agent} -- - ./tracee 100\nbreak main\ncontinue\nftrace *fast_site\nactions\n  collect $regs\n  collect fcount_g\nend\nbreak end_marker\ntstart\ncontinue\ntstop\ntsave out.tf\nkill\n"
    );
    let log = gdb_batch(&dir, &script);
    let tfile = dir.join("out.tf");
    if !tfile.exists() {
        eprintln!("skipped fast tracepoints: the in-process agent did not run here:\n{log}");
        return None;
    }
    Some(Recording {
        testglob: symbol(&dir, "fcount_g"),
        traceme: symbol(&dir, "fast_site"),
        tfile,
        dir,
    })
}
