//! The explorer page of `tracekit serve` in a real browser: a synthetic x64dbg trace with
//! three threads, the values the page must show computed here with `tracekit dump`,
//! `state --json`, `mem --json`, `xref` (the writer of a register by walking `state`
//! back through the thread's steps) and `origin --json`, then `node tests/browser/explorer.mjs` drives Chromium
//! through the page (playwright-core) and compares. The screenshot it takes is kept as
//! `target/explorer-screenshot.png` (a CI artifact).
//!
//! Needs node, Chromium and `npm ci` in tests/browser; without them the test is skipped
//! with a note, unless `TRACEKIT_REQUIRE_BROWSER=1` (set by CI), which makes that a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use trac_x64dbg::testgen::{self, Options};
use trac_x64dbg::{Arch, RecorderOptions};

use crate::common::*;

const LEN: u64 = 256; // bytes in the page's memory view (MEM_LEN in app.js)

fn browser_dir() -> PathBuf {
    root().join("crates/tracekit/tests/browser")
}

/// `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// node, Chromium and playwright-core, or what is missing.
fn tools() -> Result<(PathBuf, PathBuf), String> {
    let node = which("node").ok_or("node is not on PATH")?;
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| which("chromium"))
        .or_else(|| which("chromium-browser"))
        .ok_or("chromium is not on PATH and CHROMIUM is not set")?;
    let pw = browser_dir().join("node_modules/playwright-core/package.json");
    if !pw.is_file() {
        return Err(format!("{} is missing (run npm ci there)", pw.display()));
    }
    Ok((node, chromium))
}

/// The running server; killed when dropped, so a failing test leaves none behind.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tracekit serve FILE --port 0` and reads the URL from its first line.
fn serve(file: &Path) -> (Server, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["serve", file.to_str().unwrap(), "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut out = BufReader::new(server.0.stdout.take().unwrap());
    let mut url = String::new();
    out.read_line(&mut url).unwrap();
    // Drain whatever else it prints, so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = url.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "serve printed {url:?}"
    );
    (server, url)
}

fn ok(args: &[&str]) -> String {
    let o = tracekit(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Builds the expected values for `file` (see the module docs).
struct Oracle<'a> {
    file: &'a str,
    rows: Vec<Value>,
}

impl Oracle<'_> {
    fn state(&self, i: usize) -> Value {
        serde_json::from_str(&ok(&["state", self.file, "--at", &i.to_string(), "--json"])).unwrap()
    }

    /// The step of `i`'s thread before `i`.
    fn prev_in_thread(&self, i: usize) -> Option<usize> {
        let t = &self.rows[i]["thread"];
        (0..i).rev().find(|&j| &self.rows[j]["thread"] == t)
    }

    /// The last step j < at of at's thread after which `reg` changed: the states before
    /// consecutive steps of the thread compared, walking back (at most `limit` steps).
    fn writer(&self, at: usize, reg: &str, limit: usize) -> Option<usize> {
        let mut k = at;
        let mut value = self.state(k)["regs"][reg].clone();
        for _ in 0..limit {
            let j = self.prev_in_thread(k)?;
            let before = self.state(j)["regs"][reg].clone();
            if before != value {
                return Some(j);
            }
            (k, value) = (j, before);
        }
        None
    }
}

/// node and Chromium, or `None` (the test skipped, with a note) when missing; see the
/// module docs for `TRACEKIT_REQUIRE_BROWSER`.
fn tools_or_skip() -> Option<(PathBuf, PathBuf)> {
    match tools() {
        Ok(t) => Some(t),
        Err(why) => {
            if std::env::var_os("TRACEKIT_REQUIRE_BROWSER").is_some_and(|v| v == "1") {
                panic!("{why}, and TRACEKIT_REQUIRE_BROWSER=1");
            }
            eprintln!("skipped: node/chromium/playwright-core missing: {why}");
            None
        }
    }
}

/// Serves `path` and runs explorer.mjs on it against `expected`, keeping its screenshot as
/// `target/NAME.png`.
fn drive_page(tools: (PathBuf, PathBuf), path: &Path, expected: &Value, name: &str) {
    let (node, chromium) = tools;
    let expected_path = path.with_extension("expected.json");
    std::fs::write(&expected_path, expected.to_string()).unwrap();
    let (_server, url) = serve(path);
    let screenshot = root().join(format!("target/{name}.png"));
    let out = Command::new(node)
        .arg(browser_dir().join("explorer.mjs"))
        .args([url.as_str(), expected_path.to_str().unwrap()])
        .arg(&screenshot)
        .env("CHROMIUM", chromium)
        .current_dir(browser_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprint!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success(),
        "the explorer page does not show what the CLI computes on {} (screenshot: {}):\n{}",
        path.display(),
        screenshot.display(),
        stderr(&out)
    );
}

