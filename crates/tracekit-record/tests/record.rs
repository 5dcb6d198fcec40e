//! Recordings of small static C programs built with gcc here, checked against what the
//! programs do and against GDB's own single-stepping (`stepi` in a batch session).
//!
//! The programs start through a C helper (traceme, then exec) built the same way. Where
//! ptrace is not allowed (or gcc is missing) each test prints "skipped: …" and passes,
//! unless `TRACEKIT_REQUIRE_PTRACE=1` (set by CI), which makes that a failure; the GDB
//! comparison likewise with `TRACEKIT_REQUIRE_GDB=1`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic,
    missing_docs
)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use trac_x64dbg::Trace;
use tracekit_record::{Exit, Launch, Options, Summary};

const HELPER: &str = r#"
#include <stdio.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) { perror("PTRACE_TRACEME"); return 126; }
    personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE);
    execvp(argv[1], argv + 1);
    perror("execvp");
    return 127;
}
"#;

/// Stores i*3+1 into a global array, reads stdin into a buffer, exits with a status the
/// test knows.
const STORES: &str = r#"
#include <unistd.h>
volatile long arr[16];
char buf[64];
int main(void) {
    for (int i = 0; i < 16; i++) arr[i] = i * 3 + 1;
    long n = read(0, buf, sizeof buf);
    return (int)(arr[5] + n);
}
"#;

/// Two threads, each filling its own array.
const THREADS: &str = r#"
#include <pthread.h>
volatile long a[8], b[8];
static void *fill(void *p) {
    volatile long *x = p;
    for (int i = 0; i < 8; i++) x[i] = 0x1000 + (x == a ? 0 : 0x100) + i;
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, fill, (void *)b);
    fill((void *)a);
    pthread_join(t, 0);
    return 7;
}
"#;

/// A handler for SIGUSR1 that stores a value; then abort().
const SIGNALS: &str = r#"
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
volatile long seen;
static void on_usr1(int s) { seen = 0x5151 + s; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    kill(getpid(), SIGUSR1);
    if (seen != 0x5151 + SIGUSR1) return 1;
    abort();
}
"#;

/// A main loop that calls `work` (a range in the tests), which calls libc's `strlen`
/// (outside), and formats a line with libc's `snprintf` (outside); prints the result and
/// exits with a status made of it. The loop count is the first argument.
const RANGES: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
char text[2048];
char line[256];
__attribute__((noinline)) long work(long i) {
    long s = 0;
    for (int k = 0; k < 8; k++) s += text[k] ^ i;
    s += strlen(text);
    return s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    memset(text, 'a', 1000);
    long total = 0;
    for (int i = 0; i < n; i++) {
        total += work(i);
        snprintf(line, sizeof line, "%d %ld", i, total);
    }
    printf("%ld %s\n", total, line);
    return (int)(total & 0x7f);
}
"#;

/// SIGTRAPs the program raises itself, caught by its handler: one by `raise`, one by an
/// `int3`; exits with the count. SA_NODEFER: a step trap while SIGTRAP is blocked (in the
/// handler) makes the kernel reset the handler to the default (force_sig), for any
/// single-stepping tracer.
const TRAPS: &str = r#"
#include <signal.h>
volatile int traps;
static void on_trap(int s) { (void)s; traps++; }
int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_trap;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGTRAP, &sa, 0);
    raise(SIGTRAP);
    __asm__ volatile ("int3");
    return traps + 40;
}
"#;

/// A forked child that exits 3 (waited for), then execve of /bin/true.
const FORK_EXEC: &str = r#"
#include <sys/wait.h>
#include <unistd.h>
int status;
int main(void) {
    pid_t p = fork();
    if (p == 0) _exit(3);
    waitpid(p, &status, 0);
    char *argv[] = {"/bin/true", 0};
    execv("/bin/true", argv);
    return 1;
}
"#;

fn required(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| v == "1")
}

/// Skips (or fails under `var`=1) with `why`.
fn skip(var: &str, why: &str) -> bool {
    if required(var) {
        panic!("{why}, and {var}=1");
    }
    eprintln!("skipped: {why} (set {var}=1 to fail instead)");
    false
}

