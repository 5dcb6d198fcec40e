//! `tracekit origin`: each hop of `basic.trace64`'s chains against the other commands: a
//! memory hop's writer is the last write `xref --disasm` lists before the hop's step, the
//! value at each location equals the value at the source its copy names (`state --json`,
//! `mem --json`), the hops link up (each `loc` the previous `from`); the same answers with a
//! sidecar index; the JSON shape; the errors (exit 2, saying what is expected).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::{json_lines, stderr, stdout, testdata, tracekit};

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// Answers of the other commands, each asked once.
struct Oracle {
    file: String,
    states: RefCell<HashMap<u64, Value>>,
    writes: RefCell<HashMap<String, Vec<u64>>>,
}

impl Oracle {
    fn new(file: &str) -> Oracle {
        Oracle {
            file: file.to_owned(),
            states: RefCell::default(),
            writes: RefCell::default(),
        }
    }

    /// `state --json --at at`.
    fn state(&self, at: u64) -> Value {
        self.states
            .borrow_mut()
            .entry(at)
            .or_insert_with(|| {
                let at = at.to_string();
                json_lines(&["state", "--json", "--at", &at, &self.file]).remove(0)
            })
            .clone()
    }

    /// A register's value before `at` and its size in bytes (the general registers and
    /// their 32-bit halves; `None` for the others).
    fn reg(&self, at: u64, name: &str) -> Option<(u64, u32)> {
        let regs = self.state(at)["regs"].clone();
        if let Some(v) = regs.get(name) {
            // A vector register's value is wider than a number: not compared.
            let v = u64::from_str_radix(v.as_str()?.trim_start_matches("0x"), 16).ok()?;
            return Some((v, 8));
        }
        let full = match name.strip_prefix('e') {
            Some(rest) => format!("r{rest}"),
            None => name.strip_suffix('d').map(str::to_owned)?,
        };
        regs.get(&full).map(|v| (hex(v) & 0xffff_ffff, 4))
    }

    /// `mem --json --at at ADDR LEN` as a number, for up to 8 bytes all known.
    fn mem(&self, at: u64, addr: u64, len: u32) -> Option<(u64, u32)> {
        if len > 8 {
            return None;
        }
        let (at, a, l) = (at.to_string(), format!("{addr:#x}"), len.to_string());
        let m = json_lines(&["mem", "--json", "--at", &at, &self.file, &a, &l]).remove(0);
        let mut v = 0u64;
        for (k, b) in m["bytes"].as_array().unwrap().iter().enumerate() {
            v |= b.as_u64()? << (8 * k);
        }
        Some((v, len))
    }

    /// The steps `xref --disasm` lists as writing a byte of the range.
    fn writes(&self, addr: u64, len: u32) -> Vec<u64> {
        let key = format!("{addr:#x}:{len}");
        self.writes
            .borrow_mut()
            .entry(key.clone())
            .or_insert_with(|| {
                json_lines(&["xref", "--disasm", &self.file, &key])
                    .iter()
                    .filter(|h| {
                        matches!(h["access"].as_str(), Some("write" | "readwrite"))
                            || (h["access"] == "unknown" && !h["new"].is_null())
                    })
                    .map(|h| h["i"].as_u64().unwrap())
                    .collect()
            })
            .clone()
    }

    /// The value at a location (`rax`, `0x…:8`) before `at`.
    fn value(&self, at: u64, loc: &str) -> Option<(u64, u32)> {
        match parse_mem(loc) {
            Some((addr, len)) => self.mem(at, addr, len),
            None => self.reg(at, loc),
        }
    }
}

/// `0x…:LEN`.
fn parse_mem(loc: &str) -> Option<(u64, u32)> {
    let (a, l) = loc.split_once(':')?;
    Some((
        u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()?,
        l.parse().ok()?,
    ))
}

const KINDS: [&str; 6] = ["copy", "compute", "syscall", "partial", "start", "unknown"];

/// What the checks of one chain counted.
#[derive(Default)]
struct Checked {
    hops: usize,
    writers: usize,
    values: usize,
}

