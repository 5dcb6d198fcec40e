//! The `gdbserver` rows of `cargo xtask bench gdbserver [--trace FILE] [--state-gib N]`:
//! `tracekit gdbserver --stdio` (the release binary) on an x64dbg trace with its sidecar
//! (the synthetic trace of `cargo xtask synth x64dbg`, about `--state-gib` GiB, unless
//! `--trace` names one), driven by a small GDB remote-protocol client that sends what GDB
//! sends for each command and times the round trips: start (spawn to the first reply),
//! `stepi` and `reverse-stepi` (the resume, then `g` and the reads GDB makes after a stop:
//! 16 bytes at the pc, 64 at the stack), `monitor goto N` near the start, middle and end
//! (then `g`), `continue`/`reverse-continue` to a breakpoint (a pc executed once in a
//! while and a hot one) and to a watchpoint (a word written near the middle), each with
//! the breakpoint packets GDB sends around it; and the server's peak memory (`VmHWM`).
//! Medians of `--runs`; the goals are 5 ms, 50 ms and 100 ms.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use trace_registry::{Ctx, Input, Options};

/// A GDB remote-protocol client over a child's stdin and stdout (no-ack mode after the
/// handshake).
struct Rsp {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    acks: bool,
}

impl Rsp {
    fn spawn(tracekit: &Path, trace: &Path) -> Rsp {
        let mut child = Command::new(tracekit)
            .args(["-q", "gdbserver", "--stdio"])
            .arg(trace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run tracekit gdbserver");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Rsp {
            child,
            input,
            output,
            acks: true,
        }
    }

    fn byte(&mut self) -> u8 {
        let mut b = [0u8];
        self.output.read_exact(&mut b).expect("the server closed");
        b[0]
    }

    /// Sends `packet` and returns the reply (console `O` packets skipped).
    fn ask(&mut self, packet: &str) -> String {
        let sum = packet.bytes().fold(0u8, u8::wrapping_add);
        write!(self.input, "${packet}#{sum:02x}").unwrap();
        self.input.flush().unwrap();
        loop {
            let reply = self.reply();
            if reply.starts_with('O') && reply != "OK" {
                continue;
            }
            return reply;
        }
    }

