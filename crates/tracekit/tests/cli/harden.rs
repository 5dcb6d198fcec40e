//! The edges around the readers: a trace cut short while a batch command reads it, inputs
//! that are pipes or endless devices, and the leftovers of killed runs.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tk-harden-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `dump` of a trace truncated while it runs (its output held up by a slow reader): exit 1
/// with "FILE changed while it was read (at offset 0x…)", and no SIGBUS.
#[test]
fn a_trace_cut_under_dump_is_an_error_with_the_offset() {
    let dir = temp_dir("dump-cut");
    let path = dir.join("long.log");
    std::fs::write(&path, tenet_trace(300_000)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["-q", "dump"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = vec![0u8; 64 * 1024];
    out.read_exact(&mut first).unwrap();
    // dump now waits on the full pipe, far before the cut.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(2_000_000)
        .unwrap();
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {} changed while it was read (at offset 0x",
            path.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The dump of `file` read as a path.
fn dump_of(file: &std::path::Path) -> String {
    let o = tracekit([
        std::ffi::OsStr::new("-q"),
        "dump".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o)
}

/// `<(…)` (a pipe behind /dev/fd/N), compressed or not: detected and read as a stream from
/// the one open handle.
#[test]
fn process_substitution_is_read_as_a_stream() {
    for fixture in [
        "tenet/basic.log",
        "gdb-tfile/amd64.tf",
        "x64dbg/basic.trace64",
        "dcfg-trace/basic.trace.json",
    ] {
        let file = testdata(fixture);
        let want = dump_of(&file);
        for producer in ["cat", "gzip -c"] {
            let o = Command::new("bash")
                .arg("-c")
                .arg(format!("exec \"$0\" -q dump <({producer} \"$1\")"))
                .arg(env!("CARGO_BIN_EXE_tracekit"))
                .arg(&file)
                .output()
                .unwrap();
            assert_eq!(
                o.status.code(),
                Some(0),
                "{fixture} {producer}: {}",
                stderr(&o)
            );
            assert_eq!(stdout(&o), want, "{fixture} through <({producer} …)");
        }
    }
}

/// A named pipe: opened once (a second open would wait for a writer that is gone).
#[test]
fn a_named_pipe_is_read_once() {
    let dir = temp_dir("fifo");
    let file = testdata("tenet/basic.log");
    let want = dump_of(&file);
    let fifo = dir.join("trace.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let writer = {
        let (fifo, file) = (fifo.clone(), file.clone());
        std::thread::spawn(move || {
            let bytes = std::fs::read(file).unwrap();
            std::fs::write(fifo, bytes).unwrap();
        })
    };
    let start = std::time::Instant::now();
    let o = tracekit([
        std::ffi::OsStr::new("-q"),
        "dump".as_ref(),
        fifo.as_os_str(),
    ]);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), want);
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Endless devices: detection reads a bounded prefix ("cannot tell the format", at
/// once), and every format forced on them fails at its first impossible field, each in
/// under 100 MiB of address space (`ulimit -v`) and a few seconds. (amber TT6/TT6E have no
/// impossible field in random bytes, so /dev/urandom is only tried on the others.)
#[test]
fn endless_devices_are_refused_quickly_in_bounded_memory() {
    let formats = [
        None,
        Some("x64dbg"),
        Some("gdb-tfile"),
        Some("dcfg"),
        Some("dcfg-trace"),
        Some("tt6"),
        Some("tt6e"),
        Some("amber-full"),
        Some("tenet"),
    ];
    for format in formats {
        for device in ["/dev/zero", "/dev/urandom"] {
            if device == "/dev/urandom" && matches!(format, Some("tt6" | "tt6e")) {
                continue;
            }
            let forced = format.map_or(String::new(), |f| format!("--format {f}"));
            let start = std::time::Instant::now();
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "ulimit -v 102400; exec timeout 20 \"$0\" -q {forced} info {device}"
                ))
                .arg(env!("CARGO_BIN_EXE_tracekit"))
                .output()
                .unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{format:?} {device}: {err}");
            assert!(err.starts_with("error: "), "{format:?} {device}: {err}");
            if format.is_none() {
                assert!(err.contains("cannot tell the format of"), "{err}");
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "{format:?} {device}: {:?}",
                start.elapsed()
            );
        }
    }
}

/// The tables of the dataset at `dir` (folders, sorted) and its manifest.
fn dataset(dir: &std::path::Path) -> (Vec<String>, serde_json::Value) {
    let mut tables: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    tables.sort();
    let manifest = serde_json::from_slice(&std::fs::read(dir.join("_tracekit.json")).unwrap());
    (tables, manifest.unwrap())
}

/// Every gdb-tfile dataset has the same four tables, empty where the file has no such
/// blocks: a file whose frames have no `R` block, and one without a target description,
/// still get `registers` (no rows).
#[test]
fn tfile_datasets_have_the_same_tables_whatever_the_blocks() {
    let dir = temp_dir("tfile-tables");
    let amd64 = std::fs::read(testdata("gdb-tfile/amd64.tf")).unwrap();
    let file = gdb_tfile::TraceFile::parse(&amd64, gdb_tfile::ReadOptions::default()).unwrap();
    let mut data = file.to_data().unwrap();
    for f in &mut data.frames {
        f.blocks
            .retain(|b| !matches!(b, gdb_tfile::BlockData::Registers(_)));
    }
    let no_regs = dir.join("no-regs.tf");
    std::fs::write(
        &no_regs,
        gdb_tfile::write::to_bytes(&data, gdb_tfile::Endian::Little).unwrap(),
    )
    .unwrap();
    for (input, regs_rows) in [
        (no_regs, 0),
        (testdata("gdb-tfile/no-tdesc.tf"), 0),
        (testdata("gdb-tfile/amd64.tf"), -1),
    ] {
        let out = dir.join("ds");
        let o = tracekit([
            "-q".as_ref(),
            "export".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--force".as_ref(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let (tables, manifest) = dataset(&out);
        assert_eq!(
            tables,
            ["frames", "memory", "registers", "tsv"],
            "{input:?}"
        );
        let rows = manifest["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "registers")
            .unwrap()["rows"]
            .as_i64()
            .unwrap();
        if regs_rows == 0 {
            assert_eq!(rows, 0, "{input:?}");
        } else {
            assert!(rows > 0, "{input:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The manifest's `source` of a compressed input: the file name as given (with `.bz2`),
/// its size on disk, and the size decompressed beside it.
#[test]
fn the_manifest_names_a_compressed_input_as_given() {
    let dir = temp_dir("manifest-bz2");
    let plain = std::fs::read(testdata("gdb-tfile/amd64.tf")).unwrap();
    let bz2 = dir.join("amd64.tf.bz2");
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    std::io::Write::write_all(&mut enc, &plain).unwrap();
    let packed = enc.finish().unwrap();
    std::fs::write(&bz2, &packed).unwrap();
    let out = dir.join("ds");
    let o = tracekit([
        "-q".as_ref(),
        "export".as_ref(),
        bz2.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let source = &dataset(&out).1["source"];
    assert_eq!(source["file"], "amd64.tf.bz2");
    assert_eq!(source["size"], packed.len() as u64);
    assert_eq!(source["decompressed_size"], plain.len() as u64);
    assert_eq!(source["format"], "gdb-tfile");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The entries of `dir` whose names contain `part`.
fn entries_with(dir: &std::path::Path, part: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part))
        .collect()
}

/// Waits (up to 60 s) until `dir` has an entry containing `part`.
fn wait_for(dir: &std::path::Path, part: &str) {
    let start = std::time::Instant::now();
    while entries_with(dir, part).is_empty() {
        assert!(start.elapsed().as_secs() < 60, "no {part} in {dir:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `kill -9` of `export`, `convert` and `index` part-way leaves their temporary file or
/// folder; the next run for the same output removes it (its process is gone) and writes
/// the output whole.
#[test]
fn a_rerun_removes_what_a_killed_run_left() {
    use std::io::Write;
    let dir = temp_dir("killed");
    let trace = tenet_trace(200_000);
    let path = dir.join("t.log");
    std::fs::write(&path, &trace).unwrap();
    let runs: [(&[&str], &str, &str); 3] = [
        (&["export", "-", "-o", "ds"], ".ds.partial-", "ds"),
        (
            &["convert", "-", "--to", "din", "-o", "t.din"],
            "t.din.tmp-",
            "t.din",
        ),
        (&["index", "t.log"], "t.log.tkidx.tmp-", "t.log.tkidx"),
    ];
    for (args, temp, out) in runs {
        let stdin = args.contains(&"-");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
            .arg("-q")
            .args(args)
            .current_dir(&dir)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Half the input, held open: the run waits for the rest with its output begun.
        let mut held = child.stdin.take();
        if let Some(s) = held.as_mut() {
            s.write_all(&trace[..trace.len() / 2]).unwrap();
        }
        wait_for(&dir, temp);
        child.kill().unwrap();
        child.wait().unwrap();
        drop(held);
        assert_eq!(
            entries_with(&dir, temp).len(),
            1,
            "{args:?} left its {temp}"
        );
        let mut rerun = Command::new(env!("CARGO_BIN_EXE_tracekit"))
            .arg("-q")
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = rerun.stdin.take().unwrap();
        if stdin {
            input.write_all(&trace).unwrap();
        }
        drop(input);
        let again = rerun.wait_with_output().unwrap();
        assert_eq!(again.status.code(), Some(0), "{args:?}: {}", stderr(&again));
        assert!(
            entries_with(&dir, temp).is_empty(),
            "{args:?}: {temp} is still there"
        );
        assert!(dir.join(out).exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The sidecar seeds of the fuzz target read whole; with a byte of their header or of a
/// directory changed they fail a hash check, and once rehashed they get past it: to the
/// header's fields (the step count is checked against the thread table's) and the
/// directories' decoding (what `sidecar_read` fuzzes).
#[test]
fn rehashed_sidecars_get_past_the_hash_checks() {
    use trace_index::{Sidecar, rehash};
    let read = |b: &[u8]| {
        Sidecar::read(
            "s".as_ref(),
            std::io::Cursor::new(b.to_vec()),
            b.len() as u64,
        )
    };
    let mut seeds = 0;
    for e in std::fs::read_dir(testdata("sidecar")).unwrap() {
        let seed = std::fs::read(e.unwrap().path()).unwrap();
        let mut sidecar = read(&seed).unwrap();
        assert!(sidecar.executions(0x40_1000).is_ok());
        // The step count (header word 3), then the last byte (of the memory directory).
        for (at, after) in [
            (56, "runs or steps do not add up"),
            (seed.len() - 1, "directory is out of order"),
        ] {
            let mut changed = seed.clone();
            changed[at] ^= 0x55;
            let e = read(&changed).err().unwrap().to_string();
            assert!(e.contains("hash mismatch"), "{e}");
            tracekit::fuzz_sidecar(&changed);
            rehash(&mut changed);
            match read(&changed) {
                Err(e) => assert!(e.to_string().contains(after), "{at}: {e}"),
                Ok(_) => panic!("{at}: read"),
            }
        }
        seeds += 1;
    }
    assert_eq!(seeds, 4);
}

/// How many times `file` is opened while `run` runs: inotify's `IN_OPEN` events on it.
/// (Identical events in a row are merged into one; a read or a close comes between two
/// opens of a reader, so the reads and closes are watched too.)
#[cfg(target_os = "linux")]
fn opens_during(file: &std::path::Path, run: impl FnOnce()) -> usize {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
    let watched = AddWatchFlags::IN_OPEN | AddWatchFlags::IN_ACCESS | AddWatchFlags::IN_CLOSE;
    inotify.add_watch(file, watched).unwrap();
    run();
    let mut opens = 0;
    loop {
        match inotify.read_events() {
            Ok(events) => {
                for e in events {
                    assert!(
                        !e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW),
                        "events lost"
                    );
                    opens += usize::from(e.mask.contains(AddWatchFlags::IN_OPEN));
                }
            }
            Err(nix::errno::Errno::EAGAIN) => return opens,
            Err(e) => panic!("inotify: {e}"),
        }
    }
}

/// Runs the binary with `args` (the input among them) and says its output; exit 0.
#[cfg(target_os = "linux")]
fn ok_output(args: &[&std::ffi::OsStr]) -> String {
    let o = tracekit(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A regular file is opened once by every command, and read from that one handle: the
/// DCFG handler (read as a stream through the handle, small or mapped), `index` and the
/// sidecar lookups (the trace's identity), `mem` with a register address (a second
/// reader over the same bytes). Before, each of them opened the path a second time
/// (which may by then name another file).
#[cfg(target_os = "linux")]
#[test]
fn a_regular_file_is_opened_once() {
    let dir = temp_dir("opened-once");
    let sample = std::fs::read(testdata("dcfg/sample.dcfg.json")).unwrap();
    let small = dir.join("small.dcfg.json");
    std::fs::write(&small, &sample).unwrap();
    // Past HEAD_LEN the file is mapped; trailing blanks change nothing of the DCFG.
    let mut padded = sample.clone();
    padded.resize(sample.len() + 200_000, b' ');
    let large = dir.join("large.dcfg.json");
    std::fs::write(&large, &padded).unwrap();
    for cmd in ["info", "validate", "dump", "loops"] {
        let outputs: Vec<String> = [&small, &large]
            .iter()
            .map(|file| {
                let mut out = String::new();
                let args = ["-q".as_ref(), cmd.as_ref(), file.as_os_str()];
                let n = opens_during(file, || out = ok_output(&args));
                assert_eq!(n, 1, "{cmd} {}", file.display());
                out
            })
            .collect();
        if cmd != "info" {
            assert_eq!(
                outputs[0], outputs[1],
                "{cmd}: the padding changed the output"
            );
        }
    }
    // A mapped x64dbg trace: the index, then the lookups that check it against the trace.
    let trace = dir.join("legacy-tid.trace64");
    std::fs::copy(testdata("x64dbg/legacy-tid.trace64"), &trace).unwrap();
    let t = trace.as_os_str();
    let runs: [&[&std::ffi::OsStr]; 3] = [
        &["-q".as_ref(), "index".as_ref(), t],
        &[
            "-q".as_ref(),
            "xref".as_ref(),
            t,
            "--pc".as_ref(),
            "0x0".as_ref(),
        ],
        &[
            "-q".as_ref(),
            "mem".as_ref(),
            t,
            "--at".as_ref(),
            "40".as_ref(),
            "[rsp]".as_ref(),
            "16".as_ref(),
        ],
    ];
    for args in runs {
        let mut out = String::new();
        let n = opens_during(&trace, || out = ok_output(args));
        assert_eq!(n, 1, "{args:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `GET /api/{call}` of the server at `port` with `token`: status and body.
#[cfg(target_os = "linux")]
fn api_get(port: u16, token: &str, call: &str) -> (u16, serde_json::Value) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let sep = if call.contains('?') { '&' } else { '?' };
    write!(
        s,
        "GET /api/{call}{sep}token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap())
}

/// `serve` opens its trace once: every worker, the info, the rows' second reader and
/// the background index read through the handle opened at the start.
#[cfg(target_os = "linux")]
#[test]
fn serve_opens_its_trace_once() {
    use std::io::BufRead;
    let dir = temp_dir("serve-once");
    let trace = dir.join("legacy-tid.trace64");
    std::fs::copy(testdata("x64dbg/legacy-tid.trace64"), &trace).unwrap();
    let opens = opens_during(&trace, || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
            .args(["serve", "--port", "0"])
            .arg(&trace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let rest = line.trim().strip_prefix("http://127.0.0.1:").unwrap();
        let (port, token) = rest.split_once("/?token=").unwrap();
        let port: u16 = port.parse().unwrap();
        let start = std::time::Instant::now();
        while api_get(port, token, "status").1["index"]["state"] != "ready" {
            assert!(start.elapsed() < std::time::Duration::from_secs(60));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Calls side by side, so that several workers are made.
        let calls = [
            "info",
            "rows?from=0&count=50",
            "rows?from=100&count=5",
            "state?i=30",
        ];
        std::thread::scope(|s| {
            for call in calls {
                s.spawn(move || {
                    let (status, body) = api_get(port, token, call);
                    assert_eq!(status, 200, "{call}: {body}");
                });
            }
        });
        let _ = child.kill();
        let _ = child.wait();
    });
    assert_eq!(opens, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mem` at a register address reads the trace twice (the register's value, then the
/// memory): from `<(…)` too, where the path cannot be opened again for a second reader.
#[test]
fn mem_at_a_register_reads_a_pipe_once() {
    let file = testdata("x64dbg/basic.trace64");
    let args = ["--at", "40", "[rsp]", "16"];
    let want = tracekit(
        [std::ffi::OsStr::new("-q"), "mem".as_ref(), file.as_os_str()]
            .into_iter()
            .chain(args.iter().map(std::ffi::OsStr::new)),
    );
    assert_eq!(want.status.code(), Some(0), "{}", stderr(&want));
    for producer in ["cat", "gzip -c"] {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec \"$0\" -q mem <({producer} \"$1\") {}",
                args.join(" ")
            ))
            .arg(env!("CARGO_BIN_EXE_tracekit"))
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{producer}: {}", stderr(&o));
        assert_eq!(stdout(&o), stdout(&want), "{producer}");
    }
}

/// The seeds made for targets whose bytes are not a file format
/// (`testdata/fuzz-seeds/TARGET/`, see docs/fuzzing.md) belong to a target and run through it.
#[test]
fn made_fuzz_seeds_run_through_their_targets() {
    let mut seeds = 0;
    for target in std::fs::read_dir(testdata("fuzz-seeds")).unwrap() {
        let target = target.unwrap();
        let name = target.file_name().to_string_lossy().into_owned();
        for seed in std::fs::read_dir(target.path()).unwrap() {
            let data = std::fs::read(seed.unwrap().path()).unwrap();
            assert!(tracekit::fuzz_target(&name, &data), "no fuzz target {name}");
            seeds += 1;
        }
    }
    assert!(seeds >= 10, "{seeds} seeds");
}