#[test]
fn the_explorer_page_shows_what_the_cli_computes() {
    let Some(tools) = tools_or_skip() else {
        return;
    };

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("explorer.trace64");
    let opts = Options {
        arch: Arch::X64,
        threads: 3,
        max_run: 40,
        seed: 18,
    };
    let bytes = testgen::trace(opts, 3000, RecorderOptions::default(), "C:\\explorer.exe");
    std::fs::write(&path, bytes).unwrap();
    let _ = std::fs::remove_file(dir.join("explorer.trace64.tkidx"));
    let file = path.to_str().unwrap();

    let rows = json_lines(&["dump", "--disasm", "-q", file]);
    let steps = rows.len();
    let o = Oracle { file, rows };

    // A row late in the trace whose pc runs before and after it, after a step of its own
    // thread (so the page highlights the registers against the previous step's state).
    let execs =
        |pc: &Value| -> Vec<usize> { (0..steps).filter(|&j| &o.rows[j]["pc"] == pc).collect() };
    let (at, prev_same_pc, next_same_pc) = (steps * 2 / 3..steps)
        .find_map(|i| {
            let row = &o.rows[i];
            if row["asm"].is_null() || o.rows[i - 1]["thread"] != row["thread"] {
                return None;
            }
            let e = execs(&row["pc"]);
            let k = e.iter().position(|&j| j == i)?;
            Some((i, *e.get(k.checked_sub(1)?)?, *e.get(k + 1)?))
        })
        .expect("a row with executions of its pc before and after");

    let state = o.state(at);
    let before = o.state(at - 1);
    let changed: Vec<&String> = state["regs"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| &before["regs"][k.as_str()] != *v)
        .map(|(k, _)| k)
        .collect();

    // The memory view follows rsp by default: 256 bytes from rsp rounded down to 16.
    let base = hex(&state["regs"]["rsp"]) & !15;
    let mem: Value = serde_json::from_str(&ok(&[
        "mem",
        file,
        "--at",
        &at.to_string(),
        &format!("{base:#x}"),
        &LEN.to_string(),
        "--json",
    ]))
    .unwrap();

    // A byte written before `at` that is read again later: its source must be the last
    // access before `at` that `xref` lists for it.
    let (byte, byte_source, byte_next_read) = (0..LEN as usize)
        .filter(|&k| !mem["source"][k].is_null() && mem["inferred"][k] == false)
        .find_map(|k| {
            let addr = base + k as u64;
            let hits = json_lines(&["xref", "--disasm", file, &format!("{addr:#x}:1")]);
            let i_of = |h: &Value| h["i"].as_u64().unwrap() as usize;
            let last = hits.iter().map(i_of).filter(|&i| i < at).max();
            let source = mem["source"][k].as_u64().unwrap() as usize;
            assert_eq!(last, Some(source), "mem's source of {addr:#x} at {at}");
            let read = hits
                .iter()
                .filter(|h| i_of(h) > source && h["access"] != "write")
                .map(i_of)
                .next()?;
            Some((addr, source, read))
        })
        .expect("a byte of the stack view read after its write");

    // A general register whose writer is not simply the previous step of the thread.
    let prev_step = o.prev_in_thread(at).unwrap();
    let regs = ["rax", "rcx", "rdx", "rbx", "rsi", "rdi", "rbp", "rsp"];
    let (reg, reg_writer) = regs
        .iter()
        .find_map(|r| {
            o.writer(at, r, 60)
                .filter(|&w| w < prev_step)
                .map(|w| (*r, w))
        })
        .or_else(|| {
            regs.iter()
                .find_map(|r| o.writer(at, r, 60).map(|w| (*r, w)))
        })
        .expect("a register with a writer");

    let expected = json!({
        "steps": steps,
        "at": at,
        "row": o.rows[at],
        "state": state,
        "changed": changed,
        "mem": mem,
        "next_same_pc": next_same_pc,
        "prev_same_pc": prev_same_pc,
        "reg": reg,
        "reg_writer": reg_writer,
        "byte": format!("{byte:#x}"),
        "byte_source": byte_source,
        "byte_next_read": byte_next_read,
    });
    drive_page(tools, &path, &expected, "explorer-screenshot");
}

/// The most marks a lane of the timeline strip shows (MAX_MARKS in app.js).
const MAX_MARKS: usize = 10_000;