    fn reply(&mut self) -> String {
        loop {
            match self.byte() {
                b'$' => break,
                b'+' | b'-' => {}
                b => panic!("unexpected byte {b:#x}"),
            }
        }
        let mut data = Vec::new();
        loop {
            match self.byte() {
                b'#' => break,
                b => data.push(b),
            }
        }
        self.byte();
        self.byte();
        if self.acks {
            self.input.write_all(b"+").unwrap();
        }
        // Run-length encoding (`x*N`): expanded.
        let mut out = Vec::new();
        let mut k = 0;
        while k < data.len() {
            if data[k] == b'*' && k + 1 < data.len() {
                let n = usize::from(data[k + 1]).saturating_sub(29);
                let last = *out.last().unwrap_or(&b'0');
                out.extend(std::iter::repeat_n(last, n));
                k += 2;
            } else {
                out.push(data[k]);
                k += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn handshake(&mut self) -> String {
        self.input.write_all(b"+").unwrap();
        self.ask("qSupported:multiprocess+;swbreak+;hwbreak+;vContSupported+;xmlRegisters=i386");
        assert_eq!(self.ask("QStartNoAckMode"), "OK");
        self.acks = false;
        self.ask("?")
    }

    /// `monitor CMD`: the console text.
    fn monitor(&mut self, cmd: &str) -> String {
        let hex: String = cmd.bytes().map(|b| format!("{b:02x}")).collect();
        let sum = format!("qRcmd,{hex}").bytes().fold(0u8, u8::wrapping_add);
        write!(self.input, "$qRcmd,{hex}#{sum:02x}").unwrap();
        self.input.flush().unwrap();
        let mut text = String::new();
        loop {
            let r = self.reply();
            if let Some(h) = r.strip_prefix('O').filter(|_| r != "OK") {
                text.extend(
                    (0..h.len() / 2)
                        .map(|k| u8::from_str_radix(&h[2 * k..2 * k + 2], 16).unwrap() as char),
                );
            } else {
                assert_eq!(r, "OK", "monitor {cmd}");
                return text;
            }
        }
    }

    /// What GDB reads after a stop: the registers, code at the pc, the stack.
    fn after_stop(&mut self) -> (u64, u64) {
        let g = self.ask("g");
        let word = |at: usize| {
            let hex = &g[at * 2..at * 2 + 16];
            u64::from_str_radix(hex, 16)
                .map(u64::swap_bytes)
                .unwrap_or(0)
        };
        let (pc, sp) = (word(128), word(56));
        self.ask(&format!("m{pc:x},10"));
        self.ask(&format!("m{:x},40", sp & !63));
        (pc, sp)
    }

    /// The step the server is at (`monitor when`).
    fn when(&mut self) -> u64 {
        let w = self.monitor("when");
        w.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX)
    }

    /// A field of `/proc/PID/status`, in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }

    fn finish(mut self) {
        let _ = self.ask("D");
        let _ = self.child.wait();
    }
}

fn median_ms(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2] * 1e3
}

/// The trace to serve: `--trace`, else a synthetic one of `gib` GiB in `dir`.
fn trace(given: Option<&str>, gib: u64, dir: &Path) -> PathBuf {
    if let Some(t) = given {
        return PathBuf::from(t);
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("big.trace64");
    let synth = crate::formats::find("x64dbg").unwrap().synth.unwrap();
    // About 53 bytes a record.
    let bytes = synth(gib.max(1) * (20 << 20), 1);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A pc executed rarely (the rarest of the pcs of the steps near the middle) and a hot
/// one (the most executed), with their counts; a word written near the middle.
fn targets(path: &Path, count: u64) -> ((u64, usize), (u64, usize), (u64, u64)) {
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = Options::default();
    let mut input = Input::open(path.as_os_str()).unwrap();
    let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
    steps.seek(count / 2).unwrap();
    let mut pcs = Vec::new();
    let mut word = None;
    for _ in 0..2000 {
        let Some(s) = steps.next_step() else { break };
        let s = s.unwrap();
        pcs.push(s.pc);
        if word.is_none()
            && let Some(a) = s.mem.iter().find(|a| a.new.is_some())
        {
            word = Some((a.addr, s.i));
        }
    }
    drop(steps);
    pcs.sort_unstable();
    pcs.dedup();
    let identity = trace_index::Identity::of(path).unwrap();
    let mut sidecar =
        trace_index::Sidecar::open(&trace_index::default_path(path), &identity, "x64dbg").unwrap();
    let mut counted: Vec<(u64, usize)> = pcs
        .iter()
        .map(|&pc| (pc, sidecar.executions(pc).unwrap().len()))
        .collect();
    counted.sort_by_key(|&(_, n)| n);
    (
        counted[0],
        *counted.last().unwrap(),
        word.expect("a write near the middle"),
    )
}

pub fn rows(runs: u64, tracekit: &Path, given: Option<&str>, gib: u64) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("tracekit-bench-gdb-{}", std::process::id()));
    let path = trace(given, gib, &dir);
    let size = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
    let mib = size as f64 / (1u64 << 20) as f64;
    let index = trace_index::default_path(&path);
    // The sidecar first (the rows are about a start with one).
    let built = Instant::now();
    let status = Command::new(tracekit)
        .args(["-q", "index", "--force"])
        .arg(&path)
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err("tracekit index failed".into());
    }
    let built = built.elapsed().as_secs_f64();
    let mut starts = Vec::new();
    for _ in 0..runs.min(3) {
        let t = Instant::now();
        let mut s = Rsp::spawn(tracekit, &path);
        s.handshake();
        starts.push(t.elapsed().as_secs_f64());
        s.finish();
    }
    let t = Instant::now();
    let mut s = Rsp::spawn(tracekit, &path);
    let stop = s.handshake();
    starts.push(t.elapsed().as_secs_f64());
    let tid = stop
        .split("thread:")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .unwrap_or("p1.1")
        .to_owned();
    let info = s.monitor("info");
    let count: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("steps: "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or("no step count in `monitor info`")?;
    println!(
        "{:<34} {:>9.1} {count} steps; index built in {built:.1} s; start with it {:.1} ms",
        "x64dbg gdbserver (RSP, --stdio)",
        mib,
        median_ms(starts)
    );
    let mut line = Vec::new();
    for (name, at) in [
        ("start", 1000),
        ("middle", count / 2),
        ("end", count - 1000),
    ] {
        let mut goto = Vec::new();
        let (mut fwd, mut back) = (Vec::new(), Vec::new());
        for r in 0..runs.max(5) {
            let t = Instant::now();
            let w = s.monitor(&format!("goto {}", at + r));
            s.after_stop();
            goto.push(t.elapsed().as_secs_f64());
            assert!(w.starts_with("step "), "{w}");
            let t = Instant::now();
            s.ask(&format!("vCont;s:{tid};c:p1.-1"));
            s.after_stop();
            fwd.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            s.ask(&format!("Hc{tid}"));
            s.ask("bs");
            s.after_stop();
            back.push(t.elapsed().as_secs_f64());
        }
        line.push(format!(
            "{name}: goto {:.2} ms, stepi {:.2} ms, reverse-stepi {:.2} ms",
            median_ms(goto),
            median_ms(fwd),
            median_ms(back)
        ));
    }
    println!(
        "{:<34} {:>9.1} {}",
        "x64dbg gdbserver (step, goto)",
        mib,
        line.join("; ")
    );
    let (rare, hot, (word, written)) = targets(&path, count);
    let mut line = Vec::new();
    for (what, z, addr, len) in [
        (format!("break (pc run {}x)", rare.1), "0", rare.0, 1u64),
        (format!("break (pc run {}x)", hot.1), "0", hot.0, 1),
        (format!("watch (written at {written})"), "2", word, 8),
    ] {
        let (mut fwd, mut back) = (Vec::new(), Vec::new());
        let (mut to_f, mut to_b) = (0, 0);
        for r in 0..runs.max(5) {
            s.monitor(&format!("goto {}", r * 7));
            let t = Instant::now();
            assert_eq!(s.ask(&format!("Z{z},{addr:x},{len:x}")), "OK");
            s.ask("vCont;c:p1.-1");
            s.ask(&format!("z{z},{addr:x},{len:x}"));
            s.after_stop();
            fwd.push(t.elapsed().as_secs_f64());
            to_f = s.when();
            s.monitor(&format!("goto {}", count - 1 - r * 7));
            let t = Instant::now();
            s.ask(&format!("Z{z},{addr:x},{len:x}"));
            s.ask("bc");
            s.ask(&format!("z{z},{addr:x},{len:x}"));
            s.after_stop();
            back.push(t.elapsed().as_secs_f64());
            to_b = s.when();
        }
        line.push(format!(
            "{what}: continue {:.1} ms (to {to_f}), reverse-continue {:.1} ms (to {to_b})",
            median_ms(fwd),
            median_ms(back)
        ));
    }
    println!(
        "{:<34} {:>9.1} {}",
        "x64dbg gdbserver (continue)",
        mib,
        line.join("; ")
    );
    println!(
        "{:<34} {:>9.1} memory: {:.1} MiB anonymous (RssAnon), peak resident {:.1} MiB (VmHWM: with the pages of the mapped trace and index read)",
        "x64dbg gdbserver (memory)",
        mib,
        s.status_kib("RssAnon:") as f64 / 1024.0,
        s.status_kib("VmHWM:") as f64 / 1024.0
    );
    s.finish();
    // The caller's trace keeps its index; a synthetic one goes with its folder.
    if given.is_none() {
        let _ = std::fs::remove_file(&index);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
