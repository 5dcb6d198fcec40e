//! CLI tests for `tracekit serve`: the real binary on a free port, spoken to over a plain
//! `TcpStream`. A hand-built x64dbg trace with known values (two threads, a write then a
//! read of one word, a register that changes at a known step), a tfile and a Tenet
//! fixture; every endpoint against the CLI commands' own output and the known values; bad
//! parameters, tokens, hosts, methods and heads; and the server still answering after all.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Step, Writer};

use crate::common::*;

const A: u32 = 0x100;
const B: u32 = 0x200;
const STEPS: u64 = 300;

/// A fresh temporary directory (the server writes its index beside the trace).
fn temp_dir(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tk-serve-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The thread of step `k`: B every third step, else A.
fn thread_of(k: u64) -> u32 {
    if k % 3 == 2 { B } else { A }
}

/// 300 instructions of a 10-instruction loop at 0x401000 over threads A and B. Step 10
/// (A) writes 0x1122334455667788 to 0x14fe00 (which held 0), step 20 (B) reads it back.
/// A's rbx is 0x1111 before its steps below 100 and 0x2222 from step 100 on, so the step
/// that changed it is A's last before 100, step 99; B's rbx is always 0x5555.
fn known_trace() -> Vec<u8> {
    let header = Header::new(Arch::X64, "serve.exe");
    let mut rec = Recorder::new(
        Writer::new(Vec::new(), &header).unwrap(),
        RecorderOptions::default(),
    );
    for k in 0..STEPS {
        let thread = thread_of(k);
        let mut regs = RegDump::new(Arch::X64);
        regs.set_ip(0x401000 + (k % 10) * 4);
        regs.set_word(0, k);
        regs.set_word(4, if thread == A { 0x14fe80 } else { 0x24fe80 });
        let rbx = match (thread, k) {
            (B, _) => 0x5555,
            (_, k) if k < 100 => 0x1111,
            _ => 0x2222,
        };
        regs.set_word(3, rbx);
        let mem = match k {
            10 => vec![MemAccess {
                flags: 0,
                address: 0x14fe00,
                old: 0,
                new: Some(0x1122_3344_5566_7788),
            }],
            20 => vec![MemAccess {
                flags: 1,
                address: 0x14fe00,
                old: 0x1122_3344_5566_7788,
                new: None,
            }],
            _ => Vec::new(),
        };
        rec.step(Step {
            thread,
            opcode: vec![0x48, 0x89, 0x04, 0x24],
            regs,
            mem,
        })
        .unwrap();
    }
    rec.finish().unwrap()
}

/// A running `tracekit serve`, killed when dropped (so a failing test leaves none).
struct Server {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, head (lowercased) and body.
struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Starts the server on `file` with `extra` arguments and reads its URL.
fn start(file: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracekit"))
        .args(["serve", "--port", "0"])
        .args(extra)
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = |port, token| Server { child, port, token };
    let url = line.trim();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("not the URL: {url:?}"));
    let (port, token) = rest.split_once("/?token=").unwrap();
    assert_eq!(token.len(), 32, "128 bits as hex");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    server(port.parse().unwrap(), token.to_owned())
}

impl Server {
    /// Sends `raw` bytes as a request and reads the whole answer (`Connection: close`).
    fn raw(&self, raw: &[u8]) -> Reply {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let _ = s.write_all(raw);
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all);
        parse_reply(&all).0
    }

    /// GET `target` with these extra header lines and the right Host.
    fn get_with(&self, target: &str, headers: &str) -> Reply {
        self.raw(
            format!(
                "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{headers}Connection: close\r\n\r\n",
                self.port
            )
            .as_bytes(),
        )
    }

    /// GET `/api/{call}` with the token.
    fn api(&self, call: &str) -> Reply {
        let sep = if call.contains('?') { '&' } else { '?' };
        self.get_with(&format!("/api/{call}{sep}token={}", self.token), "")
    }

    /// The JSON of a call that must succeed.
    fn ok(&self, call: &str) -> Value {
        let r = self.api(call);
        assert_eq!(
            r.status,
            200,
            "{call}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert!(
            r.head
                .contains("content-type: application/json; charset=utf-8")
        );
        assert!(r.head.contains("cache-control: no-store"));
        r.json()
    }

    /// A call that must be refused with `status`, naming `param` when given.
    fn refused(&self, call: &str, status: u16, param: Option<&str>) {
        let r = self.api(call);
        assert_eq!(
            r.status,
            status,
            "{call}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let v = r.json();
        assert!(v["error"].is_string(), "{call}: {v}");
        if let Some(p) = param {
            assert_eq!(v["param"], p, "{call}: {v}");
        }
    }

    /// Waits until the background index is ready.
    fn wait_ready(&self) -> Value {
        let t = Instant::now();
        loop {
            let s = self.ok("status");
            if s["index"]["state"] == "ready" {
                return s;
            }
            assert_ne!(s["index"]["state"], "failed", "{s}");
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "index not ready: {s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Splits one response off `bytes`: the reply and the bytes after it.
fn parse_reply(bytes: &[u8]) -> (Reply, &[u8]) {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(bytes)))
        + 4;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let body_end = (end + len).min(bytes.len());
    let reply = Reply {
        status,
        head,
        body: bytes[end..body_end].to_vec(),
    };
    (reply, &bytes[body_end..])
}

/// The JSON lines the CLI prints for `args`.
fn cli_lines(args: &[&str]) -> Vec<Value> {
    let o = tracekit([&["-q"], args].concat());
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn every_endpoint_on_a_known_trace() {
    let dir = temp_dir("known");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let file = path.to_str().unwrap();
    let s = start(&path, &[]);
    // The first rows come at once, whatever the index is doing.
    let rows = s.ok("rows?from=0&count=5");
    assert_eq!(rows["rows"].as_array().unwrap().len(), 5);
    let status = s.wait_ready();
    assert_eq!(status["steps"], STEPS);
    assert_eq!(status["isa"], "x64");
    assert_eq!(status["word_size"], 8);
    assert_eq!(status["step_noun"], "instruction");
    assert_eq!(status["reg_names"][0], "rax");
    assert!(
        dir.join("known.trace64.tkidx").exists(),
        "the index beside the trace"
    );

    // info: the CLI's object.
    assert_eq!(s.ok("info"), cli_lines(&["info", "--json", file])[0]);

    // rows: dump --disasm's lines, in pages; `end` at the last page.
    let dump = cli_lines(&["dump", "--disasm", file]);
    let page = s.ok("rows?from=0x10&count=7");
    assert_eq!(page["from"], 16);
    assert_eq!(page["end"], false);
    assert_eq!(page["rows"].as_array().unwrap(), &dump[16..23]);
    for (k, row) in page["rows"].as_array().unwrap().iter().enumerate() {
        let i = 16 + k as u64;
        assert_eq!(row["i"], i);
        assert_eq!(row["thread"], thread_of(i));
        assert_eq!(hex(&row["pc"]), 0x401000 + (i % 10) * 4);
        // 48 89 04 24 in Intel syntax.
        assert_eq!(row["asm"], "mov qword ptr [rsp], rax");
    }
    let last = s.ok("rows?from=295&count=100");
    assert_eq!(last["end"], true);
    assert_eq!(last["rows"].as_array().unwrap(), &dump[295..]);
    assert_eq!(s.ok("rows?from=290&count=10")["end"], true);
    assert_eq!(s.ok("rows?from=290&count=9")["end"], false);

    // state: the CLI's object; the known registers.
    for i in [0u64, 1, 150, 299] {
        let st = s.ok(&format!("state?i={i}"));
        assert_eq!(
            st,
            cli_lines(&["state", "--json", "--at", &i.to_string(), file])[0]
        );
        assert_eq!(st["thread"], thread_of(i));
        assert_eq!(hex(&st["regs"]["rax"]), i);
    }
    assert_eq!(hex(&s.ok("state?i=150")["regs"]["rbx"]), 0x2222);

    // mem: after the write, before it (inferred from the write's old value), the CLI's.
    let after = s.ok("mem?i=15&addr=0x14fe00&len=8");
    let bytes: Vec<u64> = 0x1122_3344_5566_7788u64
        .to_le_bytes()
        .iter()
        .map(|&b| u64::from(b))
        .collect();
    assert_eq!(after["bytes"], serde_json::json!(bytes));
    assert_eq!(after["source"], serde_json::json!(vec![10; 8]));
    let before = s.ok("mem?i=5&addr=0x14fe00&len=8");
    assert_eq!(before["bytes"], serde_json::json!(vec![0; 8]));
    assert_eq!(before["inferred"], serde_json::json!(vec![true; 8]));
    for (i, addr, len) in [
        (15, "0x14fe00", 8),
        (5, "0x14fdfc", 16),
        (299, "1375744", 3),
    ] {
        let args = [
            "mem",
            file,
            "--json",
            "--at",
            &i.to_string(),
            addr,
            &len.to_string(),
        ];
        let api = s.ok(&format!("mem?i={i}&addr={addr}&len={len}"));
        assert_eq!(api, cli_lines(&args)[0], "{args:?}");
    }

    // xref: the CLI's lines, paged.
    let lines = cli_lines(&["xref", file, "0x14fe00:8"]);
    assert_eq!(lines.len(), 2);
    let all = s.ok("xref?addr=0x14fe00&len=8");
    assert_eq!(all["hits"].as_array().unwrap(), &lines);
    assert_eq!(all["next"], Value::Null);
    let first = s.ok("xref?addr=0x14fe00&len=8&count=1");
    assert_eq!(first["hits"].as_array().unwrap(), &lines[..1]);
    assert_eq!(first["next"], 20);
    let sized = cli_lines(&["xref", "--disasm", file, "0x14fe00:8"]);
    let api = s.ok("xref?addr=0x14fe00&len=8&disasm=1");
    assert_eq!(api["hits"].as_array().unwrap(), &sized);
    // The recorded address is not `[rsp]`'s: the access cannot be matched.
    assert_eq!(sized[0]["access"], "unknown");
    let second = s.ok("xref?addr=0x14fe00&len=8&from=20&count=1");
    assert_eq!(second["hits"].as_array().unwrap(), &lines[1..]);
    assert_eq!(second["next"], Value::Null);

    // find: the executions of 0x401000 (i = 0, 10, 20, …), paged forwards and backwards.
    let execs = cli_lines(&["xref", file, "--pc", "0x401000"]);
    assert_eq!(execs.len(), 30);
    let p1 = s.ok("find?pc=0x401000&count=7");
    assert_eq!(p1["hits"].as_array().unwrap(), &execs[..7]);
    assert_eq!(p1["next"], 70);
    let p2 = s.ok("find?pc=0x401000&from=70&count=100");
    assert_eq!(p2["hits"].as_array().unwrap(), &execs[7..]);
    let back = s.ok("find?pc=0x401000&before=55&count=3");
    let is: Vec<u64> = back["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["i"].as_u64().unwrap())
        .collect();
    assert_eq!(is, [50, 40, 30]);
    assert_eq!(back["hits"][0], execs[5]);

    // writer: A's rbx changed by step 99 (the values are those before each step); B's
    // never changed; rax changes at every step, so its writer is the thread's last step.
    let w = s.ok("writer?i=150&reg=rbx");
    assert_eq!(
        (w["i"].clone(), w["reg"].clone(), w["writer"].clone()),
        (150.into(), "rbx".into(), 99.into())
    );
    let none = s.ok("writer?i=152&reg=rbx");
    assert_eq!(none["writer"], Value::Null);
    assert_eq!(none["searched"], 152);
    assert_eq!(s.ok("writer?i=151&reg=rax")["writer"], 150);
    assert_eq!(s.ok("writer?i=152&reg=rax")["writer"], 149);
    // Checked against state: the value changed across the writer, and not after it.
    let rbx = |i: u64| hex(&s.ok(&format!("state?i={i}"))["regs"]["rbx"]);
    assert_ne!(rbx(99), rbx(100));
    assert_eq!(rbx(100), rbx(150));

    // reader: every step is `mov qword ptr [rsp], rax`, which reads rax and rsp (so the
    // step itself is the next reader) and neither rbx nor a flag (so none in the rest of
    // the trace: steps 150 to 299 searched).
    let r = s.ok("reader?i=150&reg=rax");
    assert_eq!(
        (r["i"].clone(), r["reg"].clone(), r["reader"].clone()),
        (150.into(), "rax".into(), 150.into())
    );
    assert_eq!(s.ok("reader?i=7&reg=rsp")["reader"], 7);
    for reg in ["rbx", "flags.z", "rflags"] {
        let none = s.ok(&format!("reader?i=150&reg={reg}"));
        assert_eq!(none["reader"], Value::Null, "{reg}");
        assert_eq!(none["searched"], STEPS - 150, "{reg}");
    }

    // The page and its assets, without the token.
    let page = s.get_with("/", "");
    assert_eq!(page.status, 200);
    assert!(page.head.contains("content-type: text/html"));
    assert!(String::from_utf8_lossy(&page.body).contains("app.js"));
    for asset in ["/index.html", "/app.js", "/style.css"] {
        assert_eq!(s.get_with(asset, "").status, 200, "{asset}");
    }
}

#[test]
fn refusals_and_the_server_keeps_serving() {
    let dir = temp_dir("refusals");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let s = start(&path, &[]);
    s.wait_ready();
    // Parameters: malformed, out of range, missing, unknown, repeated: 400 naming them.
    for (call, param) in [
        ("state?i=-1", "i"),
        ("state?i=0xzz", "i"),
        ("state?i=1e3", "i"),
        ("state?i=300", "i"),
        ("state?i=18446744073709551616", "i"),
        ("state", "i"),
        ("state?i=1&i=2", "i"),
        ("state?i=1&at=2", "at"),
        ("rows?count=0", "count"),
        ("rows?count=10001", "count"),
        ("rows?from=300", "from"),
        ("mem?i=1&addr=0x10&len=0", "len"),
        ("mem?i=1&addr=0x10&len=65537", "len"),
        ("mem?i=1&addr=0xffffffffffffffff&len=2", "len"),
        ("mem?i=300&addr=0x10", "i"),
        ("mem?i=1&addr=zz", "addr"),
        ("xref?addr=0x10&count=10001", "count"),
        ("xref?pc=0x10", "pc"),
        ("xref?addr=0x10&disasm=2", "disasm"),
        ("find?pc=0x401000&from=1&before=2", "before"),
        ("find?pc=", "pc"),
        ("writer?i=5&reg=nosuch", "reg"),
        ("reader?i=5&reg=nosuch", "reg"),
        ("reader?i=5&reg=lastError", "reg"),
        ("reader?i=5", "reg"),
        ("writer?i=5", "reg"),
        ("info?x=1", "x"),
    ] {
        s.refused(call, 400, Some(param));
    }
    // rows/xref limits are accepted at their bounds.
    assert_eq!(
        s.ok("rows?from=0&count=10000")["rows"]
            .as_array()
            .unwrap()
            .len(),
        300
    );
    s.ok("mem?i=1&addr=0x14fe00&len=65536");
    // Tokens: missing, wrong (query and Bearer) → 403; the right Bearer works.
    let port = s.port;
    for (target, headers) in [
        ("/api/info".to_owned(), String::new()),
        (
            "/api/info?token=00000000000000000000000000000000".to_owned(),
            String::new(),
        ),
        (format!("/api/info?token={}0", s.token), String::new()),
        (
            "/api/info".to_owned(),
            "Authorization: Bearer 0123\r\n".to_owned(),
        ),
        (
            "/api/info".to_owned(),
            format!("Authorization: Basic {}\r\n", s.token),
        ),
    ] {
        let r = s.get_with(&target, &headers);
        assert_eq!(r.status, 403, "{target} {headers}");
        assert!(r.json()["error"].is_string());
    }
    let bearer = s.get_with(
        "/api/status",
        &format!("Authorization: Bearer {}\r\n", s.token),
    );
    assert_eq!(bearer.status, 200);
    // A foreign or missing Host: 403, even with the token (DNS rebinding).
    for host in [
        "Host: evil.example:80\r\n".to_owned(),
        format!("Host: 127.0.0.1:{}1\r\n", port),
        String::new(),
    ] {
        let raw = format!(
            "GET /api/info?token={} HTTP/1.1\r\n{host}Connection: close\r\n\r\n",
            s.token
        );
        assert_eq!(s.raw(raw.as_bytes()).status, 403, "{host}");
    }
    let localhost = format!(
        "GET /api/status?token={} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n",
        s.token
    );
    assert_eq!(s.raw(localhost.as_bytes()).status, 200);
    // Unknown paths, no file system: 404.
    for target in [
        "/nope",
        "/../../etc/passwd",
        "/assets/app.js",
        "/%2e%2e/Cargo.toml",
    ] {
        assert_eq!(s.get_with(target, "").status, 404, "{target}");
    }
    s.refused("nope", 404, None);
    // Methods, bodies, heads.
    let post = format!(
        "POST /api/info?token={} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n",
        s.token
    );
    let r = s.raw(post.as_bytes());
    assert_eq!(r.status, 405);
    assert!(r.head.contains("allow: get, head"));
    let body = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(s.raw(body.as_bytes()).status, 413);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(s.raw(big.as_bytes()).status, 431);
    let endless = format!("GET / HTTP/1.1\r\nX-Big: {}", "a".repeat(40_000));
    assert_eq!(s.raw(endless.as_bytes()).status, 431);
    assert_eq!(s.raw(b"\x00\x01garbage\r\n\r\n").status, 400);
    assert_eq!(s.raw(b"GET / HTTP/3\r\n\r\n").status, 505);
    // HEAD: the GET's head, no body.
    let head = format!(
        "HEAD /api/status?token={} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n",
        s.token
    );
    let r = s.raw(head.as_bytes());
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert!(!r.head.contains("content-length: 0\r\n"));
    // Keep-alive: two requests on one connection, answered in order.
    let two = format!(
        "GET /api/state?i=1&token={t} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nGET /api/state?i=2&token={t} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n",
        t = s.token
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(two.as_bytes()).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let (r1, rest) = parse_reply(&all);
    let (r2, _) = parse_reply(rest);
    assert_eq!(
        (r1.json()["i"].clone(), r2.json()["i"].clone()),
        (1.into(), 2.into())
    );
    assert!(r1.head.contains("connection: keep-alive"));
    // Still serving after all of that.
    assert_eq!(s.ok("state?i=299")["i"], 299);
}

/// A damaged trace: the first rows come, a step past the damage is a 422 with the
/// offset, and the server keeps serving.
#[test]
fn damage_is_reported_not_fatal() {
    let dir = temp_dir("damaged");
    let path = dir.join("cut.trace64");
    let bytes = known_trace();
    std::fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let s = start(&path, &[]);
    let rows = s.ok("rows?from=0&count=10000");
    assert_eq!(rows["end"], true);
    let n = rows["rows"].as_array().unwrap().len() as u64;
    assert!(n > 100 && n < STEPS, "{n}");
    assert!(rows["error"].as_str().unwrap().contains("offset"), "{rows}");
    s.ok("state?i=5");
    let t = Instant::now();
    loop {
        let st = s.ok("status");
        if st["index"]["state"] == "failed" {
            assert!(st["index"]["error"].is_string());
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "{st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = s.api(&format!("state?i={}", n + 5));
    assert!(r.status == 400 || r.status == 422, "{}", r.status);
    assert_eq!(s.ok("state?i=1")["i"], 1);
}

/// tfile frames and a Tenet trace: the rows have the keys every row has, state and mem
/// are the CLI's.
#[test]
fn tfile_and_tenet_fixtures() {
    for (fixture, at, addr) in [
        ("gdb-tfile/amd64.tf", 3u64, None),
        ("tenet/basic.log", 2, Some("0x7ffe8")),
    ] {
        let dir = temp_dir("fixture");
        let path = dir.join(Path::new(fixture).file_name().unwrap());
        std::fs::copy(testdata(fixture), &path).unwrap();
        let file = path.to_str().unwrap();
        let s = start(&path, &["--host", "127.0.0.1"]);
        let status = s.wait_ready();
        let steps = status["steps"].as_u64().unwrap();
        let rows = s.ok("rows?from=0&count=10000");
        let rows = rows["rows"].as_array().unwrap();
        assert_eq!(rows.len() as u64, steps);
        let dump = cli_lines(&["dump", "--disasm", file]);
        for (k, (row, line)) in rows.iter().zip(&dump).enumerate() {
            assert_eq!(row["i"], k as u64);
            assert_eq!(row["thread"], 0, "{fixture}: no threads");
            assert!(row["mem"].is_array());
            assert!(row["pc"].is_string());
            // Every key of the dump line, unchanged.
            for (key, v) in line.as_object().unwrap() {
                assert_eq!(&row[key], v, "{fixture} row {k} key {key}");
            }
        }
        let st = s.ok(&format!("state?i={at}"));
        assert_eq!(
            st,
            cli_lines(&["state", "--json", "--at", &at.to_string(), file])[0]
        );
        // `calls`: the lines of `calls --json`, and its summary.
        let calls = s.ok("calls?from=0&count=5");
        let lines = cli_lines(&["calls", "-q", "--json", file]);
        let (summary, rows) = lines.split_last().unwrap();
        assert_eq!(calls["calls"].as_array().unwrap(), rows, "{fixture}");
        assert_eq!(calls["summary"], summary["summary"], "{fixture}");
        assert_eq!(calls["next"], Value::Null);
        if let Some(addr) = addr {
            let m = s.ok(&format!("mem?i={at}&addr={addr}&len=8"));
            assert_eq!(
                m,
                cli_lines(&["mem", file, "--json", "--at", &at.to_string(), addr, "8"])[0]
            );
        }
        drop(s);
    }
}

/// `/api/stack` at every step: exactly the calls of `calls --json` open in the step's
/// thread there (entered at or before it, not returned before it), outermost first; on a
/// Tenet fixture with one call and on a real trace with nested ones (24 calls, depth up to
/// 5). Bad `i` is a 400 naming `i`; a stream that is not x86 gets the 400 of `/api/calls`.
#[test]
fn stack_is_the_calls_open_at_each_step() {
    let real = realdata("tenet/gaasedelen_tenet_boombox.trace.0.log");
    let fixtures = [Some(testdata("tenet/basic.log")), real];
    for original in fixtures.into_iter().flatten() {
        let dir = temp_dir("stack");
        let path = dir.join(original.file_name().unwrap());
        std::fs::copy(&original, &path).unwrap();
        let file = path.to_str().unwrap();
        let s = start(&path, &[]);
        let steps = s.wait_ready()["steps"].as_u64().unwrap();
        let rows = cli_lines(&["dump", file]);
        let lines = cli_lines(&["calls", "--json", file]);
        let (_summary, calls) = lines.split_last().unwrap();
        let mut deepest = 0;
        for i in 0..steps {
            let thread = rows[i as usize]["thread"].as_u64().unwrap_or(0);
            let open: Vec<&Value> = calls
                .iter()
                .filter(|c| {
                    c["thread"] == thread
                        && c["entry_i"].as_u64().is_some_and(|e| e <= i)
                        && c["ret_i"].as_u64().is_none_or(|r| i <= r)
                })
                .collect();
            deepest = deepest.max(open.len());
            let got = s.ok(&format!("stack?i={i}"));
            assert_eq!(got["i"], i);
            assert_eq!(got["thread"], thread);
            let frames: Vec<&Value> = got["frames"].as_array().unwrap().iter().collect();
            assert_eq!(frames, open, "{file} step {i}");
        }
        assert!(deepest > 0, "{file}: a frame is open somewhere");
        if original.to_str().unwrap().contains("boombox") {
            assert_eq!(deepest, 6, "depth 0 to 5");
        }
        s.refused("stack", 400, Some("i"));
        s.refused("stack?i=x", 400, Some("i"));
        s.refused(&format!("stack?i={steps}"), 400, Some("i"));
        s.refused("stack?i=0&count=1", 400, Some("count"));
        drop(s);
    }
    let dir = temp_dir("stack-ppc");
    let path = dir.join("example.tt6");
    std::fs::copy(testdata("amber/example.tt6"), &path).unwrap();
    let s = start(&path, &[]);
    let calls = s.api("calls");
    let stack = s.api("stack?i=0");
    assert_eq!(
        calls.status / 100,
        4,
        "{}",
        String::from_utf8_lossy(&calls.body)
    );
    assert_eq!(stack.status, calls.status);
    assert_eq!(stack.json()["error"], calls.json()["error"]);
}

/// Formats without an instruction stream are refused before binding (exit 2, no URL).
#[test]
fn formats_without_steps_are_refused() {
    let o = tracekit([
        "serve",
        "--port",
        "0",
        testdata("dcfg-trace/basic.trace.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    assert!(stderr(&o).contains("instruction stream"), "{}", stderr(&o));
}

/// The index status while the index is built on a trace of some size: `done` never goes
/// back, stays within the file's size, and is the whole size once ready; the index's
/// step count is the trace's. (That `done` moves in between, with the steps indexed, is
/// checked without timing by the unit tests of `index::build`'s progress hook and of the
/// server's.)
#[test]
fn index_progress_never_goes_back() {
    use trac_x64dbg::testgen::{self, Options as GenOptions};
    let dir = temp_dir("progress");
    let path = dir.join("big.trace64");
    let opts = GenOptions {
        arch: Arch::X64,
        threads: 3,
        max_run: 200,
        seed: 5,
    };
    let steps = 60_000;
    std::fs::write(
        &path,
        testgen::trace(opts, steps, RecorderOptions::default(), "p.exe"),
    )
    .unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let s = start(&path, &[]);
    let t = Instant::now();
    let mut seen = Vec::new();
    let last = loop {
        let st = s.ok("status");
        let index = &st["index"];
        assert_ne!(index["state"], "failed", "{st}");
        assert_eq!(index["total"], size);
        seen.push(index["done"].as_u64().unwrap());
        if index["state"] == "ready" {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "not ready: {st}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.iter().all(|&d| d <= size), "{seen:?}");
    assert_eq!(seen.last(), Some(&size));
    assert_eq!(last["steps"], steps);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace cut short under the server (as `cp` over it does): a call that reaches the
/// bytes no longer there is a 409 saying so, rows before the cut are still served, the
/// status says the file changed, and the server lives on.
#[test]
fn a_trace_cut_under_the_server_is_an_error_not_a_crash() {
    let dir = temp_dir("cut-under");
    let path = dir.join("long.log");
    let lines = 300_000;
    std::fs::write(&path, tenet_trace(lines)).unwrap();
    let mut s = start(&path, &["--format", "tenet"]);
    s.wait_ready();
    assert_eq!(s.ok("rows?from=0&count=2")["rows"][1]["i"], 1);
    let cut = 1_000_000;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    for _ in 0..2 {
        let r = s.api(&format!("rows?from={}&count=10", lines - 20));
        assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        assert_eq!(v["changed"], true);
        let e = v["error"].as_str().unwrap();
        assert!(
            e.contains("long.log changed while it was read (at offset 0x"),
            "{e}"
        );
    }
    let before = s.ok("rows?from=5&count=3");
    assert_eq!(before["rows"][0]["i"], 5);
    assert_eq!(before["rows"][2]["pc"], "0x40101c");
    let st = s.ok("status");
    let at = st["changed"]["offset"].as_u64().unwrap();
    assert!((cut..cut + 65_536).contains(&at), "{st}");
    assert!(
        st["changed"]["error"]
            .as_str()
            .unwrap()
            .contains("changed while it was read")
    );
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the server is still up"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every response carries the security headers: the page's own assets only, no framing,
/// no referrer, no sniffing; and the page takes the token out of the address bar.
#[test]
fn every_response_has_the_security_headers() {
    let dir = temp_dir("headers");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let s = start(&path, &[]);
    let port = s.port;
    let replies = [
        s.get_with("/", ""),
        s.get_with("/app.js", ""),
        s.get_with("/style.css", ""),
        s.api("status"),
        s.get_with("/api/status", ""),
        s.get_with("/nowhere", ""),
        s.raw(format!("DELETE / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes()),
        s.raw(b"GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"),
    ];
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 403, 404, 405, 403]);
    for r in &replies {
        let csp = r
            .head
            .lines()
            .find_map(|l| l.strip_prefix("content-security-policy: "))
            .unwrap_or_else(|| panic!("no CSP in {}", r.head));
        for part in [
            "default-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(part), "{csp}");
        }
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        for h in [
            "referrer-policy: no-referrer",
            "x-content-type-options: nosniff",
            "x-frame-options: deny",
        ] {
            assert!(r.head.contains(h), "{h} missing in {}", r.head);
        }
    }
    // No inline script for the policy to allow: the page loads app.js, which drops the
    // token from the address (and history) at once.
    let page = String::from_utf8(replies[0].body.clone()).unwrap();
    assert_eq!(page.matches("<script").count(), 1);
    assert!(page.contains("<script src=\"app.js\"></script>"));
    let app = String::from_utf8(replies[1].body.clone()).unwrap();
    assert!(app.contains("history.replaceState(null, '', location.pathname + location.hash)"));
}

/// `--host 0.0.0.0 --allow-host NAME…`: a Host naming any NAME is served, any other still
/// refused.
#[test]
fn allowed_hosts_are_served_and_others_refused() {
    let dir = temp_dir("allow-host");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let s = start(
        &path,
        &[
            "--host",
            "0.0.0.0",
            "--allow-host",
            "trace-box.example",
            "--allow-host",
            "10.1.2.3",
        ],
    );
    let call = |host: &str| {
        let raw = format!(
            "GET /api/status?token={} HTTP/1.1\r\nHost: {host}:{}\r\nConnection: close\r\n\r\n",
            s.token, s.port
        );
        s.raw(raw.as_bytes()).status
    };
    assert_eq!(call("trace-box.example"), 200);
    assert_eq!(call("TRACE-BOX.example"), 200);
    assert_eq!(call("10.1.2.3"), 200);
    assert_eq!(call("127.0.0.1"), 200);
    assert_eq!(call("evil.example"), 403);
    assert_eq!(call("10.1.2.4"), 403);
}

/// Slow clients cannot keep others out: 150 connections that each send a request head one
/// header line every 2 s (reconnecting when closed) for 25 s, while a normal client asks
/// every ~0.8 s; at least 90% of the normal requests are answered 200 within 3 s, and the
/// server is still up. On 127.0.0.1 only.
#[test]
fn slow_clients_do_not_keep_others_out() {
    let dir = temp_dir("slow");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let mut s = start(&path, &[]);
    let port = s.port;
    let until = Instant::now() + Duration::from_secs(25);
    let drippers: Vec<_> = (0..150)
        .map(|_| {
            std::thread::spawn(move || {
                while Instant::now() < until {
                    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    };
                    let mut line =
                        format!("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
                    while Instant::now() < until && c.write_all(line.as_bytes()).is_ok() {
                        std::thread::sleep(Duration::from_secs(2));
                        line = "X-Slow: 1\r\n".to_owned();
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let (mut asked, mut answered) = (0u32, 0u32);
    while Instant::now() + Duration::from_secs(1) < until {
        let t = Instant::now();
        let ok = (|| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
            c.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
            let raw = format!(
                "GET /api/status?token={} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n",
                s.token
            );
            c.write_all(raw.as_bytes()).ok()?;
            let mut all = Vec::new();
            let _ = c.read_to_end(&mut all);
            Some(all.starts_with(b"HTTP/1.1 200 "))
        })()
        .unwrap_or(false);
        asked += 1;
        if ok && t.elapsed() < Duration::from_secs(3) {
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(800));
    }
    for d in drippers {
        d.join().unwrap();
    }
    assert!(asked >= 20, "{asked}");
    assert!(
        answered * 10 >= asked * 9,
        "{answered} of {asked} answered within 3 s"
    );
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the server is still up"
    );
    assert_eq!(s.ok("status")["format"], "x64dbg");
}

/// Every refusal of a malformed head is the server's own JSON error with the security
/// headers (not a bare one from the HTTP library), also after a request answered on the
/// same connection.
#[test]
fn malformed_heads_get_our_error_with_the_security_headers() {
    let dir = temp_dir("malformed");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let s = start(&path, &[]);
    let port = s.port;
    let has_headers = |r: &Reply| {
        for h in [
            "content-security-policy: default-src 'self'",
            "referrer-policy: no-referrer",
            "x-content-type-options: nosniff",
            "x-frame-options: deny",
            "cross-origin-resource-policy: same-origin",
            "content-type: application/json; charset=utf-8",
            "connection: close",
        ] {
            assert!(r.head.contains(h), "{h} missing in {}", r.head);
        }
        assert!(r.json()["error"].is_string());
    };
    for (raw, status) in [
        (b"GET / HTTP/1.1 extra\r\n\r\n".to_vec(), 400),
        (b"GET\r\n\r\n".to_vec(), 400),
        (b"\x00\x01garbage\r\n\r\n".to_vec(), 400),
        (b"GET /\xff HTTP/1.1\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\nbad header\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/3\r\n\r\n".to_vec(), 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 505),
        (
            format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000)).into_bytes(),
            431,
        ),
        (
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            413,
        ),
    ] {
        let r = s.raw(&raw);
        assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&raw));
        has_headers(&r);
    }
    // A good request, then a malformed one, on one connection: answered in order.
    let two = format!(
        "GET /api/state?i=3&token={} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nGET / HTTP/1.1 junk\r\n\r\n",
        s.token
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(two.as_bytes()).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let (r1, rest) = parse_reply(&all);
    assert_eq!((r1.status, r1.json()["i"].clone()), (200, 3.into()));
    let (r2, rest) = parse_reply(rest);
    assert_eq!(r2.status, 400);
    has_headers(&r2);
    assert!(rest.is_empty());
    assert_eq!(s.ok("state?i=299")["i"], 299);
}

/// SIGTERM and SIGINT stop the server within 200 ms (exit 0), also with connections open
/// (one idle, one half-way through its head).
#[cfg(unix)]
#[test]
fn serve_exits_within_200_ms_of_sigterm_and_sigint() {
    let dir = temp_dir("sigterm");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    for name in ["TERM", "INT"] {
        let mut s = start(&path, &[]);
        s.ok("status");
        let _idle = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let mut half = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        half.write_all(b"GET /api/status HTTP/1.1\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // From before `kill` starts: an upper bound of the time from the signal on.
        let t = Instant::now();
        let kill = Command::new("kill")
            .args([&format!("-{name}"), &s.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let sent = t.elapsed();
        let status = loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "SIG{name}: still running"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        let took = t.elapsed();
        eprintln!("SIG{name}: exited {took:?} after kill started ({sent:?} to run kill)");
        assert!(
            took < Duration::from_millis(200),
            "SIG{name}: exit after {took:?} ({sent:?} of them to run kill)"
        );
        assert_eq!(status.code(), Some(0), "SIG{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// At most 512 connections from one address: the next is answered 503 (with the security
/// headers) and closed; once they close, the server serves again.
#[test]
fn connections_past_the_per_peer_limit_get_503() {
    let dir = temp_dir("per-peer");
    let path = dir.join("known.trace64");
    std::fs::write(&path, known_trace()).unwrap();
    let s = start(&path, &[]);
    let held: Vec<TcpStream> = (0..512)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    // The server counts a connection once it has accepted it: retry until it has.
    let t = Instant::now();
    let busy = loop {
        let r = s.get_with("/", "");
        if r.status == 503 {
            break r;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no 503: {}",
            r.status
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(busy.json()["error"], "too many connections");
    for h in [
        "content-security-policy: default-src 'self'",
        "x-content-type-options: nosniff",
        "connection: close",
    ] {
        assert!(busy.head.contains(h), "{h} missing in {}", busy.head);
    }
    drop(held);
    let t = Instant::now();
    while s.get_with("/", "").status != 200 {
        assert!(t.elapsed() < Duration::from_secs(30), "still refused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.ok("state?i=7")["i"], 7);
}

/// A recording of a real program (`tracekit record`, where ptrace is allowed): the API's
/// answers equal the CLI's on the same file.
#[test]
fn serve_on_a_recording() {
    let Some(f) = crate::record::fixture() else {
        return;
    };
    let input = b"served bytes\n";
    let trace = f.path("served.trace64");
    let o = crate::record::record(f, &["-o", &trace, "--force"], input);
    assert_eq!(
        o.status.code(),
        Some(16 + input.len() as i32),
        "{}",
        stderr(&o)
    );
    let dump = cli_lines(&["dump", "--disasm", &trace]);
    let s = start(Path::new(&trace), &[]);
    let status = s.wait_ready();
    assert_eq!(status["steps"], dump.len());
    assert_eq!(status["isa"], "x64");
    assert_eq!(s.ok("info"), cli_lines(&["info", "--json", &trace])[0]);
    assert_eq!(
        s.ok("rows?from=0&count=20")["rows"].as_array().unwrap(),
        &dump[..20]
    );
    let last = dump.len() - 1;
    for i in [0, 1, last / 2, last] {
        assert_eq!(
            s.ok(&format!("state?i={i}")),
            cli_lines(&["state", "--json", "--at", &i.to_string(), &trace])[0],
            "state at {i}"
        );
    }
    // The read's bytes, after its step, and the xref of the buffer.
    let buf = crate::record::symbol(&f.exe, "buf");
    let read = dump
        .iter()
        .find(|r| {
            r["opcode"] == "0f05"
                && r["mem"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| hex(&m["addr"]) == buf)
        })
        .expect("the read's step");
    let at = read["i"].as_u64().unwrap() + 1;
    let addr = format!("{buf:#x}");
    let mem = s.ok(&format!("mem?i={at}&addr={addr}&len={}", input.len()));
    let cli = cli_lines(&[
        "mem",
        &trace,
        "--json",
        "--at",
        &at.to_string(),
        &addr,
        &input.len().to_string(),
    ]);
    assert_eq!(mem, cli[0]);
    assert_eq!(mem["bytes"], serde_json::json!(input));
    let xref = s.ok(&format!("xref?addr={addr}&len=8"));
    assert_eq!(
        xref["hits"].as_array().unwrap(),
        &cli_lines(&["xref", &trace, &format!("{addr}:8")])
    );
}

/// `/api/origin` is `tracekit origin --json`'s lines as one object, for registers, memory
/// and a cut chain, before and after the index is ready (so with and without the
/// sidecar); bad parameters are 400s naming them; a trace that is not x86 or x64 gets
/// the 400 of `/api/calls`, and tracepoint frames a 400 naming no parameter.
#[test]
fn origin_is_the_cli_origin() {
    let dir = temp_dir("origin");
    let path = dir.join("basic.trace64");
    std::fs::copy(testdata("x64dbg/basic.trace64"), &path).unwrap();
    let file = path.to_str().unwrap();
    let s = start(&path, &[]);
    let queries = [
        (701u64, "0x24fe00", None),
        (701, "0x24fe00:1", None),
        (701, "rdi", None),
        (600, "rsi", None),
        (600, "rsi", Some(3u64)),
        (1000, "rax", None),
        (10, "rax", None),
        (600, "esi", None),
    ];
    let check = |s: &Server| {
        for (at, target, max_hops) in queries {
            let mut call = format!("origin?i={at}&target={target}");
            let mut args = vec!["origin", file, "--json", "--at"];
            let at_text = at.to_string();
            args.push(&at_text);
            args.push(target);
            let hops_text = max_hops.map(|k| k.to_string());
            if let Some(k) = &hops_text {
                call.push_str(&format!("&max_hops={k}"));
                args.extend(["--max-hops", k]);
            }
            let api = s.ok(&call);
            let hops = cli_lines(&args);
            assert!(!hops.is_empty(), "{call}");
            assert_eq!(api["at"], at, "{call}");
            assert_eq!(api["target"], hops[0]["loc"], "{call}: the target's label");
            assert_eq!(api["hops"].as_array().unwrap(), &hops, "{call}");
            assert_eq!(api.as_object().unwrap().len(), 3, "{call}: {api}");
        }
    };
    // Whatever the index's state, then with the sidecar.
    check(&s);
    let steps = s.wait_ready()["steps"].as_u64().unwrap();
    check(&s);
    // The cut chain ends with a copy; a full one with its stop kind.
    let cut = s.ok("origin?i=600&target=rsi&max_hops=3");
    assert_eq!(cut["hops"].as_array().unwrap().len(), 3);
    assert_eq!(cut["hops"][2]["kind"], "copy");
    let full = s.ok("origin?i=600&target=rsi");
    assert_eq!(
        full["hops"].as_array().unwrap().last().unwrap()["kind"],
        "start"
    );
    s.ok(&format!("origin?i=600&target=rsi&max_hops={}", 1024));
    for (call, param) in [
        ("origin?target=rax", "i"),
        ("origin?i=x&target=rax", "i"),
        (&format!("origin?i={steps}&target=rax") as &str, "i"),
        ("origin?i=5", "target"),
        ("origin?i=5&target=nosuch", "target"),
        ("origin?i=5&target=0x10:0", "target"),
        ("origin?i=5&target=0x10:65", "target"),
        ("origin?i=5&target=0xffffffffffffffff:2", "target"),
        ("origin?i=5&target=rax&max_hops=0", "max_hops"),
        ("origin?i=5&target=rax&max_hops=1025", "max_hops"),
        ("origin?i=5&target=rax&max_hops=x", "max_hops"),
        ("origin?i=5&target=rax&target=rbx", "target"),
        ("origin?i=5&target=rax&at=5", "at"),
    ] {
        s.refused(call, 400, Some(param));
    }
    drop(s);

    // Not x86: amber TT6 (PowerPC), refused as /api/calls refuses it.
    let dir = temp_dir("origin-ppc");
    let path = dir.join("example.tt6");
    std::fs::copy(testdata("amber/example.tt6"), &path).unwrap();
    let s = start(&path, &[]);
    let calls = s.api("calls");
    let origin = s.api("origin?i=0&target=0x10");
    assert_eq!(origin.status, calls.status);
    assert_eq!(
        origin.status,
        400,
        "{}",
        String::from_utf8_lossy(&origin.body)
    );
    assert_eq!(origin.json()["param"], Value::Null);
    drop(s);

    // An x86 trace (Tenet): an x64 register is a 400 on `target`; memory is answered.
    let dir = temp_dir("origin-x86");
    let path = dir.join("qemu-x86.log");
    std::fs::copy(testdata("tenet/qemu-x86.log"), &path).unwrap();
    let file = path.to_str().unwrap();
    let s = start(&path, &[]);
    s.wait_ready();
    s.refused("origin?i=1&target=r8", 400, Some("target"));
    assert_eq!(
        s.ok("origin?i=2&target=eax")["hops"].as_array().unwrap(),
        &cli_lines(&["origin", file, "--json", "--at", "2", "eax"])
    );
    drop(s);

    // Tracepoint frames: snapshots, refused naming no parameter.
    let dir = temp_dir("origin-tfile");
    let path = dir.join("amd64.tf");
    std::fs::copy(testdata("gdb-tfile/amd64.tf"), &path).unwrap();
    let s = start(&path, &[]);
    s.wait_ready();
    let tf = s.api("origin?i=0&target=rax");
    assert_eq!(tf.status, 400, "{}", String::from_utf8_lossy(&tf.body));
    let v = tf.json();
    assert!(v["error"].as_str().unwrap().contains("tracepoint"), "{v}");
    assert_eq!(v["param"], Value::Null);
}