struct Env {
    dir: PathBuf,
    helper: PathBuf,
}

/// The scratch folder with the helper built, once; `None` where recording is impossible.
fn env() -> Option<&'static Env> {
    static ENV: OnceLock<Option<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("tracekit-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let helper = build(&dir, "traceme", HELPER, false)?;
        let env = Env { dir, helper };
        // A first recording tells whether ptrace is allowed here.
        let t = build(&env.dir, "probe", "int main(void){return 0;}", true)?;
        match record(&env, &t, b"", None) {
            Ok(_) => Some(env),
            Err(e) => {
                eprintln!("recording failed: {e}");
                None
            }
        }
    })
    .as_ref()
}

fn available(test: &str) -> Option<&'static Env> {
    let e = env();
    if e.is_none() {
        skip(
            "TRACEKIT_REQUIRE_PTRACE",
            &format!("{test}: gcc or ptrace is not available here"),
        );
    }
    e
}

/// Builds `source` with gcc (static when asked); `None` without gcc.
fn build(dir: &Path, name: &str, source: &str, static_: bool) -> Option<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).unwrap();
    let mut cmd = Command::new("gcc");
    cmd.args(["-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src);
    if static_ {
        cmd.arg("-static");
    }
    match cmd.status() {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("gcc failed on {name}: {s}"),
        Err(_) => None,
    }
}

/// Records `exe` with `stdin` as its input (an empty environment, as the GDB comparison
/// runs it); the trace and the summary.
fn record(
    env: &Env,
    exe: &Path,
    stdin: &[u8],
    max: Option<u64>,
) -> Result<(Vec<u8>, Summary), tracekit_record::Error> {
    let opts = Options {
        max,
        ..Options::default()
    };
    record_with(env, exe, &[], stdin, opts).map(|(t, s, _)| (t, s))
}

/// As [`record`], with arguments and options; also gives what the program wrote on stdout.
fn record_with(
    env: &Env,
    exe: &Path,
    args: &[&str],
    stdin: &[u8],
    opts: Options,
) -> Result<(Vec<u8>, Summary, Vec<u8>), tracekit_record::Error> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let input = env.dir.join(format!("stdin-{n}.bin"));
    let output = env.dir.join(format!("stdout-{n}.bin"));
    std::fs::write(&input, stdin).unwrap();
    // The helper runs with an empty environment and the input file as stdin.
    let launch = Launch {
        helper: PathBuf::from("/bin/sh"),
        helper_args: vec![
            "-c".into(),
            format!(
                "exec env -i {} \"$0\" \"$@\" < {} > {}",
                env.helper.display(),
                input.display(),
                output.display()
            )
            .into(),
        ],
    };
    let opts = Options {
        path: exe.display().to_string(),
        fixed_random: true,
        ..opts
    };
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let (trace, summary) = tracekit_record::record(
        &launch,
        exe.as_os_str(),
        &args,
        Vec::new(),
        &opts,
        Box::new(|note| eprintln!("{note}")),
    )?;
    Ok((trace, summary, std::fs::read(&output).unwrap_or_default()))
}

/// What `exe ARGS` does when run directly (empty environment): exit code and stdout.
fn run_plain(exe: &Path, args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let o = Command::new(exe)
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (o.status.code(), o.stdout)
}

/// A memory access as read back: address, old, new.
type Access = (u64, u64, Option<u64>);

/// The pcs, threads and memory writes `(address, new)` of a trace.
struct Read {
    pcs: Vec<u64>,
    /// rsp before each instruction.
    rsp: Vec<u64>,
    threads: Vec<u32>,
    writes: Vec<(u64, u64)>,
    /// Per instruction: opcode, rax before, memory (address, old, new).
    steps: Vec<(Vec<u8>, u64, Vec<Access>)>,
}

