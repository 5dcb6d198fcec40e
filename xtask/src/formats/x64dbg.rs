//! xtask hooks for x64dbg: fixtures under `testdata/x64dbg/`, synthetic traces and the
//! benchmark rows, all made by `trac-x64dbg`'s own writer and synthetic machine.

use std::hint::black_box;
use std::sync::Arc;

use trac_x64dbg::testgen::{self, Machine, Options};
use trac_x64dbg::{Arch, Block, Header, Pc, Recorder, RecorderOptions, Trace, Writer};

use super::FormatTasks;
use crate::bench::{BenchCase, BenchConfig};
use crate::fixtures::Fixtures;

pub const TASKS: FormatTasks = FormatTasks {
    name: "x64dbg",
    fixtures: Some(fixtures),
    synth: Some(synth_trace),
    bench: Some(bench),
};

const PATH64: &str = r"C:\Users\re\Desktop\crackme.exe";
const PATH32: &str = r"C:\Program Files (x86)\Tools\app32.exe";

fn opts(arch: Arch, threads: u32, max_run: u64, seed: u64) -> Options {
    Options {
        arch,
        threads,
        max_run,
        seed,
    }
}

fn legacy() -> RecorderOptions {
    RecorderOptions {
        legacy_thread_ids: true,
        ..RecorderOptions::default()
    }
}

/// Two recording sessions in one file (the second appended without a header), with user
/// blocks 0x81 (PR #3752's test text) and 0x80 (a supertrace-style meta block).
fn sessions() -> Vec<u8> {
    let header = Header::new(Arch::X64, PATH64);
    let writer = Writer::new(Vec::new(), &header).unwrap();
    let mut rec = Recorder::new(writer, RecorderOptions::default());
    let mut m = Machine::new(opts(Arch::X64, 2, 80, 5));
    for _ in 0..300 {
        rec.step(m.step()).unwrap();
    }
    rec.user_block(0x81, b"Hello LingMo").unwrap();
    rec.new_session().unwrap();
    let mut m = Machine::new(opts(Arch::X64, 2, 120, 6));
    for _ in 0..700 {
        rec.step(m.step()).unwrap();
    }
    rec.user_block(0x80, &[0x01, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef])
        .unwrap();
    rec.finish().unwrap()
}

/// Two runs of one program for `tracekit diff`: run 2 has rax off by 0x10 for five
/// instructions from instruction 100 (a register difference), and five more instructions
/// at another address from instruction 300 (the pcs part, then join again).
fn runs() -> [Vec<u8>; 2] {
    [false, true].map(|second| {
        let header = Header::new(Arch::X64, PATH64);
        let writer = Writer::new(Vec::new(), &header).unwrap();
        let mut rec = Recorder::new(writer, RecorderOptions::default());
        let mut m = Machine::new(opts(Arch::X64, 1, 1, 21));
        for i in 0..500u64 {
            let mut step = m.step();
            if second && (100..105).contains(&i) {
                let rax = step.regs.word(0);
                step.regs.set_word(0, rax ^ 0x10);
            }
            if second && i == 300 {
                for k in 0..5u64 {
                    let mut extra = step.clone();
                    extra.regs.set_ip(0x7ff6_a1b2_9000 + k);
                    extra.opcode = vec![0x90];
                    extra.mem.clear();
                    rec.step(extra).unwrap();
                }
            }
            rec.step(step).unwrap();
        }
        rec.finish().unwrap()
    })
}

fn small(arch: Arch) -> Vec<u8> {
    testgen::trace(opts(arch, 1, 10, 9), 4, RecorderOptions::default(), PATH64)
}

fn with(mut base: Vec<u8>, tail: &[u8]) -> Vec<u8> {
    base.extend_from_slice(tail);
    base
}

