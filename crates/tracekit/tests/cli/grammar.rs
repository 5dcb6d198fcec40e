//! One grammar across the commands (issue 33, points 4 and 5), through the built binary:
//! `-o/--output` everywhere, one thread option, input options only where they apply, the
//! overwrite rule and the summary line of every command that writes files, errors that say
//! what is expected, counts with suffixes, `mem` at a register, `dot --routine NAME`,
//! `state --regs/--disasm`, `mem`'s earlier tfile frames and `simpoint`'s warnings.

use std::path::{Path, PathBuf};

use crate::common::{stderr, stdout, testdata, tracekit};

const BASIC: &str = "x64dbg/basic.trace64";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tk-grammar-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn td(rel: &str) -> String {
    testdata(rel).to_str().unwrap().to_owned()
}

/// A `.bb` file of `slices` slices: slice `i` is block `1 + i % 3` run `length(i)` times.
fn bb(slices: usize, length: impl Fn(usize) -> u64) -> String {
    (0..slices)
        .map(|i| format!("T:{}:{}\n", 1 + i % 3, length(i)))
        .collect()
}

#[test]
fn help_lists_only_the_options_that_apply_under_their_heading() {
    let o = tracekit(["simpoint", "--help"]);
    let help = stdout(&o);
    assert!(o.status.success());
    for absent in ["--format", "--dcfg", "--disasm", "--index", "--big-endian"] {
        assert!(
            !help.contains(absent),
            "simpoint --help lists {absent}:\n{help}"
        );
    }
    assert!(help.contains("-o, --output <PREFIX>"), "{help}");
    // It writes files and says so on stderr, as the others do: `-q` silences that.
    assert!(help.contains("-q, --quiet"), "{help}");
    let o = tracekit(["state", "--help"]);
    let help = stdout(&o);
    let heading = help
        .find("Input options:")
        .expect("an Input options heading");
    for input in ["--format", "--dcfg", "--disasm", "--index"] {
        assert!(help[heading..].contains(input), "{input}:\n{help}");
    }
    assert!(!help.contains("--force"), "{help}");
    // Given before the command, an input option still has to be one the command takes.
    let o = tracekit(["--dcfg", "x.json", "simpoint", "f.bb", "--max-k", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--dcfg does not apply to `tracekit simpoint`"),
        "{}",
        stderr(&o)
    );
    let o = tracekit(["--disasm", "info", &td(BASIC)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--disasm does not apply to `tracekit info`"));
    let o = tracekit(["simpoint", "f.bb", "--max-k", "2", "--dcfg", "x"]);
    assert_eq!(o.status.code(), Some(2));
    // Before and after the command alike where it applies.
    let before = tracekit(["--format", "x64dbg", "-q", "info", &td(BASIC), "--json"]);
    let after = tracekit(["info", &td(BASIC), "--json", "-q", "--format", "x64dbg"]);
    assert!(before.status.success() && after.status.success());
    assert_eq!(stdout(&before), stdout(&after));
}

/// A format option applies to the formats that read it: given for another one, before or
/// after the command, it is a usage error naming the formats it is for, never ignored.
#[test]
fn format_options_apply_only_to_the_formats_that_read_them() {
    let dcfg = td("dcfg/sample.dcfg.json");
    for args in [
        vec!["loops", "--arch", "amd64", &dcfg],
        vec!["--arch", "amd64", "dot", &dcfg],
        vec!["dump", "--big-endian", &dcfg],
    ] {
        let o = tracekit(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains("does not apply to dcfg input"), "{args:?}: {e}");
        assert!(
            e.contains("--arch (for tenet input)")
                || e.contains("--big-endian (for gdb-tfile input)"),
            "{args:?}: {e}"
        );
    }
    let o = tracekit(["info", "--record-size", "1004", "--lenient", &td(BASIC)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "--record-size (for amber-full input), --lenient (for dcfg-trace input) do not apply to x64dbg input"
        ),
        "{}",
        stderr(&o)
    );
    // Where the format reads it, it is taken.
    let o = tracekit(["info", "--arch", "amd64", &td("tenet/basic.log")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn simpoint_and_regions_take_output_and_thread_as_the_others_do() {
    let dir = scratch("output");
    let file = dir.join("run.bb");
    std::fs::write(&file, bb(30, |i| 100 + (i % 5) as u64)).unwrap();
    for (flag, prefix) in [("-o", "short"), ("--output", "long"), ("--out", "alias")] {
        let p = dir.join(prefix);
        let o = tracekit(["simpoint", s(&file), "--max-k", "3", flag, s(&p)]);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        assert!(dir.join(format!("{prefix}.simpoints")).exists(), "{flag}");
        assert!(dir.join(format!("{prefix}.weights")).exists(), "{flag}");
    }
    let sp = dir.join("short.simpoints");
    let w = dir.join("short.weights");
    let regions = |extra: &[&str]| {
        let mut args = vec![
            "regions",
            s(&file),
            "--simpoints",
            s(&sp),
            "--weights",
            s(&w),
        ];
        args.extend_from_slice(extra);
        tracekit(args)
    };
    let by_thread = regions(&["--thread", "7"]);
    let by_old_name = regions(&["--thread-id", "7"]);
    assert!(by_thread.status.success(), "{}", stderr(&by_thread));
    assert_eq!(stdout(&by_thread), stdout(&by_old_name));
    assert!(
        stdout(&by_thread).lines().nth(1).unwrap().contains(",7,"),
        "{}",
        stdout(&by_thread)
    );
    // `--thread-id` works but is not advertised.
    assert!(!stdout(&tracekit(["regions", "--help"])).contains("--thread-id"));
}

#[test]
fn every_writer_refuses_an_existing_output_unless_forced_and_says_what_it_wrote() {
    let dir = scratch("overwrite");
    let trace = td(BASIC);
    let edges = dir.join("edges.jsonl");
    std::fs::write(&edges, "{\"pid\":0,\"thread\":0,\"edges\":[1,2,3]}\n").unwrap();
    let bb_file = dir.join("run.bb");
    std::fs::write(&bb_file, bb(12, |_| 10)).unwrap();
    let out = |name: &str| s(&dir.join(name)).to_owned();
    let args = |a: &[&str]| a.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
    // (arguments, the file that must exist before the second run, the summary's start)
    let cases: Vec<(Vec<String>, String, String)> = vec![
        (
            args(&["bbv", &trace, "--slice", "100", "-o", &out("b.bb")]),
            out("b.T4728.bb"),
            out("b.T"),
        ),
        (
            args(&["convert", &trace, "--to", "din", "-o", &out("c.din")]),
            out("c.din"),
            format!("{}: ", out("c.din")),
        ),
        (
            args(&["convert", &trace, "--to", "tenet", "-o", &out("t")]),
            out("t.4728.log"),
            out("t."),
        ),
        (
            args(&["convert", &trace, "--to", "tfile", "-o", &out("f.tf")]),
            out("f.tf"),
            format!("{}: thread ", out("f.tf")),
        ),
        (
            args(&["index", &trace, "-o", &out("i.tkidx")]),
            out("i.tkidx"),
            format!("{}: 1100 steps", out("i.tkidx")),
        ),
        (
            args(&["encode", s(&edges), "-o", &out("e.trace.json")]),
            out("e.trace.json"),
            format!(
                "{}: 1 process(es), 1 thread(s), 3 edges",
                out("e.trace.json")
            ),
        ),
        (
            args(&["simpoint", s(&bb_file), "--max-k", "2", "-o", &out("sp")]),
            out("sp.weights"),
            String::new(),
        ),
        (
            args(&["export", &trace, "-o", &out("x")]),
            out("x"),
            "instructions".into(),
        ),
    ];
    for (args, existing, summary) in &cases {
        let first = tracekit(args);
        assert!(first.status.success(), "{args:?}: {}", stderr(&first));
        assert!(Path::new(existing).exists(), "{args:?} wrote no {existing}");
        if args[0] != "simpoint" {
            assert!(stdout(&first).is_empty(), "{args:?}: {}", stdout(&first));
            // The summary, among any warnings (encode without --dcfg says that each edge
            // counts one instruction).
            let err = stderr(&first);
            let said = err.lines().any(|l| l.starts_with(summary.as_str()));
            assert!(said, "{args:?}: {err}");
        }
        let before = std::fs::metadata(existing).unwrap().modified().unwrap();
        let again = tracekit(args);
        assert_eq!(again.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&again).contains("(--force replaces it)"),
            "{args:?}: {}",
            stderr(&again)
        );
        assert_eq!(
            std::fs::metadata(existing).unwrap().modified().unwrap(),
            before
        );
        let mut forced = args.clone();
        forced.push("--force".into());
        let o = tracekit(&forced);
        assert!(o.status.success(), "{forced:?}: {}", stderr(&o));
        let mut quiet = forced.clone();
        if args[0] != "simpoint" {
            quiet.push("-q".into());
            let o = tracekit(&quiet);
            assert!(o.status.success(), "{quiet:?}: {}", stderr(&o));
            assert!(!stderr(&o).contains(&out("")), "{quiet:?}: {}", stderr(&o));
        }
    }
    // regions -o, the same way.
    let sp = out("sp.simpoints");
    let w = out("sp.weights");
    let csv = out("r.csv");
    let args = [
        "regions",
        s(&bb_file),
        "--simpoints",
        &sp,
        "--weights",
        &w,
        "-o",
        &csv,
    ];
    let o = tracekit(args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(stderr(&o), format!("{csv}: {rows} regions\n"));
    let o = tracekit(args);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("(--force replaces it)"));
    // A din to stdout says nothing on stderr.
    let o = tracekit(["convert", &trace, "--to", "din"]);
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    let lines = stdout(&o).lines().count();
    let din = std::fs::read_to_string(out("c.din")).unwrap();
    assert_eq!(din.lines().count(), lines);
    let o = tracekit(["convert", &trace, "--to", "din", "-o", &out("c2.din")]);
    assert_eq!(
        stderr(&o),
        format!("{}: {lines} din lines\n", out("c2.din"))
    );
}

#[test]
fn errors_say_what_is_expected() {
    let trace = td(BASIC);
    let usage = |args: &[&str], says: &str| {
        let o = tracekit(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("'-- -"), "{args:?}: {}", stderr(&o));
    };
    usage(&["state", &trace, "--at", "-1"], "must be ≥ 0");
    usage(&["mem", &trace, "--at", "-1", "rsp"], "must be ≥ 0");
    usage(
        &["bbv", &trace, "--slice", "-5", "-o", "x.bb"],
        "must be ≥ 0",
    );
    usage(
        &["bbv", &trace, "--slice", "0", "-o", "x.bb"],
        "must be at least 1",
    );
    usage(
        &["bbv", &trace, "--slice", "1.5M", "-o", "x.bb"],
        "with K, M or G",
    );
    usage(
        &["mem", &trace, "--at", "1", "r$p"],
        "a register (rsp) or [register+offset]",
    );
    usage(
        &["mem", &trace, "--at", "1", "[rsp+x]"],
        "is not an address",
    );
    usage(
        &["mem", &trace, "--at", "1", "nosuch"],
        "no register \"nosuch\" before instruction 1",
    );
    usage(
        &["mem", &trace, "--at", "1", "xmm0"],
        "wider than an address",
    );
    usage(
        &["state", &trace, "--at", "1", "--regs", "rax,nosuch"],
        "no register \"nosuch\"",
    );
    let o = tracekit(["dot", &td("dcfg/sample.dcfg.json"), "--routine", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no routine named \"nosuch\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn counts_take_suffixes() {
    let dir = scratch("suffix");
    let trace = td(BASIC);
    let plain = dir.join("plain.bb");
    let suffixed = dir.join("suffixed.bb");
    let a = tracekit([
        "bbv",
        &trace,
        "--slice",
        "1000000",
        "-o",
        s(&plain),
        "--global",
    ]);
    let b = tracekit([
        "bbv",
        &trace,
        "--slice",
        "1M",
        "-o",
        s(&suffixed),
        "--global",
    ]);
    assert!(a.status.success() && b.status.success(), "{}", stderr(&b));
    assert_eq!(
        std::fs::read(&plain).unwrap(),
        std::fs::read(&suffixed).unwrap()
    );
    let k = tracekit([
        "bbv",
        &trace,
        "--slice",
        "1k",
        "-o",
        s(&dir.join("k.bb")),
        "--global",
    ]);
    let n = tracekit([
        "bbv",
        &trace,
        "--slice",
        "1000",
        "-o",
        s(&dir.join("n.bb")),
        "--global",
    ]);
    assert!(k.status.success() && n.status.success());
    assert_eq!(
        std::fs::read(dir.join("k.bb")).unwrap(),
        std::fs::read(dir.join("n.bb")).unwrap()
    );
    // diff's window, xref's length.
    let a = tracekit(["diff", &trace, &trace, "--window", "1M", "--json"]);
    let b = tracekit(["diff", &trace, &trace, "--window", "1000000", "--json"]);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(stdout(&a), stdout(&b));
    let a = tracekit(["xref", &trace, "0x24f000:4K"]);
    let b = tracekit(["xref", &trace, "0x24f000:4096"]);
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(!stdout(&a).is_empty());
    assert_eq!(stdout(&a), stdout(&b));
    // Byte sizes count KiB: `mem … 1K` reads 1024 bytes.
    let o = tracekit(["mem", &trace, "--at", "700", "0x24f000", "1K", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["len"], 1024);
}

#[test]
fn mem_at_a_register_is_the_address_state_gives() {
    let trace = td(BASIC);
    let o = tracekit(["state", &trace, "--at", "701", "--json", "--regs", "rsp"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rsp = u64::from_str_radix(
        v["regs"]["rsp"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    for (expr, addr) in [
        ("rsp", rsp),
        ("[rsp+0x10]", rsp + 0x10),
        ("rsp+16", rsp + 16),
        ("[rsp-8]", rsp - 8),
        ("RSP", rsp),
    ] {
        let by_reg = tracekit(["mem", &trace, "--at", "701", expr, "16", "--json"]);
        let by_addr = tracekit([
            "mem",
            &trace,
            "--at",
            "701",
            &format!("{addr:#x}"),
            "16",
            "--json",
        ]);
        assert!(by_reg.status.success(), "{expr}: {}", stderr(&by_reg));
        assert_eq!(stdout(&by_reg), stdout(&by_addr), "{expr}");
        // The text says what the expression came to.
        let text = tracekit(["mem", &trace, "--at", "701", expr]);
        assert!(
            stdout(&text)
                .lines()
                .next()
                .unwrap()
                .ends_with(&format!(" = {addr:#x}"))
        );
    }
    // From stdin too (read once, kept for both lookups).
    let bytes = std::fs::read(testdata(BASIC)).unwrap();
    let o =
        crate::common::tracekit_stdin(["mem", "-", "--at", "701", "[rsp+0x10]", "--json"], &bytes);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["addr"], format!("{:#x}", rsp + 0x10));
    // 701's rsp + 0x10 holds what 700 wrote there.
    assert_eq!(v["source"][0], 700);
}

#[test]
fn dot_routine_by_name_or_id() {
    let file = td("dcfg/sample.dcfg.json");
    let by_id = tracekit(["dot", &file, "--routine", "4"]);
    let by_name = tracekit(["dot", &file, "--routine", "main"]);
    assert!(by_name.status.success(), "{}", stderr(&by_name));
    assert_eq!(stdout(&by_id), stdout(&by_name));
    assert!(stdout(&by_name).contains("subgraph cluster_routine4 {"));
}

#[test]
fn state_filters_registers_and_shows_the_instruction() {
    let trace = td(BASIC);
    let o = tracekit([
        "state", &trace, "--at", "700", "--regs", "rsp,rdi", "--disasm",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "registers before instruction 700 (thread 4728, pc 0x7ff6a1b21011)\n\
         0x7ff6a1b21011: mov qword ptr [rsp+0x10], rdi\n\
         \n\
         rsp 0x000000000024fdf0  rdi 0xb63e1ba01ec921ed\n"
    );
    let o = tracekit([
        "state", &trace, "--at", "700", "--regs", "rdi,rsp", "--json", "--disasm",
    ]);
    assert_eq!(
        stdout(&o),
        "{\"i\":700,\"thread\":4728,\"asm\":\"mov qword ptr [rsp+0x10], rdi\",\"regs\":{\"rdi\":\"0xb63e1ba01ec921ed\",\"rsp\":\"0x24fdf0\"}}\n"
    );
    // Without --disasm, as before: no instruction line, no "asm".
    let o = tracekit(["state", &trace, "--at", "700", "--json"]);
    assert!(!stdout(&o).contains("asm"));
    // A tfile frame whose bytes at pc were not collected: no instruction to show.
    let o = tracekit([
        "state",
        &td("gdb-tfile/amd64.tf"),
        "--at",
        "1",
        "--disasm",
        "--regs",
        "rip",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "registers before frame 1 (thread 0, pc 0x401134)\n\nrip 0x00401134\n"
    );
}

#[test]
fn mem_marks_the_bytes_of_earlier_tfile_frames() {
    // quirks.tf's frame 6 does not collect 0x404060.., which frame 5 did.
    let file = td("gdb-tfile/quirks.tf");
    let o = tracekit(["mem", "-q", &file, "--at", "6", "0x404060", "4", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"i\":6,\"addr\":\"0x404060\",\"len\":4,\"bytes\":[5,6,7,8],\"source\":[5,5,5,5],\"inferred\":[false,false,false,false],\"earlier\":[true,true,true,true]}\n"
    );
    let o = tracekit(["mem", "-q", &file, "--at", "6", "0x404060", "4"]);
    let text = stdout(&o);
    assert!(text.contains("00404060 ~05~06~07~08"), "{text}");
    assert!(
        text.contains("~xx  earlier: frame 6 did not collect it"),
        "{text}"
    );
    assert!(
        text.contains("0x404060..0x404064  frame 5 (earlier)"),
        "{text}"
    );
    // At frame 5 they are its own: no mark.
    let o = tracekit(["mem", "-q", &file, "--at", "5", "0x404060", "4", "--json"]);
    assert!(
        stdout(&o).contains("\"earlier\":[false,false,false,false]"),
        "{}",
        stdout(&o)
    );
    let o = tracekit(["mem", "-q", &file, "--at", "5", "0x404060", "4"]);
    assert!(!stdout(&o).contains('~'), "{}", stdout(&o));
    // x64dbg's answers have no "earlier": every access is recorded.
    let o = tracekit(["mem", &td(BASIC), "--at", "701", "0x24fe00", "--json"]);
    assert!(!stdout(&o).contains("earlier"));
}

#[test]
fn simpoint_warns_at_max_k_and_on_unequal_slices() {
    let dir = scratch("warn");
    // Three phases, equal lengths: k = 3 < --max-k 6 says nothing; --max-k 2 is reached.
    let even = dir.join("even.bb");
    std::fs::write(&even, bb(60, |_| 100)).unwrap();
    let o = tracekit(["simpoint", s(&even), "--max-k", "6"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let o = tracekit(["simpoint", s(&even), "--max-k", "2", "--force"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("warning: the chosen k is --max-k 2"),
        "{}",
        stderr(&o)
    );
    // A 3-instruction last slice among slices of 100.
    let uneven = dir.join("uneven.bb");
    std::fs::write(&uneven, bb(60, |i| if i == 59 { 3 } else { 100 })).unwrap();
    let o = tracekit(["simpoint", s(&uneven), "--max-k", "6"]);
    assert!(o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("slice lengths differ more than 2x (slice 59: 3 instructions, slice 0: 100)"),
        "{err}"
    );
    assert!(err.contains("--weight-by-instructions"), "{err}");
    let o = tracekit([
        "simpoint",
        s(&uneven),
        "--max-k",
        "6",
        "--weight-by-instructions",
        "--force",
    ]);
    assert!(!stderr(&o).contains("differ"), "{}", stderr(&o));
}
