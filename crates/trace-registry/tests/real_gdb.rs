//! The tfile instruction-stream view and `find` against GDB itself: a trace recorded on
//! this machine with gdb + gdbserver (the gdb-tfile crate's test helper), read by us, and
//! the same frames shown by `gdb -batch` (`tfind N`, `info registers`, `x/16xb`).
//! Without gdb, gdbserver or gcc the test prints that it is skipped, unless
//! `TRACEKIT_REQUIRE_GDB=1`, which makes that a failure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic,
    missing_docs
)]

#[allow(dead_code, unreachable_pub)]
#[path = "../../gdb-tfile/tests/integration/gdb.rs"]
mod gdb;

use std::collections::BTreeMap;

use trace_registry::formats::gdb_tfile::find::{FindQuery, MemQuery, find};
use trace_registry::steps::{NamedReg, RegValue, Step};
use trace_registry::{Ctx, Options};

/// What GDB shows for one frame.
#[derive(Debug, Default)]
struct GdbView {
    tracepoint: i64,
    /// `info registers`: name → value.
    regs: BTreeMap<String, u64>,
    /// `p/x $xmmK.uint128`.
    xmm: BTreeMap<String, u128>,
    /// `x/…xb`: address → byte, `None` for `<unavailable>`.
    mem: BTreeMap<u64, Option<u8>>,
}

const XMM: [&str; 3] = ["xmm0", "xmm1", "xmm15"];

/// Runs one gdb over `frames` of the recording and parses what it prints for each.
fn gdb_views(rec: &gdb::Recording, frames: &[u64], addrs: &[(u64, u32)]) -> Vec<GdbView> {
    let mut script = format!(
        "set pagination off\nset confirm off\ntarget tfile {}\n",
        rec.tfile.display()
    );
    for n in frames {
        script.push_str(&format!("tfind {n}\necho ==== {n}\\n\ninfo registers\n"));
        for x in XMM {
            script.push_str(&format!("echo X {x}\\n\nprint/x ${x}.uint128\n"));
        }
        for (addr, len) in addrs {
            script.push_str(&format!("x/{len}xb {addr:#x}\n"));
        }
    }
    let out = gdb::gdb_batch(&rec.dir, &script);
    let mut views: Vec<GdbView> = Vec::new();
    let mut pending_tp = None;
    let mut pending_xmm: Option<String> = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Found trace frame ") {
            let tp = rest.rsplit(' ').next().unwrap();
            pending_tp = Some(tp.parse::<i64>().unwrap());
        } else if line.starts_with("==== ") {
            views.push(GdbView {
                tracepoint: pending_tp.take().expect("tfind found the frame"),
                ..GdbView::default()
            });
        } else if let Some(view) = views.last_mut() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["X", name] => pending_xmm = Some((*name).to_owned()),
                [_, "=", value] if value.starts_with("0x") => {
                    let v = u128::from_str_radix(&value[2..], 16).unwrap();
                    view.xmm.insert(pending_xmm.take().unwrap(), v);
                }
                [addr, bytes @ ..] if addr.starts_with("0x") && addr.ends_with(':') => {
                    let base = u64::from_str_radix(&addr[2..addr.len() - 1], 16).unwrap();
                    for (k, b) in bytes.iter().enumerate() {
                        let v = b
                            .strip_prefix("0x")
                            .map(|h| u8::from_str_radix(h, 16).unwrap());
                        view.mem.insert(base + k as u64, v);
                    }
                }
                [name, value, ..] if value.starts_with("0x") => {
                    let v = u64::from_str_radix(&value[2..], 16).unwrap();
                    view.regs.insert((*name).to_owned(), v);
                }
                _ => {}
            }
        }
    }
    assert_eq!(views.len(), frames.len(), "gdb said:\n{out}");
    views
}

/// Our step at frame `n` (by seeking), its named registers and its tracepoint-free facts.
fn our_step(path: &std::path::Path, n: u64, gzip: bool) -> (Step, Vec<NamedReg>) {
    let mut input = if gzip {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&std::fs::read(path).unwrap()).unwrap();
        trace_registry::Input::from_bytes("out.tf.gz", gz.finish().unwrap()).unwrap()
    } else {
        trace_registry::Input::open(path.as_os_str()).unwrap()
    };
    let handler = trace_registry::detect(&input).unwrap();
    assert_eq!(handler.name(), "gdb-tfile");
    let options = Options::default();
    let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
    steps.seek(n).unwrap();
    let step = steps.next_step().unwrap().unwrap().clone();
    let mut named = Vec::new();
    steps.named_regs(&mut named);
    (step, named)
}