/// The calls of `calls --json` open in step `n`'s thread at `n`, outermost first.
fn open_at<'a>(calls: &'a [Value], rows: &[Value], n: u64) -> Vec<&'a Value> {
    let thread = rows[n as usize]["thread"].as_u64().unwrap_or(0);
    calls
        .iter()
        .filter(|c| {
            c["thread"] == thread
                && c["entry_i"].as_u64().is_some_and(|e| e <= n)
                && c["ret_i"].as_u64().is_none_or(|r| n <= r)
        })
        .collect()
}

/// The distinct steps of `hits` (`xref --disasm` lines) that write the range, and those
/// that read it: by `access`, else (unknown) a hit with a new value writes, one without
/// reads (as the page sorts them).
fn writes_and_reads(hits: &[Value]) -> (Vec<u64>, Vec<u64>) {
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for h in hits {
        let i = h["i"].as_u64().unwrap();
        let (w, r) = match h["access"].as_str() {
            Some("read") => (false, true),
            Some("write") => (true, false),
            Some("readwrite") => (true, true),
            _ => (!h["new"].is_null(), h["new"].is_null()),
        };
        if w && writes.last() != Some(&i) {
            writes.push(i);
        }
        if r && reads.last() != Some(&i) {
            reads.push(i);
        }
    }
    (writes, reads)
}

/// The call-tree panel and the timeline strip on Tenet traces with calls (a fixture with
/// one; the real boombox trace, when there, with 24 nested up to depth 5): at a step inside
/// the deepest frame, the panel lists exactly the frames `calls --json` has open there,
/// its entry and return buttons go there, `f` goes to the step after the innermost return
/// and `F` to its call (twice: then the caller's call); the strip has a mark for each
/// `xref --pc` line of the pc executed most (capped) and for each step that writes or reads the
/// byte clicked, and clicking a mark selects its step. On a PowerPC trace the panel says
/// it has no call tree.
#[test]
fn the_call_tree_and_the_timeline_show_what_the_cli_computes() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let real = realdata("tenet/gaasedelen_tenet_boombox.trace.0.log");
    for original in [Some(testdata("tenet/basic.log")), real]
        .into_iter()
        .flatten()
    {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-calls");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(original.file_name().unwrap());
        // The real file is read-only, and so is its copy from an earlier run.
        let _ = std::fs::remove_file(&path);
        std::fs::copy(&original, &path).unwrap();
        let _ = std::fs::remove_file(path.with_extension("log.tkidx"));
        let file = path.to_str().unwrap();
        let rows = json_lines(&["dump", "-q", file]);
        let steps = rows.len() as u64;
        let mut calls = json_lines(&["calls", "-q", "--json", file]);
        calls.pop(); // the summary

        // The step with the most frames open whose innermost frame returns, strictly
        // inside it where one is (so that `f` and `F` leave it on both sides).
        let inside = |n: u64| {
            let open = open_at(&calls, &rows, n);
            let top = open.last()?;
            let (entry, ret) = (top["entry_i"].as_u64()?, top["ret_i"].as_u64()?);
            Some((entry < n && n < ret, open.len()))
        };
        let at = (0..steps)
            .filter_map(|n| inside(n).map(|(strictly, depth)| (strictly, depth, n)))
            .max_by_key(|&(strictly, depth, n)| (strictly, depth, std::cmp::Reverse(n)))
            .map(|(_, _, n)| n)
            .expect("a step inside a frame that returns");
        let frames = open_at(&calls, &rows, at);
        let top = frames.last().unwrap();
        let ret = top["ret_i"].as_u64().unwrap();
        let finish = if ret + 1 < steps { ret + 1 } else { ret };
        let reverse = top["i"].as_u64().unwrap();
        let reverse2 = open_at(&calls, &rows, reverse)
            .last()
            .map_or(reverse, |c| c["i"].as_u64().unwrap());

        // The strip's pc marks: those of the pc executed most often (a loop's, in the real
        // trace), at its first execution.
        let mut runs: std::collections::HashMap<&str, (usize, u64)> = Default::default();
        for (k, row) in rows.iter().enumerate() {
            let e = runs
                .entry(row["pc"].as_str().unwrap())
                .or_insert((0, k as u64));
            e.0 += 1;
        }
        let (pc, pc_at) = runs
            .iter()
            .max_by_key(|(_, (n, first))| (*n, std::cmp::Reverse(*first)))
            .map(|(pc, (_, first))| ((*pc).to_owned(), *first))
            .unwrap();
        let mut pc_steps: Vec<u64> = json_lines(&["xref", file, "--pc", &pc])
            .iter()
            .map(|h| h["i"].as_u64().unwrap())
            .collect();
        let pc_capped = pc_steps.len() > MAX_MARKS;
        pc_steps.truncate(MAX_MARKS);

        // A byte of the memory view at `at` (256 bytes from rsp rounded down to 16) with a
        // known source, both written and read somewhere.
        let state: Value =
            serde_json::from_str(&ok(&["state", file, "--at", &at.to_string(), "--json"])).unwrap();
        let base = hex(&state["regs"]["rsp"]) & !15;
        let mem: Value = serde_json::from_str(&ok(&[
            "mem",
            file,
            "--at",
            &at.to_string(),
            &format!("{base:#x}"),
            &LEN.to_string(),
            "--json",
        ]))
        .unwrap();
        let byte = (0..LEN as usize)
            .filter(|&k| !mem["source"][k].is_null() && mem["inferred"][k] == false)
            .find_map(|k| {
                let addr = base + k as u64;
                let hits = json_lines(&["xref", "--disasm", file, &format!("{addr:#x}:1")]);
                let (writes, reads) = writes_and_reads(&hits);
                (!writes.is_empty() && !reads.is_empty()).then(|| {
                    json!({
                        "addr": format!("{addr:#x}"),
                        "source": mem["source"][k],
                        "writes": writes,
                        "reads": reads,
                    })
                })
            });

        let expected = json!({
            "steps": steps,
            "calls": {
                "at": at,
                "frames": frames,
                "finish": finish,
                "reverse_finish": reverse,
                "reverse_finish2": reverse2,
                "pc": pc,
                "pc_at": pc_at,
                "pc_steps": pc_steps,
                "pc_capped": pc_capped,
                "byte": byte,
            },
        });
        let name = format!(
            "explorer-calls-{}",
            original.file_stem().unwrap().to_string_lossy()
        );
        drive_page(tools.clone(), &path, &expected, &name);
    }

    // A stream that is not x86: the panel says there is no call tree, `f` too.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-calls");
    let path = dir.join("example.tt6");
    std::fs::copy(testdata("amber/example.tt6"), &path).unwrap();
    let _ = std::fs::remove_file(path.with_extension("tt6.tkidx"));
    let steps = json_lines(&["dump", "-q", path.to_str().unwrap()]).len();
    let expected = json!({ "steps": steps, "no_calls": true });
    drive_page(tools, &path, &expected, "explorer-calls-ppc");
}