fn read(bytes: &[u8]) -> Read {
    let trace = Trace::parse(bytes).unwrap();
    let mut replay = trace.replay();
    let mut r = Read {
        pcs: Vec::new(),
        rsp: Vec::new(),
        threads: Vec::new(),
        writes: Vec::new(),
        steps: Vec::new(),
    };
    while let Some(ins) = replay.next_instruction() {
        let ins = ins.unwrap();
        r.pcs.push(replay.regs().ip());
        r.rsp.push(replay.regs().sp());
        r.threads.push(ins.thread());
        let mem: Vec<_> = ins.mem().map(|m| (m.address, m.old, m.new)).collect();
        for &(a, _, n) in &mem {
            if let Some(n) = n {
                r.writes.push((a, n));
            }
        }
        r.steps
            .push((ins.opcode().to_vec(), replay.regs().cax(), mem));
    }
    r
}

/// The address of `symbol` in `exe` (nm).
fn symbol(exe: &Path, symbol: &str) -> u64 {
    symbol_range(exe, symbol).0
}

/// The address range `(start, end)` of `symbol` in `exe` (`nm -S`).
fn symbol_range(exe: &Path, symbol: &str) -> (u64, u64) {
    let out = Command::new("nm").arg("-S").arg(exe).output().expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.last() == Some(&symbol))
        .unwrap_or_else(|| panic!("{symbol} not in nm's output"));
    let start = u64::from_str_radix(fields[0], 16).unwrap();
    let size = match fields.len() {
        4 => u64::from_str_radix(fields[1], 16).unwrap(),
        _ => 0,
    };
    (start, start + size)
}

/// GDB's pcs when it single-steps `exe` from its first instruction to its exit, with
/// `stdin` as input and an empty environment (GDB's LINES and COLUMNS unset).
fn gdb_pcs(env: &Env, exe: &Path, stdin: &[u8]) -> Option<Vec<u64>> {
    gdb_pcs_with(env, exe, &[], stdin)
}

/// [`gdb_pcs`] with arguments.
fn gdb_pcs_with(env: &Env, exe: &Path, args: &[&str], stdin: &[u8]) -> Option<Vec<u64>> {
    if Command::new("gdb")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        skip("TRACEKIT_REQUIRE_GDB", "gdb is not installed");
        return None;
    }
    let input = env.dir.join("gdb-stdin.bin");
    std::fs::write(&input, stdin).unwrap();
    let script = env.dir.join("stepi.gdb");
    std::fs::write(
        &script,
        format!(
            "set pagination off\nset confirm off\nset startup-with-shell off\n\
             unset environment LINES\nunset environment COLUMNS\nstarti {} < {}\n\
             while 1\n  printf \"PC %lx\\n\", $pc\n  stepi\nend\n",
            args.join(" "),
            input.display()
        ),
    )
    .unwrap();
    let out = Command::new("gdb")
        .env_clear()
        .args(["-nx", "-batch", "-x"])
        .arg(&script)
        .arg(exe)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let pcs: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("PC "))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .collect();
    assert!(
        text.contains("exited with code"),
        "gdb did not run the program to its end:\n{text}"
    );
    Some(pcs)
}