/// The collected byte at `addr` in a step's snapshot.
fn snapshot_byte(step: &Step, addr: u64) -> Option<u8> {
    step.mem.iter().find_map(|a| {
        let k = addr.checked_sub(a.addr)?;
        (k < u64::from(a.len)).then(|| step.old(a).unwrap()[k as usize])
    })
}

#[test]
fn steps_and_find_agree_with_gdb() {
    if !gdb::available("steps_and_find_agree_with_gdb") {
        return;
    }
    let rec = gdb::recording();
    let n = gdb::ITERATIONS;
    // traceme frames, cond_fn frames (i % 500 == 7) and their while-stepping frames.
    let frames = [0, 1, 7, 8, 9, 10, 11, 500, n - 1, n + 7];
    let buf = rec.testglob + 0x20;
    let addrs = [(rec.testglob, 4), (buf, 16), (buf + 60, 8)];
    let views = gdb_views(rec, &frames, &addrs);
    // The views hold what is compared: registers, vector registers, and memory both
    // collected and unavailable.
    assert!(
        views
            .iter()
            .all(|v| v.regs.len() > 20 && v.xmm.len() == XMM.len())
    );
    let bytes = views.iter().flat_map(|v| v.mem.values().copied());
    let (collected, unavailable): (Vec<Option<u8>>, Vec<Option<u8>>) =
        bytes.partition(|b| b.is_some());
    assert!(!collected.is_empty() && !unavailable.is_empty());
    let mut compared = 0;
    for (&frame, view) in frames.iter().zip(&views) {
        for gzip in [false, true] {
            let (step, named) = our_step(&rec.tfile, frame, gzip);
            assert_eq!(step.i, frame);
            assert_eq!(step.pc, view.regs["rip"], "frame {frame}: pc is rip");
            for (name, value) in &view.regs {
                let ours = named
                    .iter()
                    .find(|r| r.name == *name)
                    .unwrap_or_else(|| panic!("frame {frame}: GDB shows {name}, we do not"));
                assert_eq!(ours.value, RegValue::Word(*value), "frame {frame} {name}");
                compared += 1;
            }
            for (name, value) in &view.xmm {
                let ours = named.iter().find(|r| r.name == *name).unwrap();
                let RegValue::Wide(bytes) = &ours.value else {
                    panic!("{name} is not wide");
                };
                let le: [u8; 16] = bytes.as_slice().try_into().unwrap();
                assert_eq!(u128::from_le_bytes(le), *value, "frame {frame} {name}");
            }
            for (addr, byte) in &view.mem {
                assert_eq!(
                    snapshot_byte(&step, *addr),
                    *byte,
                    "frame {frame} {addr:#x}"
                );
            }
            // find: the frame is among the matches of its own tracepoint, pc and memory.
            let matches = |query: FindQuery| -> Vec<u64> {
                let mut input = trace_registry::Input::open(rec.tfile.as_os_str()).unwrap();
                let handler = trace_registry::detect(&input).unwrap();
                let options = Options::default();
                let mut out = Vec::new();
                find(handler, &mut input, &mut Ctx::new(&options), &query, |m| {
                    out.push(m.frame);
                    Ok(())
                })
                .unwrap();
                out
            };
            if gzip {
                continue;
            }
            let rip = view.regs["rip"];
            let tp = u64::try_from(view.tracepoint).unwrap();
            let by_pc = matches(FindQuery {
                pc: Some(rip),
                tracepoint: Some(tp),
                ..FindQuery::default()
            });
            assert!(
                by_pc.contains(&frame),
                "frame {frame}: find --pc --tracepoint"
            );
            let collected = view.mem.get(&buf).copied().flatten().is_some();
            let by_mem = matches(FindQuery {
                mem: Some(MemQuery {
                    addr: buf,
                    len: Some(16),
                }),
                range: Some(rip..rip + 1),
                ..FindQuery::default()
            });
            assert_eq!(
                by_mem.contains(&frame),
                collected,
                "frame {frame}: find --mem"
            );
        }
    }
    assert!(
        compared > 20 * frames.len(),
        "only {compared} registers compared"
    );
}