fn fixtures(fx: &mut Fixtures) {
    let d = RecorderOptions::default();
    fx.add(
        "x64dbg/basic.trace64",
        testgen::trace(opts(Arch::X64, 3, 150, 1), 1100, d, PATH64),
    );
    fx.add(
        "x64dbg/basic.trace32",
        testgen::trace(opts(Arch::X86, 2, 200, 2), 700, d, PATH32),
    );
    fx.add(
        "x64dbg/legacy-tid.trace64",
        testgen::trace(opts(Arch::X64, 3, 6, 3), 600, legacy(), PATH64),
    );
    fx.add(
        "x64dbg/legacy-tid.trace32",
        testgen::trace(opts(Arch::X86, 2, 4, 4), 300, legacy(), PATH32),
    );
    fx.add("x64dbg/sessions.trace64", sessions());
    let [run1, run2] = runs();
    fx.add("x64dbg/run1.trace64", run1);
    fx.add("x64dbg/run2.trace64", run2);

    // Negative fixtures, one per error.
    let json = Header::new(Arch::X64, PATH64).to_json();
    let mut truncated = b"TRAC".to_vec();
    truncated.extend_from_slice(&(json.len() as u32).to_le_bytes());
    truncated.extend_from_slice(&json.as_bytes()[..40]);
    fx.add("x64dbg/err-truncated-header.bin", truncated);
    let mut huge = b"TRAC".to_vec();
    huge.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    huge.extend_from_slice(br#"{"ver":1,"arch":"x64"}"#);
    fx.add("x64dbg/err-huge-header.bin", huge);
    let v2 = br#"{"ver":2,"arch":"x64","hashAlgorithm":"murmurhash","hash":"0x0","compression":"","path":""}"#;
    let mut bad_version = b"TRAC".to_vec();
    bad_version.extend_from_slice(&(v2.len() as u32).to_le_bytes());
    bad_version.extend_from_slice(v2);
    let first_block = &small(Arch::X64)[8 + json.len()..];
    bad_version.extend_from_slice(first_block);
    fx.add("x64dbg/err-bad-version.bin", bad_version);
    // "Unsupported block type 51" (x64dbg issue #3888).
    fx.add(
        "x64dbg/err-bad-block-type.bin",
        with(small(Arch::X64), &[0x33, 0x00, 0x00, 0x01, 0x90]),
    );
    // 173 register changes on x64.
    fx.add(
        "x64dbg/err-too-many-registers.bin",
        with(small(Arch::X64), &[0x00, 173, 0x00, 0x01, 0x90]),
    );
    // x86: positions 200 then 20 reach index 221 of 216.
    let mut oob = vec![0x00, 2, 0x00, 0x01, 0x90, 200, 20];
    oob.extend_from_slice(&[0; 8]);
    fx.add(
        "x64dbg/err-register-out-of-range.bin",
        with(small(Arch::X86), &oob),
    );
    fx.add(
        "x64dbg/err-too-many-memory-accesses.bin",
        with(small(Arch::X64), &[0x00, 0x00, 33, 0x01, 0x90]),
    );
    fx.add(
        "x64dbg/err-empty-opcode.bin",
        with(small(Arch::X64), &[0x00, 0x01, 0x00, 0x00, 0x00, 0x2a]),
    );
    // The last block cut in the middle (a recording that stopped mid-write).
    let whole = testgen::trace(opts(Arch::X64, 2, 3, 10), 6, d, PATH64);
    fx.add(
        "x64dbg/err-truncated-block.bin",
        whole[..whole.len() - 7].to_vec(),
    );
}

fn synth_trace(records: u64, seed: u64) -> Vec<u8> {
    testgen::trace(
        opts(Arch::X64, 4, 300, seed),
        records,
        RecorderOptions::default(),
        PATH64,
    )
}

/// Iterates the blocks, as a tool that walks a trace does (counting instructions and
/// their threads, looking at each opcode), and with `FIELDS` also every register change
/// and memory access; returns the instruction count.
fn run_blocks<const FIELDS: bool>(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes).unwrap();
    let mut n = 0u64;
    let mut acc = 0u64;
    for b in trace.blocks() {
        match b.unwrap() {
            Block::Instruction(ins) => {
                n += 1;
                acc ^= u64::from(ins.thread()) ^ ins.opcode().len() as u64;
                if FIELDS {
                    for r in ins.regs() {
                        acc = acc.wrapping_add(r.value ^ u64::from(r.index));
                    }
                    for m in ins.mem() {
                        acc = acc.wrapping_add(m.address ^ m.old ^ m.new.unwrap_or(0));
                    }
                }
            }
            Block::User(u) => acc ^= u.payload.len() as u64,
        }
    }
    black_box(acc);
    n
}