/// Checks every hop of `origin --at at target` against the oracle.
fn check_chain(oracle: &Oracle, at: u64, target: &str, checked: &mut Checked) -> Vec<Value> {
    let a = at.to_string();
    let hops = json_lines(&["origin", "--json", "--at", &a, &oracle.file, target]);
    assert!(!hops.is_empty(), "{target} at {at}");
    let mut before = at;
    let mut loc = if target.starts_with("0x") && !target.contains(':') {
        format!("{target}:8")
    } else {
        target.to_owned()
    };
    for (k, hop) in hops.iter().enumerate() {
        let what = format!("{target} at {at}, hop {k}: {hop}");
        let keys: Vec<&str> = hop
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            ["asm", "from", "i", "kind", "loc", "pc", "thread"],
            "{what}"
        );
        let kind = hop["kind"].as_str().unwrap();
        assert!(KINDS.contains(&kind), "{what}");
        assert_eq!(hop["loc"], loc.as_str(), "{what}");
        assert_eq!(hop["from"].is_null(), kind != "copy", "{what}");
        if k + 1 < hops.len() {
            assert_eq!(kind, "copy", "only the last hop stops: {what}");
        }
        let i = hop["i"].as_u64();
        assert_eq!(i.is_none(), kind == "start", "{what}");
        assert!(i.is_none_or(|i| i < before), "{what}");
        if let Some(i) = i {
            // The step is the one `state` shows there.
            let s = oracle.state(i);
            assert_eq!(s["thread"], hop["thread"], "{what}");
            assert_eq!(s["regs"]["rip"], hop["pc"], "{what}");
            assert!(hop["asm"].as_str().is_some_and(|t| !t.is_empty()), "{what}");
            if parse_mem(&loc).is_none() {
                // A register is its thread's.
                assert_eq!(oracle.state(before)["thread"], hop["thread"], "{what}");
            }
        }
        if let Some((addr, len)) = parse_mem(&loc) {
            let last = oracle
                .writes(addr, len)
                .into_iter()
                .filter(|&w| w < before)
                .max();
            assert_eq!(i, last, "the last write xref lists: {what}");
            checked.writers += 1;
        }
        if kind == "copy" {
            let from = hop["from"].as_str().unwrap();
            let i = i.unwrap();
            if let (Some((v, vs)), Some((w, ws))) =
                (oracle.value(before, &loc), oracle.value(i, from))
            {
                let bytes = vs.min(ws);
                let mask = if bytes >= 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * bytes)) - 1
                };
                assert_eq!(v & mask, w & mask, "the value is the source's: {what}");
                checked.values += 1;
            }
            before = i;
            loc = from.to_owned();
        }
        checked.hops += 1;
    }
    hops
}