/// `state` and `mem` against GDB on consecutive frames (tracepoint frames with memory, a
/// conditional one and its while-stepping frames without): `state --at N` has every
/// register `tfind N` + `info registers` shows, with its value; `mem --at N` has, for each
/// byte, GDB's `x` value at the latest frame up to N where GDB could read it (frame N's own
/// blocks first), from that frame, never inferred, and is unknown where no frame up to N
/// collected it.
#[test]
fn state_and_mem_agree_with_gdb() {
    use trace_analyses::mem::{MemQuery, mem};
    use trace_analyses::state::state;

    if !gdb::available("state_and_mem_agree_with_gdb") {
        return;
    }
    let rec = gdb::recording();
    let frames: Vec<u64> = (0..14).collect();
    let buf = rec.testglob + 0x20;
    // testglob with 4 bytes before it (not collected), and the start of buf.
    let addrs = [(rec.testglob - 4, 8), (buf, 16)];
    let views = gdb_views(rec, &frames, &addrs);
    let options = Options::default();
    let open = || {
        let input = trace_registry::Input::open(rec.tfile.as_os_str()).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        (input, handler)
    };
    let (mut from_earlier, mut unavailable_to_gdb) = (0, 0);
    for (&frame, view) in frames.iter().zip(&views) {
        let (mut input, handler) = open();
        let s = state(handler, &mut input, &mut Ctx::new(&options), frame).unwrap();
        assert_eq!((s.i, s.pc), (frame, view.regs["rip"]));
        for (name, value) in &view.regs {
            assert_eq!(
                s.get(name),
                Some(&RegValue::Word(*value)),
                "frame {frame} {name}"
            );
        }
        for (name, value) in &view.xmm {
            let Some(RegValue::Wide(bytes)) = s.get(name) else {
                panic!("frame {frame}: {name} is not wide");
            };
            let le: [u8; 16] = bytes.as_slice().try_into().unwrap();
            assert_eq!(u128::from_le_bytes(le), *value, "frame {frame} {name}");
        }
        for &(addr, len) in &addrs {
            let (mut input, handler) = open();
            let query = MemQuery {
                at: frame,
                addr,
                len: Some(u64::from(len)),
            };
            let (m, damage) = mem(handler, &mut input, &mut Ctx::new(&options), &query).unwrap();
            assert!(damage.is_none());
            for k in 0..u64::from(len) {
                let a = addr + k;
                // GDB's byte at the latest frame up to `frame` that has it.
                let want = views[..=frame as usize]
                    .iter()
                    .zip(&frames)
                    .rev()
                    .find_map(|(v, &f)| v.mem.get(&a).copied().flatten().map(|b| (f, b)));
                let k = k as usize;
                let got = m.bytes[k].map(|b| (m.source[k].unwrap(), b));
                assert_eq!(got, want, "frame {frame} byte {a:#x}");
                assert_ne!(m.inferred[k], Some(true));
                if want.is_some_and(|(f, _)| f < frame) {
                    from_earlier += 1;
                }
                if view.mem.get(&a) == Some(&None) {
                    unavailable_to_gdb += 1;
                }
            }
        }
    }
    // The frames compared include bytes only earlier frames collected, and bytes GDB
    // cannot read at all.
    assert!(from_earlier > 0 && unavailable_to_gdb > 0);
}

/// Pc, stack pointer, flags, and the first access (address, old value) of an instruction.
type X64dbgView = (u64, u64, u64, Option<(u64, u64)>);

/// What `tracekit state`/`dump` give for each instruction of the first thread of an
/// x64dbg trace.
fn x64dbg_views(bytes: &[u8], name: &str) -> Vec<X64dbgView> {
    let mut input = trace_registry::Input::from_bytes(name, bytes.to_vec()).unwrap();
    let handler = trace_registry::detect(&input).unwrap();
    let options = Options::default();
    let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
    let names: Vec<String> = steps.reg_names().iter().map(|n| n.to_string()).collect();
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    let (sp, fl) = if names.contains(&"rsp".to_owned()) {
        (at("rsp"), at("rflags"))
    } else {
        (at("esp"), at("eflags"))
    };
    let mut first = None;
    let mut out = Vec::new();
    while let Some(step) = steps.next_step() {
        let step = step.unwrap().clone();
        if *first.get_or_insert(step.thread) != step.thread {
            continue;
        }
        let mem = step.mem.first().map(|a| {
            let old = step.old(a).unwrap();
            let mut w = [0u8; 8];
            w[..old.len()].copy_from_slice(old);
            (a.addr, u64::from_le_bytes(w))
        });
        let regs = steps.regs();
        out.push((step.pc, regs[sp], regs[fl] & 0xffff_ffff, mem));
    }
    out
}