/// The origin panel on the x64dbg fixture: at a step where a register's value was copied
/// through the stack and back (`rsi` before step 600, nine hops to the trace's start), its
/// origin button shows exactly the hops of `tracekit origin --json` (steps, kinds,
/// locations) and their stop kind; clicking a hop selects its step; Alt+clicking a byte of
/// the memory view shows that byte's origin and leaves the step selected, and so does its
/// "Origin" button after a plain click took the page to the byte's source.
#[test]
fn the_origin_panel_shows_what_the_cli_computes() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-origin");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("basic.trace64");
    std::fs::copy(testdata("x64dbg/basic.trace64"), &path).unwrap();
    let _ = std::fs::remove_file(dir.join("basic.trace64.tkidx"));
    let file = path.to_str().unwrap();
    let steps = json_lines(&["dump", "-q", file]).len();
    let (at, reg) = (600usize, "rsi");
    let at_text = at.to_string();
    let origin =
        |target: &str| json_lines(&["origin", "-q", file, "--json", "--at", &at_text, target]);
    let reg_hops = origin(reg);
    assert!(reg_hops.len() > 2, "a chain of copies: {reg_hops:?}");

    // A byte of the memory view (256 bytes from rsp rounded down to 16) with a known
    // source: the one with the longest chain.
    let state: Value =
        serde_json::from_str(&ok(&["state", file, "--at", &at_text, "--json"])).unwrap();
    let base = hex(&state["regs"]["rsp"]) & !15;
    let mem: Value = serde_json::from_str(&ok(&[
        "mem",
        file,
        "--at",
        &at_text,
        &format!("{base:#x}"),
        &LEN.to_string(),
        "--json",
    ]))
    .unwrap();
    let byte = (0..LEN)
        .filter(|&k| !mem["source"][k as usize].is_null())
        .map(|k| {
            let addr = format!("{:#x}", base + k);
            let hops = origin(&format!("{addr}:1"));
            (addr, hops, mem["source"][k as usize].clone())
        })
        .max_by_key(|(_, hops, _)| hops.len());
    let (byte, byte_hops, byte_source) = match byte {
        Some((addr, hops, source)) => (Value::from(addr), Value::from(hops), source),
        None => (Value::Null, Value::Null, Value::Null),
    };
    let expected = json!({
        "steps": steps,
        "origin": {
            "at": at,
            "reg": reg,
            "reg_hops": reg_hops,
            "byte": byte,
            "byte_hops": byte_hops,
            "byte_source": byte_source,
        },
    });
    drive_page(tools, &path, &expected, "explorer-origin");
}