#[test]
fn stores_and_read_are_recorded_and_pcs_equal_gdbs() {
    let Some(env) = available("stores_and_read_are_recorded_and_pcs_equal_gdbs") else {
        return;
    };
    let exe = build(&env.dir, "stores", STORES, true).unwrap();
    let input = b"hello, tracer\n";
    let (bytes, summary) = record(env, &exe, input, None).unwrap();
    assert_eq!(summary.exit, Exit::Code(16 + input.len() as i32));
    assert_eq!(summary.threads, 1);
    let r = read(&bytes);
    assert_eq!(r.pcs.len() as u64, summary.instructions);
    // Linux's initial x87 and SSE control words, from NT_X86_XSTATE, in the first dump.
    let trace = Trace::parse(&bytes).unwrap();
    let mut replay = trace.replay();
    replay.next_instruction().unwrap().unwrap();
    assert_eq!(replay.regs().mxcsr(), 0x1f80);
    assert_eq!(replay.regs().x87_fpu().control_word, 0x37f);
    assert_eq!(replay.regs().segment(trac_x64dbg::Segment::Cs), 0x33);
    // Every store of the loop, with the value the program wrote, in order.
    let arr = symbol(&exe, "arr");
    let stores: Vec<(u64, u64)> = r
        .writes
        .iter()
        .copied()
        .filter(|(a, _)| (arr..arr + 16 * 8).contains(a))
        .collect();
    let expected: Vec<(u64, u64)> = (0..16).map(|i| (arr + 8 * i, i * 3 + 1)).collect();
    assert_eq!(stores, expected);
    // The read: its syscall step wrote the input into buf.
    let buf = symbol(&exe, "buf");
    let read_step = r
        .steps
        .iter()
        .find(|(op, rax, _)| op == &[0x0f, 0x05] && *rax == 0)
        .expect("a read system call");
    let mut got = [0u8; 16];
    for &(a, old, new) in &read_step.2 {
        let v = new.unwrap_or(old).to_le_bytes();
        for (k, b) in v.iter().enumerate() {
            let at = a + k as u64;
            if (buf..buf + 16).contains(&at) {
                got[(at - buf) as usize] = *b;
            }
        }
    }
    assert_eq!(&got[..input.len()], input);
    // With `fixed_random`, glibc's getrandom (malloc's seed) returned zeros.
    let getrandom = r
        .steps
        .iter()
        .find(|(op, rax, _)| op == &[0x0f, 0x05] && *rax == 318)
        .expect("glibc calls getrandom");
    assert!(!getrandom.2.is_empty());
    assert!(
        getrandom
            .2
            .iter()
            .all(|&(_, old, new)| new.unwrap_or(old) == 0)
    );
    // Two recordings of the program are the same.
    let (again, _) = record(env, &exe, input, None).unwrap();
    assert_eq!(read(&again).pcs, r.pcs);
    // GDB's single-stepping visits the same pcs.
    if let Some(gdb) = gdb_pcs(env, &exe, input) {
        assert_eq!(
            gdb.len(),
            r.pcs.len(),
            "instruction count differs from gdb's"
        );
        assert!(gdb == r.pcs, "the pc sequence differs from gdb's");
    }
}

#[test]
fn threads_are_followed() {
    let Some(env) = available("threads_are_followed") else {
        return;
    };
    let exe = build(&env.dir, "threads", THREADS, true).unwrap();
    let (bytes, summary) = record(env, &exe, b"", None).unwrap();
    assert_eq!(summary.exit, Exit::Code(7));
    assert_eq!(summary.threads, 2);
    let r = read(&bytes);
    let mut ids = r.threads.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2, "two thread ids in the trace");
    assert_each_thread_stored(&r, &exe);
}

#[test]
fn signal_handlers_run_and_a_fatal_signal_ends_the_program() {
    let Some(env) = available("signal_handlers_run_and_a_fatal_signal_ends_the_program") else {
        return;
    };
    let exe = build(&env.dir, "signals", SIGNALS, true).unwrap();
    let (bytes, summary) = record(env, &exe, b"", None).unwrap();
    assert_eq!(summary.exit, Exit::Signal(6), "abort()");
    assert_eq!(summary.exit.code(), 134);
    let r = read(&bytes);
    let seen = symbol(&exe, "seen");
    assert!(
        r.writes.contains(&(seen, 0x5151 + 10)),
        "the handler's store"
    );
    // The handler's instructions are in the trace.
    let handler = symbol(&exe, "on_usr1");
    assert!(r.pcs.contains(&handler));
}

#[test]
fn max_stops_the_recording_and_the_program_runs_on() {
    let Some(env) = available("max_stops_the_recording_and_the_program_runs_on") else {
        return;
    };
    let exe = build(&env.dir, "stores_max", STORES, true).unwrap();
    let (bytes, summary) = record(env, &exe, b"abc", Some(1000)).unwrap();
    assert_eq!(summary.instructions, 1000);
    assert!(summary.stopped_at_max);
    assert_eq!(summary.exit, Exit::Code(19));
    assert_eq!(read(&bytes).pcs.len(), 1000);
}