/// `convert --to tfile` against GDB: `target tfile` with no executable, then for a sample
/// of frames `tfind N`, `p/x $rip`, `p/x $rsp`, `p/x $eflags` and `x/gx ADDR` (32-bit:
/// `$eip`, `$esp`, `x/wx`) give what the x64dbg trace says before instruction N: a
/// synthetic trace of a thousand instructions, the x86 fixture, and the real x64dbg sample
/// when it is there.
#[test]
fn gdb_replays_x64dbg_traces_converted_to_tfiles() {
    if !gdb::available("gdb_replays_x64dbg_traces_converted_to_tfiles") {
        return;
    }
    let opts = trac_x64dbg::testgen::Options {
        arch: trac_x64dbg::Arch::X64,
        threads: 1,
        max_run: 100,
        seed: 5,
    };
    let synthetic =
        trac_x64dbg::testgen::trace(opts, 1000, trac_x64dbg::RecorderOptions::default(), "a.exe");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut inputs = vec![
        ("synthetic.trace64", synthetic),
        (
            "basic.trace32",
            std::fs::read(root.join("testdata/x64dbg/basic.trace32")).unwrap(),
        ),
    ];
    let real = root.join("../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
    match std::fs::read(&real) {
        Ok(b) => inputs.push(("real.trace64", b)),
        Err(_) if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") => {
            panic!("{} missing and TRACEKIT_REQUIRE_REALDATA=1", real.display())
        }
        Err(_) => eprintln!("skipped the real x64dbg sample: not found"),
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("x64dbg-to-tfile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in inputs {
        let want = x64dbg_views(&bytes, name);
        let x86 = name.ends_with("32");
        let mut input = trace_registry::Input::from_bytes(name, bytes).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        let options = Options::default();
        let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let path = dir.join(format!("{name}.tf"));
        let file = std::fs::File::create(&path).unwrap();
        let (done, _) = trace_sinks::tfile::convert(&mut *steps, None, file).unwrap();
        assert_eq!(done.frames as usize, want.len());
        let n = want.len();
        let sample: Vec<usize> = [0, 1, 2, 7, n / 3, n / 2, n - 2, n - 1]
            .into_iter()
            .filter(|&k| k < n)
            .collect();
        let (pc, sp, x) = if x86 {
            ("$eip", "$esp", "x/wx")
        } else {
            ("$rip", "$rsp", "x/gx")
        };
        let mut script = format!(
            "set pagination off\nset confirm off\ntarget tfile {}\n",
            path.display()
        );
        for &k in &sample {
            script.push_str(&format!(
                "tfind {k}\necho ==== {k}\\n\np/x {pc}\np/x {sp}\np/x $eflags\n"
            ));
            if let Some((addr, _)) = want[k].3 {
                script.push_str(&format!("{x} {addr:#x}\n"));
            }
        }
        let out = gdb::gdb_batch(&dir, &script);
        let mut seen = 0;
        for chunk in out.split("==== ").skip(1) {
            let k: usize = chunk.lines().next().unwrap().trim().parse().unwrap();
            let values: Vec<u64> = chunk
                .lines()
                .filter_map(|l| l.split_once(" = 0x").map(|(_, v)| v))
                .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
                .collect();
            let (want_pc, want_sp, want_flags, mem) = want[k];
            assert_eq!(
                values,
                vec![want_pc, want_sp, want_flags],
                "{name} frame {k}: gdb said\n{chunk}"
            );
            if let Some((addr, old)) = mem {
                let line = chunk
                    .lines()
                    .find(|l| l.starts_with(&format!("{addr:#x}")))
                    .unwrap_or_else(|| panic!("{name} frame {k}: no x output\n{chunk}"));
                let v = line.split_whitespace().nth(1).unwrap();
                let v = u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
                assert_eq!(v, old, "{name} frame {k}: memory at {addr:#x}");
            }
            seen += 1;
        }
        assert_eq!(seen, sample.len(), "{name}: gdb said\n{out}");
    }
}