/// Chains of registers and stack words at several points of `basic.trace64`, every hop
/// checked; some go through memory, some end at the start.
#[test]
fn origin_hops_agree_with_xref_state_and_mem() {
    let file = testdata("x64dbg/basic.trace64");
    let oracle = Oracle::new(file.to_str().unwrap());
    let mut checked = Checked::default();
    let mut kinds: HashMap<String, usize> = HashMap::new();
    for at in [300, 701, 1050, 1099] {
        for target in [
            "rax",
            "rbx",
            "rcx",
            "edi",
            "rsp",
            "0x24fe00",
            "0x34fdf8",
            "0x34fe18:4",
        ] {
            for hop in check_chain(&oracle, at, target, &mut checked) {
                *kinds
                    .entry(hop["kind"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
    }
    assert!(checked.hops > 50, "{}", checked.hops);
    assert!(checked.writers > 10, "{}", checked.writers);
    assert!(checked.values > 20, "{}", checked.values);
    for kind in ["copy", "compute", "start"] {
        assert!(
            kinds.contains_key(kind),
            "some chain has a {kind} hop: {kinds:?}"
        );
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tk-origin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// With a sidecar index the answers are the same; the text has a line per hop; `--max-hops`
/// cuts the chain.
#[test]
fn origin_with_a_sidecar_text_and_max_hops() {
    let dir = temp_dir("sidecar");
    let file = dir.join("basic.trace64");
    std::fs::copy(testdata("x64dbg/basic.trace64"), &file).unwrap();
    let plain = file.to_str().unwrap().to_owned();
    let queries = [
        (1050, "rax"),
        (1099, "0x34fdf8"),
        (701, "0x24fe00:4"),
        (900, "rsi"),
    ];
    let before: Vec<Vec<Value>> = queries
        .iter()
        .map(|(at, t)| json_lines(&["origin", "--json", "--at", &at.to_string(), &plain, t]))
        .collect();
    let o = tracekit(["index", "-q", &plain]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("basic.trace64.tkidx").exists());
    for ((at, t), want) in queries.iter().zip(&before) {
        let got = json_lines(&["origin", "--json", "--at", &at.to_string(), &plain, t]);
        assert_eq!(&got, want, "{t} at {at}");
        let o = tracekit(["origin", "--at", &at.to_string(), &plain, t]);
        assert!(o.status.success());
        let text = stdout(&o);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("origin of "), "{text}");
        assert!(
            lines[0].ends_with(&format!(" before instruction {at}")),
            "{text}"
        );
        let cut = want.last().is_some_and(|h| h["kind"] == "copy");
        assert_eq!(lines.len(), want.len() + 1 + usize::from(cut), "{text}");
        for (line, hop) in lines[1..].iter().zip(want) {
            let loc = hop["loc"].as_str().unwrap();
            assert!(line.contains(loc), "{line} names {loc}");
            if let Some(i) = hop["i"].as_u64() {
                assert!(line.contains(&format!("instruction {i} ")), "{line}");
            }
        }
    }
    // The rax chain at 1050 is long: two hops of it, both copies.
    let long = &before[0];
    assert!(long.len() > 3, "{long:?}");
    let cut = json_lines(&[
        "origin",
        "--json",
        "--max-hops",
        "2",
        "--at",
        "1050",
        &plain,
        "rax",
    ]);
    assert_eq!(cut, long[..2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Usage errors exit 2 and say what is expected.
#[test]
fn origin_errors_say_what_is_expected() {
    let file = testdata("x64dbg/basic.trace64");
    let f = file.to_str().unwrap();
    let tt6 = testdata("amber/all-opcodes.tt6");
    let tf = testdata("gdb-tfile/amd64.tf");
    for (args, says) in [
        (vec!["origin", "--at", "1100", f, "rax"], "past the end"),
        (vec!["origin", "--at", "5", f, "foo"], "expected a register"),
        (
            vec!["origin", "--at", "5", f, "0x10:100"],
            "expected a register",
        ),
        (
            vec!["origin", "--at", "5", f, "rax", "--max-hops", "0"],
            "at least 1",
        ),
        (
            vec!["origin", "--at", "5", tt6.to_str().unwrap(), "r3"],
            "expected a register",
        ),
        (
            vec!["origin", "--at", "5", tt6.to_str().unwrap(), "eax"],
            "x86 and x64",
        ),
        (
            vec!["origin", "--at", "2", tf.to_str().unwrap(), "rax"],
            "snapshots",
        ),
    ] {
        let o = tracekit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// A Tenet trace records no instruction bytes: the writer is found from the register and
/// memory changes, and its kind is unknown.
#[test]
fn origin_of_a_tenet_trace_finds_the_writer_without_bytes() {
    let file = testdata("tenet/basic.log");
    let f = file.to_str().unwrap();
    // `dump` shows rax becoming 0x55 after instruction 2, and 0x7ffe8 written by 0.
    let dump = json_lines(&["dump", f]);
    let changed = dump
        .iter()
        .find(|r| r["regs"]["rax"] == "0x55")
        .and_then(|r| r["i"].as_u64())
        .unwrap();
    let hops = json_lines(&["origin", "--json", "--at", "6", f, "rax"]);
    assert_eq!(hops.len(), 1);
    assert_eq!(hops[0]["i"].as_u64(), Some(changed - 1));
    assert_eq!(hops[0]["kind"], "unknown");
    assert!(hops[0]["asm"].is_null());
    let hops = json_lines(&["origin", "--json", "--at", "6", f, "0x7ffe8"]);
    let writer = dump
        .iter()
        .find(|r| {
            r["mem"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["access"] == "write" && m["addr"] == "0x7ffe8")
        })
        .and_then(|r| r["i"].as_u64());
    assert_eq!(hops[0]["i"].as_u64(), writer);
}