#[test]
fn forks_run_untraced_and_execve_ends_the_trace() {
    let Some(env) = available("forks_run_untraced_and_execve_ends_the_trace") else {
        return;
    };
    let exe = build(&env.dir, "fork_exec", FORK_EXEC, true).unwrap();
    let (bytes, summary) = record(env, &exe, b"", None).unwrap();
    assert_eq!(summary.exit, Exit::Code(0), "/bin/true's status");
    assert_eq!(summary.forks.len(), 1);
    assert!(summary.execed);
    assert_eq!(summary.threads, 1);
    let r = read(&bytes);
    // waitpid's status word, written by the kernel: the child's exit 3.
    let status = symbol(&exe, "status");
    assert!(
        r.writes
            .iter()
            .any(|&(a, v)| a == status && v & 0xffff_ffff == 3 << 8),
        "wait4 wrote the status"
    );
    // The last instruction is the execve.
    let (op, rax, _) = r.steps.last().unwrap();
    assert_eq!((op.as_slice(), *rax), (&[0x0f, 0x05][..], 59));
}

#[test]
fn a_range_records_only_its_instructions_and_libc_runs_free() {
    let Some(env) = available("a_range_records_only_its_instructions_and_libc_runs_free") else {
        return;
    };
    let exe = build(&env.dir, "ranges", RANGES, true).unwrap();
    let (a, b) = symbol_range(&exe, "work");
    let n = 3;
    let args = ["3"];
    let (full_bytes, full, full_out) =
        record_with(env, &exe, &args, b"", Options::default()).unwrap();
    let opts = Options {
        ranges: vec![(a, b)],
        ..Options::default()
    };
    let (bytes, ranged, out) = record_with(env, &exe, &args, b"", opts).unwrap();
    // The program does what it does untraced.
    let (code, plain_out) = run_plain(&exe, &args);
    assert_eq!(Some(full.exit), code.map(Exit::Code));
    assert_eq!(Some(ranged.exit), code.map(Exit::Code));
    assert_eq!(out, plain_out);
    assert_eq!(full_out, plain_out);
    // Only the range, and all of it: the full recording's instructions in the range, in
    // order (the full recording's pcs are GDB's, see the stores test).
    let r = read(&bytes);
    assert!(
        r.pcs.iter().all(|p| (a..b).contains(p)),
        "a pc outside the range"
    );
    let inside: Vec<u64> = read(&full_bytes)
        .pcs
        .into_iter()
        .filter(|p| (a..b).contains(p))
        .collect();
    assert_eq!(
        r.pcs.len(),
        inside.len(),
        "count differs from the full recording's"
    );
    assert!(r.pcs == inside, "pcs differ from the full recording's");
    assert_eq!(ranged.instructions, r.pcs.len() as u64);
    assert_eq!(
        r.pcs.iter().filter(|&&p| p == a).count(),
        n,
        "one entry a call"
    );
    assert!(ranged.gaps >= n as u64, "{}", ranged.gaps);
    // The registers after each gap are the program's: strlen's result (1000) in rax and
    // the stack as before the call, at the instruction after the call.
    let mut calls = 0;
    for k in 0..r.pcs.len() - 1 {
        if r.steps[k].0[0] == 0xe8 {
            assert_eq!(r.pcs[k + 1], r.pcs[k] + 5, "back after the call");
            assert_eq!(r.steps[k + 1].1, 1000, "rax = strlen(text)");
            assert_eq!(r.rsp[k + 1], r.rsp[k], "rsp after the return");
            calls += 1;
        }
    }
    assert_eq!(calls, n);
    // Faster than recording everything.
    eprintln!(
        "full: {} instructions in {:?}; --range: {} in {:?}",
        full.instructions, full.elapsed, ranged.instructions, ranged.elapsed
    );
    assert!(ranged.elapsed < full.elapsed);
    // GDB's single-stepping, restricted to the range.
    if let Some(gdb) = gdb_pcs_with(env, &exe, &args, b"") {
        let gdb: Vec<u64> = gdb.into_iter().filter(|p| (a..b).contains(p)).collect();
        assert_eq!(gdb.len(), r.pcs.len(), "count differs from gdb's");
        assert!(gdb == r.pcs, "pcs differ from gdb's");
    }
}