/// Full decode with the register state before every instruction.
fn run_replay(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes).unwrap();
    let mut replay = trace.replay();
    let mut n = 0u64;
    let mut acc = 0u64;
    while let Some(ins) = replay.next_instruction() {
        let ins = ins.unwrap();
        n += 1;
        acc = acc.wrapping_add(replay.regs().ip() ^ u64::from(ins.thread()));
        acc ^= ins.opcode().len() as u64;
        for m in ins.mem() {
            acc = acc.wrapping_add(m.address ^ m.old ^ m.new.unwrap_or(0));
        }
    }
    black_box(acc);
    n
}

/// Every instruction with its pc from the `cip` changes, thread and opcode length
/// (the [`Pc`] cursor): the walk `bbv`'s blocks are read from.
fn run_pc_scan(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes).unwrap();
    let mut scan = trace.cursor::<Pc>();
    let (mut n, mut acc) = (0u64, 0u64);
    while let Some(ins) = scan.next_instruction() {
        let ins = ins.unwrap();
        n += 1;
        acc = acc
            .wrapping_add(scan.regs().ip() ^ u64::from(ins.thread()) ^ ins.opcode().len() as u64);
    }
    black_box(acc);
    n
}

fn run_index(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes).unwrap();
    let index = trace.build_index().unwrap();
    black_box(index.full_dumps());
    index.instructions()
}

/// `xref` without a sidecar: the [`Pc`] cursor's search for one stack word
/// (`next_instruction_where`: a pc from the `cip` changes, the addresses in place);
/// returns the instructions read.
fn run_xref_scan(bytes: &[u8]) -> u64 {
    let trace = Trace::parse(bytes).unwrap();
    let mut scan = trace.cursor::<Pc>();
    let mut acc = 0u64;
    while let Some(ins) = scan.next_instruction_where(|ins, _| ins.touches(0x14_fe00, 0x14_fe08)) {
        ins.unwrap();
        acc = acc.wrapping_add(scan.regs().ip());
    }
    black_box(acc);
    scan.instructions()
}

/// The same question through the generic instruction stream (every step with the full
/// register replay), what every format without a fast path does.
fn run_xref_steps(bytes: &[u8]) -> u64 {
    use trace_registry::steps::ScanQuery;
    let mut input = trace_registry::Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let options = trace_registry::Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut steps = handler
        .steps(&mut input, &mut trace_registry::Ctx::new(&options))
        .unwrap();
    let query = ScanQuery {
        mem: Some(0x14_fe00..0x14_fe08),
        ..ScanQuery::default()
    };
    // What `steps::scan_by_steps` does, counting the steps.
    let (mut n, mut acc) = (0u64, 0u64);
    while let Some(step) = steps.next_step() {
        let step = step.unwrap();
        n += 1;
        if query.matches(step) {
            acc = acc.wrapping_add(step.pc);
        }
    }
    black_box(acc);
    n
}

/// The plain instruction walk `calls` is measured against: every step through the generic
/// stream with the general registers kept
/// ([`RegsWanted::General`](trace_registry::steps::RegsWanted::General), `walk_steps`,
/// what the Tenet conversion reads), looking at each pc and opcode.
fn run_walk_general(bytes: &[u8]) -> u64 {
    use trace_registry::steps::RegsWanted;
    let mut input = trace_registry::Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let options = trace_registry::Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut steps = handler
        .steps(&mut input, &mut trace_registry::Ctx::new(&options))
        .unwrap();
    steps.want_regs(RegsWanted::General);
    let (mut n, mut acc) = (0u64, 0u64);
    steps
        .walk_steps(&mut |step, regs, _| {
            n += 1;
            acc = acc.wrapping_add(
                step.pc ^ step.opcode.len() as u64 ^ regs.first().copied().unwrap_or(0),
            );
            true
        })
        .unwrap();
    black_box(acc);
    n
}

/// `tracekit calls` without output: the call tree, arguments and stacks in one pass.
fn run_calls(bytes: &[u8]) -> u64 {
    use trace_analyses::calls::{CallsOptions, calls};
    let mut input = trace_registry::Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let options = trace_registry::Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut rows = 0u64;
    let done = calls(
        handler,
        &mut input,
        &mut trace_registry::Ctx::new(&options),
        &CallsOptions::default(),
        &mut |c| {
            rows += 1;
            black_box(c.i);
            Ok(())
        },
    )
    .unwrap();
    black_box(rows);
    done.summary.instructions
}

