//! The `record` rows of `cargo xtask bench record`: `tracekit record`'s recorder against a
//! bare `PTRACE_SINGLESTEP` + `waitpid` + `PTRACE_GETREGS` loop, on the same program in the
//! same run (a static C loop of loads and stores built with gcc), in steps per second,
//! with the trace's bytes per step. The program starts through the release `tracekit`
//! (`tracekit __traceme`), as `tracekit record` starts it.

use std::io::{BufWriter, Write};
use std::path::Path;

const PROGRAM: &str = "volatile long a[64];\n\
    int main(void) { for (long i = 0; i < 100000; i++) a[i & 63] += i; return 0; }\n";

/// Counts the bytes written through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub fn rows(runs: u64, tracekit: &Path) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("tracekit-bench-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join("loop.c");
    let exe = dir.join("loop");
    std::fs::write(&src, PROGRAM).map_err(|e| e.to_string())?;
    let built = std::process::Command::new("gcc")
        .args(["-O1", "-static", "-o"])
        .arg(&exe)
        .arg(&src)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        println!("{:<34} (skipped: gcc is not available)", "record");
        return Ok(());
    }
    let launch = tracekit_record::Launch {
        helper: tracekit.to_owned(),
        helper_args: vec!["__traceme".into(), "--".into()],
    };
    let (mut bare, mut recorded) = (Vec::new(), Vec::new());
    let (mut steps, mut bytes) = (0, 0);
    for _ in 0..runs.min(3) {
        let (n, secs) = tracekit_record::bare_step_loop(&launch, exe.as_os_str(), &[])
            .map_err(|e| format!("bare loop: {e}"))?;
        bare.push(n as f64 / secs);
        let file = std::fs::File::create(dir.join("loop.trace64")).map_err(|e| e.to_string())?;
        let out = Counting {
            inner: BufWriter::new(file),
            bytes: 0,
        };
        let opts = tracekit_record::Options::default();
        let (out, summary) =
            tracekit_record::record(&launch, exe.as_os_str(), &[], out, &opts, Box::new(|_| {}))
                .map_err(|e| format!("record: {e}"))?;
        recorded.push(summary.instructions as f64 / summary.elapsed.as_secs_f64());
        (steps, bytes) = (summary.instructions, out.bytes);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (bare, recorded) = (median(&mut bare), median(&mut recorded));
    println!(
        "{:<34} {:>9} steps: bare PTRACE_SINGLESTEP+GETREGS {:.0} steps/s, recorder {:.0} steps/s, ratio {:.2}, {:.1} bytes/step",
        "record (static C loop)",
        steps,
        bare,
        recorded,
        recorded / bare,
        bytes as f64 / steps.max(1) as f64
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