#[test]
fn a_module_is_the_main_executable_of_a_dynamic_program() {
    let Some(env) = available("a_module_is_the_main_executable_of_a_dynamic_program") else {
        return;
    };
    let exe = build(&env.dir, "ranges_dyn", RANGES, false).unwrap();
    let args = ["3"];
    let opts = Options {
        modules: vec!["ranges_dyn".into()],
        ..Options::default()
    };
    let (bytes, summary, out) = record_with(env, &exe, &args, b"", opts).unwrap();
    let (code, plain_out) = run_plain(&exe, &args);
    assert_eq!(Some(summary.exit), code.map(Exit::Code));
    assert_eq!(out, plain_out);
    let r = read(&bytes);
    assert!(!summary.ranges.is_empty());
    assert!(
        r.pcs
            .iter()
            .all(|&p| summary.ranges.iter().any(|&(s, e)| (s..e).contains(&p))),
        "a pc outside the executable's code"
    );
    // The first instruction recorded is the entry point (reached from the loader); main
    // (called from libc) once; work three times.
    let base = r.pcs[0] - symbol(&exe, "_start");
    assert_eq!(base % 4096, 0, "{base:#x}");
    let main = base + symbol(&exe, "main");
    assert_eq!(r.pcs.iter().filter(|&&p| p == main).count(), 1);
    let (wa, wb) = symbol_range(&exe, "work");
    let (wa, wb) = (base + wa, base + wb);
    assert_eq!(r.pcs.iter().filter(|&&p| p == wa).count(), 3);
    // work's instructions are those a --range of work records (strlen through the PLT:
    // the jump out of the module comes back at the return address).
    let opts = Options {
        ranges: vec![(wa, wb)],
        ..Options::default()
    };
    let (only_work, _, _) = record_with(env, &exe, &args, b"", opts).unwrap();
    let in_work: Vec<u64> = r
        .pcs
        .iter()
        .copied()
        .filter(|p| (wa..wb).contains(p))
        .collect();
    let only_work = read(&only_work).pcs;
    assert!(!only_work.is_empty());
    assert!(
        in_work == only_work,
        "work's pcs differ between --module and --range"
    );
}

#[test]
fn a_module_never_mapped_is_an_error() {
    let Some(env) = available("a_module_never_mapped_is_an_error") else {
        return;
    };
    for static_ in [true, false] {
        // Names of their own: tests run in parallel, and gcc must not rewrite a file
        // another test executes.
        let name = if static_ { "nomodule" } else { "nomodule_dyn" };
        let exe = build(&env.dir, name, RANGES, static_).unwrap();
        let opts = Options {
            modules: vec!["libnothere.so".into()],
            ..Options::default()
        };
        match record_with(env, &exe, &["1"], b"", opts) {
            Err(tracekit_record::Error::ModuleNotFound { name, mapped }) => {
                assert_eq!(name, "libnothere.so");
                assert!(mapped.contains(&format!("{}", exe.file_name().unwrap().display())));
            }
            other => panic!("static {static_}: {:?}", other.map(|(_, s, _)| s)),
        }
    }
}

#[test]
fn two_threads_share_the_breakpoints_of_a_range() {
    let Some(env) = available("two_threads_share_the_breakpoints_of_a_range") else {
        return;
    };
    let exe = build(&env.dir, "threads_range", THREADS, true).unwrap();
    let (a, b) = symbol_range(&exe, "fill");
    let opts = Options {
        ranges: vec![(a, b)],
        ..Options::default()
    };
    let (bytes, summary, _) = record_with(env, &exe, &[], b"", opts).unwrap();
    assert_eq!(summary.exit, Exit::Code(7));
    let r = read(&bytes);
    assert!(r.pcs.iter().all(|p| (a..b).contains(p)));
    let mut ids = r.threads.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2, "both threads ran fill");
    assert_eq!(r.pcs.iter().filter(|&&p| p == a).count(), 2);
    assert_each_thread_stored(&r, &exe);
}