/// The input written to a temporary file once, for the rows that need a path.
fn on_disk(bytes: &[u8]) -> std::path::PathBuf {
    // Under the folder `cargo xtask bench` removes at the end.
    let dir = std::env::temp_dir()
        .join(format!("tracekit-bench-{}", std::process::id()))
        .join("x64dbg");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.trace64");
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some(bytes.len() as u64) {
        std::fs::write(&path, bytes).unwrap();
    }
    path
}

/// `tracekit index`: the sidecar index built and written (beside the trace).
fn run_sidecar_build(bytes: &[u8]) -> u64 {
    use trace_index as index;
    let path = on_disk(bytes);
    let options = trace_registry::Options::default();
    let mut input = trace_registry::Input::open(path.as_os_str()).unwrap();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let built = index::build(
        handler,
        &mut input,
        &mut trace_registry::Ctx::new(&options),
        None,
        index::BuildOptions::default(),
    )
    .unwrap();
    eprintln!(
        "  (sidecar: {} bytes, {:.3} of the trace; seek index {} bytes)",
        built.index_bytes,
        built.index_bytes as f64 / built.trace_bytes as f64,
        built.seek_bytes
    );
    built.steps
}

/// What `state FILE --at N` does with the sidecar there: open the trace, load the seek
/// index from the sidecar, seek to N and read every named register; 20 seeks spread over
/// the trace, so units/s is seeks per second (the latency is its inverse).
fn run_state_with_sidecar(bytes: &[u8]) -> u64 {
    let path = on_disk(bytes);
    let sidecar = trace_index::default_path(&path);
    if !sidecar.exists() {
        run_sidecar_build(bytes);
    }
    let options = trace_registry::Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let total = trace_index::Sidecar::open(
        &sidecar,
        &trace_index::Identity::of(&path).unwrap(),
        "x64dbg",
    )
    .unwrap()
    .header()
    .steps;
    let mut regs = Vec::new();
    for k in 0..20u64 {
        let mut input = trace_registry::Input::open(path.as_os_str()).unwrap();
        let mut steps = handler
            .steps(&mut input, &mut trace_registry::Ctx::new(&options))
            .unwrap();
        steps
            .seek(total / 20 * k + k * 7919 % (total / 20).max(1))
            .unwrap();
        steps.next_step().unwrap().unwrap();
        regs.clear();
        steps.named_regs(&mut regs);
        black_box(&regs);
    }
    20
}

fn bench(config: &BenchConfig) -> Vec<BenchCase> {
    let want = config.mib << 20;
    // Size a sample, then generate enough instructions for `want` bytes.
    let sample = synth_trace(20_000, 1);
    let per = (sample.len() as u64 / 20_000).max(1);
    let input = Arc::new(synth_trace(want / per + want / per / 50 + 1, 1));
    let row = |name: &str, run: fn(&[u8]) -> u64| BenchCase {
        name: name.into(),
        input: Arc::clone(&input),
        unit: "instrs",
        run: Box::new(run),
    };
    vec![
        row("x64dbg blocks (iterate)", run_blocks::<false>),
        row("x64dbg blocks + every reg and mem", run_blocks::<true>),
        row("x64dbg replay (decode + registers)", run_replay),
        row("x64dbg index pass", run_index),
        row("x64dbg xref (scan)", run_xref_scan),
        row("x64dbg xref (generic Steps)", run_xref_steps),
        row("x64dbg index build (sidecar)", run_sidecar_build),
        BenchCase::shared("x64dbg bbv (slices of 1M)", &input, "instrs", |bytes| {
            crate::bench::run_bbv("x64dbg", bytes, None, None)
        }),
        row("x64dbg pc scan (bbv's walk)", run_pc_scan),
        row("x64dbg steps walk (general regs)", run_walk_general),
        row("x64dbg calls (tree, args, stacks)", run_calls),
        BenchCase {
            name: "x64dbg state with sidecar".into(),
            input: Arc::clone(&input),
            unit: "seeks",
            run: Box::new(run_state_with_sidecar),
        },
    ]
}