#[test]
fn sigtraps_the_program_raises_are_delivered() {
    let Some(env) = available("sigtraps_the_program_raises_are_delivered") else {
        return;
    };
    let exe = build(&env.dir, "traps", TRAPS, true).unwrap();
    assert_eq!(run_plain(&exe, &[]).0, Some(42));
    let (bytes, summary) = record(env, &exe, b"", None).unwrap();
    assert_eq!(
        summary.exit,
        Exit::Code(42),
        "both traps reached the handler"
    );
    let handler = symbol(&exe, "on_trap");
    assert_eq!(
        read(&bytes).pcs.iter().filter(|&&p| p == handler).count(),
        2
    );
}

#[test]
fn max_counts_recorded_instructions_and_removes_the_breakpoints() {
    let Some(env) = available("max_counts_recorded_instructions_and_removes_the_breakpoints")
    else {
        return;
    };
    let exe = build(&env.dir, "ranges_max", RANGES, true).unwrap();
    let args = ["5"];
    let (code, plain_out) = run_plain(&exe, &args);
    let (a, b) = symbol_range(&exe, "work");
    // A range (a hardware breakpoint at its start) and a module (int3 breakpoints at its
    // function symbols): after --max the program runs on untraced, unharmed.
    for opts in [
        Options {
            ranges: vec![(a, b)],
            ..Options::default()
        },
        Options {
            modules: vec!["ranges_max".into()],
            ..Options::default()
        },
    ] {
        let opts = Options {
            max: Some(30),
            ..opts
        };
        let (bytes, summary, out) = record_with(env, &exe, &args, b"", opts.clone()).unwrap();
        assert_eq!(summary.instructions, 30, "{opts:?}");
        assert!(summary.stopped_at_max);
        assert_eq!(read(&bytes).pcs.len(), 30);
        assert_eq!(Some(summary.exit), code.map(Exit::Code), "{opts:?}");
        assert_eq!(out, plain_out, "{opts:?}");
    }
}

/// The two threads of the THREADS program each filled their array: `a` with 0x1000 + i,
/// `b` with 0x1100 + i, eight words each, all recorded.
fn assert_each_thread_stored(r: &Read, exe: &Path) {
    for (name, base) in [("a", 0x1000u64), ("b", 0x1100)] {
        let at = symbol(exe, name);
        let stores: Vec<(u64, u64)> = r
            .writes
            .iter()
            .copied()
            .filter(|(a, _)| (at..at + 64).contains(a))
            .collect();
        let expected: Vec<(u64, u64)> = (0..8).map(|i| (at + 8 * i, base + i)).collect();
        assert_eq!(stores, expected, "stores into {name}");
    }
}

/// The bench's loop (`cargo xtask bench record`): loads and stores of a global array.
const TIGHT_LOOP: &str = "volatile long a[64];\n\
    int main(void) { for (long i = 0; i < 5000; i++) a[i & 63] += i; return 0; }\n";

#[test]
fn a_tight_loop_takes_at_most_40_bytes_a_step() {
    let Some(env) = available("a_tight_loop_takes_at_most_40_bytes_a_step") else {
        return;
    };
    let exe = build(&env.dir, "tight", TIGHT_LOOP, true).unwrap();
    // `main` only: the loop, without glibc's start-up.
    let opts = Options {
        ranges: vec![symbol_range(&exe, "main")],
        ..Options::default()
    };
    let (bytes, summary, _) = record_with(env, &exe, &[], b"", opts).unwrap();
    let steps = read(&bytes).pcs.len();
    assert_eq!(summary.instructions, steps as u64);
    assert!(steps > 5000 * 5, "{steps} steps");
    let per_step = bytes.len() as f64 / steps as f64;
    eprintln!(
        "{steps} steps, {} bytes, {per_step:.1} bytes a step",
        bytes.len()
    );
    assert!(per_step <= 40.0, "{per_step:.1} bytes a step");
}
