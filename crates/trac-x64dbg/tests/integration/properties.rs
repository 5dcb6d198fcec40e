//! Property tests: round trips through the writer and the reader, the recorder against the
//! replayed register states (thread-id recovery included), truncation, and never panicking.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use trac_x64dbg::{
    Arch, Block, Cursor, Full, General, Header, Index, InstructionRecord, MemAccess, Pc,
    ReadOptions, Record, Recorder, RecorderOptions, RegChange, RegDump, Step, StreamReader,
    ThreadField, ThreadIdMode, Trace, Writer, fuzz_read, write_records,
};

use crate::common::{
    replay_all, slice_records, slice_records_with, slice_replay, stream_records, stream_replay,
    testdata,
};

/// The next instruction of `scan` that executes at `pc` or whose recorded memory words
/// overlap `lo..hi`: what `xref` asks.
fn next_match<'a>(
    scan: &mut Cursor<'a, Pc>,
    pc: Option<u64>,
    lo: u64,
    hi: u64,
) -> Option<trac_x64dbg::Instruction<'a>> {
    let ins = scan.next_instruction_where(|ins, regs| {
        pc == Some(regs.ip()) || (lo < hi && ins.touches(lo, hi))
    });
    Some(ins?.unwrap())
}

fn below(g: &mut Gen, n: u64) -> u64 {
    u64::arbitrary(g) % n.max(1)
}

fn arch(g: &mut Gen) -> Arch {
    if bool::arbitrary(g) {
        Arch::X64
    } else {
        Arch::X86
    }
}

fn word(g: &mut Gen, arch: Arch) -> u64 {
    // Mix small and full-width values.
    let v = u64::arbitrary(g);
    let v = if bool::arbitrary(g) { v & 0xffff } else { v };
    v & arch.word_max()
}

fn opcode(g: &mut Gen) -> Vec<u8> {
    let n = 1 + below(g, 15) as usize;
    (0..n).map(|_| u8::arbitrary(g)).collect()
}

fn mem(g: &mut Gen, arch: Arch) -> Vec<MemAccess> {
    let n = if below(g, 10) == 0 {
        32
    } else {
        below(g, 4) as usize
    };
    (0..n)
        .map(|_| {
            let new = if bool::arbitrary(g) {
                Some(word(g, arch))
            } else {
                None
            };
            MemAccess {
                flags: u8::from(new.is_none()),
                address: word(g, arch),
                old: word(g, arch),
                new,
            }
        })
        .collect()
}

const TIDS: [u32; 4] = [0x1234, 0x1278, 0x12bc, 0x2f0];

/// A header and records whose thread fields follow the flag (what `ThreadIdMode::Flag`
/// reads back exactly).
#[derive(Clone, Debug)]
struct FlagRecords(Header, Vec<Record>);

impl Arbitrary for FlagRecords {
    fn arbitrary(g: &mut Gen) -> Self {
        let arch = arch(g);
        let words = u64::from(arch.regdump_words());
        let mut header = Header::new(arch, "C:\\t\\a.exe");
        if bool::arbitrary(g) {
            header
                .extra
                .insert("note".into(), String::arbitrary(g).into());
        }
        let n = below(g, 40) as usize;
        let mut thread = 0;
        let records = (0..n)
            .map(|_| {
                if below(g, 10) == 0 {
                    let len = below(g, 20) as usize;
                    return Record::User {
                        block_type: 0x80 | u8::arbitrary(g),
                        payload: (0..len).map(|_| u8::arbitrary(g)).collect(),
                    };
                }
                let thread_field = if bool::arbitrary(g) {
                    thread = u32::arbitrary(g);
                    ThreadField::Flagged
                } else {
                    ThreadField::Absent
                };
                let regs = if below(g, 8) == 0 {
                    (0..words)
                        .map(|i| RegChange {
                            index: i as u16,
                            value: word(g, arch),
                        })
                        .collect()
                } else {
                    let mut idx: Vec<u16> =
                        (0..below(g, 6)).map(|_| below(g, words) as u16).collect();
                    idx.sort_unstable();
                    idx.dedup();
                    idx.into_iter()
                        .map(|index| RegChange {
                            index,
                            value: word(g, arch),
                        })
                        .collect()
                };
                Record::Instruction(InstructionRecord {
                    thread,
                    thread_field,
                    opcode: opcode(g),
                    regs,
                    mem: mem(g, arch),
                })
            })
            .collect();
        FlagRecords(header, records)
    }
}

#[test]
fn records_bytes_records() {
    fn prop(FlagRecords(header, records): FlagRecords) -> bool {
        let bytes = write_records(&header, &records).unwrap();
        let opts = ReadOptions {
            thread_ids: ThreadIdMode::Flag,
        };
        let trace = Trace::with_options(&bytes, opts).unwrap();
        let back: Vec<Record> = trace.blocks().map(|b| b.unwrap().to_record()).collect();
        let again = write_records(trace.header(), &back).unwrap();
        trace.header() == &header && back == records && again == bytes
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(FlagRecords) -> bool);
}

/// The register changes of every instruction of `bytes`, through the named fields a dump
/// shows ([`trac_x64dbg::RegLayout::show`]: no key joins fields or is a byte range) and
/// back ([`trac_x64dbg::RegLayout::changes`], with the words told only when the fields do
/// not tell them): the same words and values; the blocks then write back the same bytes.
fn named_round_trip(bytes: &[u8], opts: ReadOptions) -> bool {
    let trace = Trace::with_options(bytes, opts).unwrap();
    let layout = trac_x64dbg::reg_layout(trace.arch());
    let mut regs = RegDump::new(trace.arch());
    let mut records = Vec::new();
    for block in trace.blocks() {
        let Ok(block) = block else { break };
        let mut record = block.to_record();
        if let Block::Instruction(ins) = &block {
            ins.apply(&mut regs);
            let words: Vec<u16> = ins.regs().map(|c| c.index).collect();
            let mut shown = Vec::new();
            let exact = layout.show(&regs, words.iter().copied(), |f| shown.push(f));
            if shown.iter().any(|f| f.name.contains(['|', '['])) {
                return false;
            }
            let values = shown.iter().map(|f| (f.name, regs.field_u128(f)));
            let told = (!exact).then_some(words.as_slice());
            let back = layout.changes(values, told).unwrap();
            if back != ins.regs().collect::<Vec<_>>() {
                return false;
            }
            if let Record::Instruction(r) = &mut record {
                r.regs = back;
            }
        }
        records.push(record);
    }
    write_records(trace.header(), &records).is_ok_and(|again| {
        let n = again.len();
        bytes.get(..n) == Some(&again[..])
    })
}

#[test]
fn named_registers_round_trip() {
    fn prop(FlagRecords(header, records): FlagRecords) -> bool {
        let bytes = write_records(&header, &records).unwrap();
        let opts = ReadOptions {
            thread_ids: ThreadIdMode::Flag,
        };
        named_round_trip(&bytes, opts)
    }
    for name in [
        "basic.trace64",
        "basic.trace32",
        "legacy-tid.trace64",
        "legacy-tid.trace32",
        "sessions.trace64",
    ] {
        let bytes = testdata(name);
        assert!(named_round_trip(&bytes, ReadOptions::default()), "{name}");
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(FlagRecords) -> bool);
}

/// Executed steps as the recorder takes them, with recorder options and session breaks.
#[derive(Clone, Debug)]
struct Steps {
    arch: Arch,
    opts: RecorderOptions,
    steps: Vec<Step>,
    breaks: Vec<usize>,
}

impl Arbitrary for Steps {
    fn arbitrary(g: &mut Gen) -> Self {
        let arch = arch(g);
        let words = u64::from(arch.regdump_words());
        let opts = RecorderOptions {
            full_dump_interval: *g.choose(&[512, 1, 3, 16, 0]).unwrap_or(&512),
            legacy_thread_ids: bool::arbitrary(g),
            lookahead: bool::arbitrary(g),
        };
        let n = 1 + below(g, 120) as usize;
        let max_run = 1 + below(g, 6);
        let init: Vec<u64> = (0..words).map(|_| word(g, arch)).collect();
        // Threads share most register values but never a stack (nor, here, a pc).
        let mut states: Vec<RegDump> = (0..TIDS.len() as u64)
            .map(|k| {
                let mut r = RegDump::from_words(arch, &init);
                r.set_word(4, 0x10_0000 * (k + 1) + below(g, 0x1000) * 8);
                r.set_ip(0x40_0000 + 0x1000 * k + below(g, 0x100));
                r
            })
            .collect();
        let mut cur = 0usize;
        let mut left = 0;
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            if left == 0 {
                cur = below(g, TIDS.len() as u64) as usize;
                left = 1 + below(g, max_run);
            }
            left -= 1;
            let before = states[cur].clone();
            for _ in 0..below(g, 5) {
                let i = below(g, words) as usize;
                states[cur].set_word(i, word(g, arch));
            }
            steps.push(Step {
                thread: TIDS[cur],
                opcode: opcode(g),
                regs: before,
                mem: mem(g, arch),
            });
        }
        let breaks = (0..below(g, 3))
            .map(|_| below(g, n as u64) as usize)
            .collect();
        Steps {
            arch,
            opts,
            steps,
            breaks,
        }
    }
}

fn record(s: &Steps) -> Vec<u8> {
    let header = Header::new(s.arch, "x");
    let mut rec = Recorder::new(Writer::new(Vec::new(), &header).unwrap(), s.opts);
    for (i, step) in s.steps.iter().enumerate() {
        if i > 0 && s.breaks.contains(&i) {
            rec.new_session().unwrap();
        }
        rec.step(step.clone()).unwrap();
    }
    rec.finish().unwrap()
}

#[test]
fn recorded_states_replay_exactly() {
    fn prop(s: Steps) -> TestResult {
        let bytes = record(&s);
        let trace = Trace::parse(&bytes).unwrap();
        let (got, err) = replay_all(&trace);
        if let Some(e) = err {
            return TestResult::error(format!("{e} ({:?})", s.opts));
        }
        if got.len() != s.steps.len() {
            return TestResult::error(format!("{} of {} instructions", got.len(), s.steps.len()));
        }
        for (g, w) in got.iter().zip(&s.steps) {
            if (g.thread, &g.opcode, &g.regs, &g.mem) != (w.thread, &w.opcode, &w.regs, &w.mem) {
                return TestResult::error(format!(
                    "instruction {} differs (legacy {}): thread {:#x} vs {:#x}",
                    g.index, s.opts.legacy_thread_ids, g.thread, w.thread
                ));
            }
        }
        // The streaming reader agrees, and random access matches the replay.
        if stream_records(&bytes, 61) != slice_records(&bytes) {
            return TestResult::error("streaming reader differs");
        }
        let index = trace.build_index().unwrap();
        for d in got.iter().step_by(7) {
            let (_, r) = trace.seek(&index, d.index).unwrap();
            if r.regs() != &d.regs {
                return TestResult::error(format!("seek {} differs", d.index));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(400)
        .quickcheck(prop as fn(Steps) -> TestResult);
}

/// The pc cursor sees the reference replay's instructions, pcs and accesses; an index saved
/// as bytes reads back equal, and a pc cursor from a seek goes on with the replay's pcs.
#[test]
fn scans_follow_the_replay() {
    fn prop(s: Steps, lo: u16, len: u8) -> TestResult {
        let bytes = record(&s);
        let trace = Trace::parse(&bytes).unwrap();
        let (got, _) = replay_all(&trace);
        let mut scan = trace.cursor::<Pc>();
        // A range near the generated addresses (small values are common) or anywhere.
        let lo = u64::from(lo);
        let hi = lo + 1 + u64::from(len);
        let w = s.arch.word_size() as u64;
        for d in &got {
            let ins = scan.next_instruction().unwrap().unwrap();
            let want = d
                .mem
                .iter()
                .any(|m| m.address < hi && lo < m.address.saturating_add(w));
            let addrs: Vec<u64> = ins.mem_addresses().collect();
            let want_addrs: Vec<u64> = d.mem.iter().map(|m| m.address).collect();
            if ins.index() != d.index
                || scan.regs().ip() != d.regs.ip()
                || ins.touches(lo, hi) != want
                || addrs != want_addrs
            {
                return TestResult::error(format!("instruction {} differs", d.index));
            }
        }
        if scan.next_instruction().is_some() {
            return TestResult::error("the scan goes on past the replay");
        }
        // A loop over the pc cursor stops at exactly the instructions that touch the range,
        // and at those of one pc, with the replay's pcs.
        let pc = got
            .get(usize::from(len) % got.len().max(1))
            .map(|d| d.regs.ip());
        for (pc, lo, hi) in [(None, lo, hi), (pc, 1, 0), (pc, lo, hi)] {
            let want: Vec<(u64, u64)> = got
                .iter()
                .filter(|d| {
                    Some(d.regs.ip()) == pc
                        || (lo < hi
                            && d.mem
                                .iter()
                                .any(|m| m.address < hi && lo < m.address.saturating_add(w)))
                })
                .map(|d| (d.index, d.regs.ip()))
                .collect();
            let mut scan = trace.cursor::<Pc>();
            let mut found = Vec::new();
            while let Some(ins) = next_match(&mut scan, pc, lo, hi) {
                found.push((ins.index(), scan.regs().ip()));
            }
            if found != want || scan.instructions() != got.len() as u64 {
                return TestResult::error(format!("next_match({pc:?}, {lo}, {hi}) differs"));
            }
        }
        let index = trace.build_index().unwrap();
        if index.instructions() != got.len() as u64 {
            return TestResult::error("the index counts other instructions");
        }
        let saved = Index::from_bytes(&index.to_bytes());
        if saved.as_ref() != Some(&index) {
            return TestResult::error("the saved index differs");
        }
        for d in got.iter().step_by(5) {
            let (_, replay) = trace.seek(&index, d.index).unwrap();
            let mut scan = replay.into_mode::<Pc>();
            if scan.regs().ip() != d.regs.ip() {
                return TestResult::error(format!("seek to {} differs", d.index));
            }
            if let Some(next) = got.get(d.index as usize + 1) {
                let ins = scan.next_instruction().unwrap().unwrap();
                if ins.index() != next.index || scan.regs().ip() != next.regs.ip() {
                    return TestResult::error(format!("the pc cursor after {} differs", d.index));
                }
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Steps, u16, u8) -> TestResult);
}

/// The [`General`] cursor, begun at the start or after any instruction of the full one,
/// gives the reference replay's instructions, and before each the same general
/// registers, pc and flags (the first `general_words` words), with a change reported for
/// each of them that changed; it ends where the reference ends, also on a cut trace.
#[test]
fn general_cursor_follows_the_replay() {
    fn prop(s: Steps, from: u16, cut: u16) -> TestResult {
        let mut bytes = record(&s);
        bytes.truncate(bytes.len().saturating_sub(usize::from(cut % 4 * 3)));
        let trace = Trace::parse(&bytes).unwrap();
        let n = trac_x64dbg::general_words(s.arch);
        let (got, err) = replay_all(&trace);
        let from = usize::from(from) % (got.len() + 1);
        let mut full = trace.replay();
        for _ in 0..from {
            full.next_instruction().unwrap().unwrap();
        }
        let mut lean = full.into_mode::<General>();
        let mut before: Option<Vec<u64>> = None;
        for d in got.iter().skip(from) {
            let mut changed = 0u64;
            let ins = lean
                .next_instruction_with(|c| changed |= 1 << c.index)
                .unwrap()
                .unwrap();
            if ins.index() != d.index || lean.regs().words()[..n] != d.regs.words()[..n] {
                return TestResult::error(format!("instruction {} differs", d.index));
            }
            // Every word that differs from the instruction before has its bit set.
            let now = &d.regs.words()[..n];
            if let Some(before) = &before
                && let Some(k) = (0..n).find(|&k| now[k] != before[k] && changed & (1 << k) == 0)
            {
                return TestResult::error(format!("word {k} of {} not marked", d.index));
            }
            before = Some(now.to_vec());
        }
        match (lean.next_instruction(), err) {
            (None, None) | (Some(Err(_)), Some(_)) => TestResult::passed(),
            _ => TestResult::error("the general cursor ends elsewhere"),
        }
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Steps, u16, u16) -> TestResult);
}

/// The full cursor that marks the changes it reports gives the reference replay's
/// instructions and states, and between two looks the marks cover every word whose value
/// changed (the marks are cleared at random instructions).
#[test]
fn reported_changes_mark_every_change() {
    fn prop(s: Steps, clear: Vec<bool>) -> TestResult {
        let bytes = record(&s);
        let trace = Trace::parse(&bytes).unwrap();
        let (got, _) = replay_all(&trace);
        let mut marking = trace.replay();
        let mut marks = [0u64; 4];
        let mut looked: Option<Vec<u64>> = None;
        for (k, d) in got.iter().enumerate() {
            let ins = marking
                .next_instruction_with(|c| marks[usize::from(c.index) / 64] |= 1 << (c.index % 64))
                .unwrap()
                .unwrap();
            let regs = marking.regs();
            if ins.index() != d.index || regs != &d.regs {
                return TestResult::error(format!("instruction {} differs", d.index));
            }
            let now = regs.words().to_vec();
            if let Some(before) = &looked {
                let missed = (0..now.len())
                    .find(|&w| now[w] != before[w] && marks[w / 64] & (1 << (w % 64)) == 0);
                if let Some(w) = missed {
                    return TestResult::error(format!("word {w} of {} not marked", d.index));
                }
            }
            if clear.get(k % clear.len().max(1)).copied().unwrap_or(true) {
                marks = [0; 4];
                looked = Some(now);
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(200)
        .quickcheck(prop as fn(Steps, Vec<bool>) -> TestResult);
}

/// [`Blocks::pass_equal`] against a copy changed at random places passes the blocks the
/// replay reads, up to the first change: exactly the blocks that end by it when the flag
/// decides the thread-id bytes, else possibly fewer (a thread-id decision that would look
/// past the change stops it); it reports the threads of the instructions passed as they
/// switch, and the blocks after it read as the replay reads them.
#[test]
fn pass_equal_passes_the_blocks_before_a_change() {
    fn prop(mut s: Steps, mut cuts: Vec<(u16, u8)>, flag_mode: bool) -> TestResult {
        // The flag read alone misreads legacy files: none in that mode.
        if flag_mode {
            s.opts.legacy_thread_ids = false;
        }
        let exact = flag_mode;
        cuts.sort_unstable();
        let bytes = record(&s);
        let options = ReadOptions {
            thread_ids: if flag_mode {
                ThreadIdMode::Flag
            } else {
                ThreadIdMode::Recover
            },
        };
        let trace = Trace::with_options(&bytes, options).unwrap();
        // Every block's end and thread (`None`: a user block), as the replay reads them.
        let mut ends = Vec::new();
        let mut replay = trace.replay();
        while let Some(b) = replay.next_block() {
            let b = b.unwrap();
            let thread = match b {
                Block::Instruction(i) => Some(i.thread()),
                Block::User(_) => None,
            };
            ends.push((b.offset().0 as usize + b.len(), thread));
        }
        let first = trace.first_block_offset().0 as usize;
        let span = bytes.len() - first + 1;
        let mut walk = trace.blocks();
        let (mut k, mut instructions) = (0usize, 0u64);
        let mut copy = bytes.clone();
        // The last cut runs against an equal copy, to the end.
        cuts.push((u16::MAX, 1));
        for (j, &(c, x)) in cuts.iter().enumerate() {
            let last = j + 1 == cuts.len();
            let change = (first + usize::from(c) * span / 0x1_0000).min(bytes.len());
            // A byte changed, or the copy cut short there.
            let (equal_to, len) = if last {
                (bytes.len(), bytes.len())
            } else if x % 4 == 0 || change == bytes.len() {
                (change, change)
            } else {
                copy[change] ^= x | 1;
                (change, bytes.len())
            };
            let other = &copy[..len];
            let at = walk.offset().0 as usize;
            let mut threads = Vec::new();
            let got = walk.pass_equal(&other[at.min(other.len())..], |t| threads.push(t));
            let to = walk.offset().0 as usize;
            // The blocks passed, and the ones that end by the change.
            let start = |k: usize| k.checked_sub(1).map_or(first, |p| ends[p].0);
            let mut fit = k;
            while fit < ends.len() && ends[fit].0 <= equal_to {
                fit += 1;
            }
            let Some(passed) = (k..=fit).find(|&m| start(m) == to) else {
                return TestResult::error(format!("cut {j}: stopped at {to}, not a block end"));
            };
            if exact && passed != fit {
                return TestResult::error(format!("cut {j}: stopped at {to}, not {}", start(fit)));
            }
            let mut want_threads: Vec<u32> = Vec::new();
            for &(_, t) in &ends[k..passed] {
                if let Some(t) = t
                    && want_threads.last() != Some(&t)
                {
                    want_threads.push(t);
                }
            }
            let n = ends[k..passed].iter().filter(|e| e.1.is_some()).count() as u64;
            if got != n || threads != want_threads {
                return TestResult::error(format!(
                    "cut {j}: {got} instructions, threads {threads:?}, not {n}, {want_threads:?}"
                ));
            }
            instructions += n;
            if walk.instructions() != instructions {
                return TestResult::error(format!("cut {j}: count {}", walk.instructions()));
            }
            k = passed;
            copy[..].copy_from_slice(&bytes);
        }
        // The rest reads as the replay reads it.
        for (m, b) in walk.by_ref().enumerate() {
            let b = b.unwrap();
            let thread = match b {
                Block::Instruction(i) => Some(i.thread()),
                Block::User(_) => None,
            };
            if ends.get(k + m) != Some(&(b.offset().0 as usize + b.len(), thread)) {
                return TestResult::error(format!("block {} after the passes differs", k + m));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Steps, Vec<(u16, u8)>, bool) -> TestResult);
}

/// The generator's x86 blocks that change only eip and touch no memory are shorter than
/// a word of positions: the scan still finds the pc in them.
#[test]
fn scan_reads_the_pc_of_tiny_blocks() {
    for (arch, seed) in [(Arch::X86, 0), (Arch::X86, 5), (Arch::X64, 0)] {
        let opts = trac_x64dbg::testgen::Options {
            arch,
            threads: 1,
            max_run: 1,
            seed,
        };
        let data = trac_x64dbg::testgen::trace(opts, 600, RecorderOptions::default(), "t.exe");
        let trace = Trace::parse(&data).unwrap();
        let (got, err) = replay_all(&trace);
        assert!(err.is_none());
        let mut scan = trace.cursor::<Pc>();
        let mut tiny = 0;
        for d in &got {
            let ins = scan.next_instruction().unwrap().unwrap();
            tiny += usize::from(ins.bytes().len() < 16);
            assert_eq!(
                scan.regs().ip(),
                d.regs.ip(),
                "{arch:?} seed {seed}: instruction {}",
                d.index
            );
        }
        assert!(arch == Arch::X64 || tiny > 0, "no tiny block to test");
    }
}

/// The index pass finds the full dumps the block iterator finds, and counts alike.
#[test]
fn index_finds_every_full_dump() {
    fn prop(s: Steps) -> bool {
        let bytes = record(&s);
        let trace = Trace::parse(&bytes).unwrap();
        let mut dumps = Vec::new();
        let mut blocks = 0u64;
        for b in trace.blocks() {
            blocks += 1;
            if let Ok(trac_x64dbg::Block::Instruction(i)) = b
                && i.is_full_dump()
            {
                dumps.push((i.index(), i.offset()));
            }
        }
        let index = trace.build_index().unwrap();
        index.full_dump_positions().collect::<Vec<_>>() == dumps && index.blocks() == blocks
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Steps) -> bool);
}

/// The index built a piece at a time equals the index of one pass, whatever the pieces
/// (cut files included); after each piece, the index `reaching` seeks to the last
/// instruction passed (and to the one before) with the replay's state.
#[test]
fn index_built_in_pieces_is_the_whole_index() {
    fn prop(s: Steps, pieces: Vec<u8>, cut: u16) -> TestResult {
        let mut bytes = record(&s);
        let first = Trace::parse(&bytes).unwrap().first_block_offset().0 as usize;
        if cut.is_multiple_of(3) {
            bytes.truncate(first + usize::from(cut) % (bytes.len() - first + 1));
        }
        let trace = Trace::parse(&bytes).unwrap();
        let (got, _) = replay_all(&trace);
        let whole = trace.index_builder().finish();
        let mut builder = trace.index_builder();
        let mut want = 0u64;
        for p in pieces.iter().chain(&[u8::MAX]) {
            want += u64::from(*p % 40);
            let passed = builder.build_until(want);
            if passed != want.min(whole.0.instructions()) {
                return TestResult::error(format!("{passed} passed, {want} wanted"));
            }
            let reaching = builder.reaching();
            for n in [passed.checked_sub(1), passed.checked_sub(2)]
                .into_iter()
                .flatten()
            {
                let (ins, r) = trace.seek(&reaching, n).unwrap();
                let d = &got[n as usize];
                if ins.index() != n || r.regs() != &d.regs {
                    return TestResult::error(format!("seek {n} after {passed} differs"));
                }
            }
        }
        builder.build_until(u64::MAX);
        let pieces = builder.finish();
        if pieces.0 != whole.0 || pieces.1.map(|e| e.to_string()) != whole.1.map(|e| e.to_string())
        {
            return TestResult::error("the pieces' index differs");
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(trace_core::rng::property_cases(300))
        .quickcheck(prop as fn(Steps, Vec<u8>, u16) -> TestResult);
}

/// Streams replay like slices on generated traces (every recorder option, legacy thread
/// ids, appended sessions), whatever the read sizes, and as far as a cut file goes.
#[test]
fn stream_replay_is_slice_replay() {
    fn prop(s: Steps, chunk: u8, cut: u16, by_block: bool) -> TestResult {
        let mut bytes = record(&s);
        let first = Trace::parse(&bytes).unwrap().first_block_offset().0 as usize;
        let whole = !cut.is_multiple_of(4);
        if !whole {
            bytes.truncate(first + usize::from(cut) % (bytes.len() - first + 1));
        }
        let opts = ReadOptions::default();
        let slice = slice_replay(&bytes, opts);
        if whole && (slice.2.is_some() || slice.0.len() != s.steps.len()) {
            return TestResult::error("the slice replay lost instructions");
        }
        for c in [usize::from(chunk) + 1, 4096] {
            let stream = stream_replay(&bytes, c, opts, by_block);
            if stream != slice {
                return TestResult::error(format!(
                    "{c}-byte reads: counters {:?} vs {:?}, error {:?} vs {:?}",
                    stream.1, slice.1, stream.2, slice.2
                ));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(400)
        .quickcheck(prop as fn(Steps, u8, u16, bool) -> TestResult);
}

/// The streaming reader decides every thread-id question as the slice reader does, whatever
/// the read sizes: its trial parses wait for data instead of taking the end of its buffer
/// for the end of the file. (Garbage read by a wrong trial reading once ended a stream
/// early with "block length above the limit".)
#[test]
fn streams_read_legacy_files_as_slices_do() {
    fn prop(mut s: Steps, chunk: u8) -> bool {
        s.opts.legacy_thread_ids = true;
        let bytes = record(&s);
        let slice = slice_records(&bytes);
        [usize::from(chunk) + 2, 61, 4096]
            .iter()
            .all(|&c| stream_records(&bytes, c) == slice)
    }
    QuickCheck::new()
        .tests(1500)
        .quickcheck(prop as fn(Steps, u8) -> bool);
}

#[test]
fn truncated_files_give_every_complete_block_then_an_error() {
    fn prop(s: Steps, cut: u16) -> TestResult {
        let bytes = record(&s);
        let first = Trace::parse(&bytes).unwrap().first_block_offset().0 as usize;
        let cut = first + usize::from(cut) % (bytes.len() - first + 1);
        let cut_is_reported = |all: &[(u64, Record)], err: &Option<String>| {
            err.is_some() || all.iter().any(|(o, _)| *o as usize == cut) || cut == bytes.len()
        };
        let complete = |all: &[(u64, Record)]| {
            all.iter()
                .filter(|(off, r)| {
                    let len = match r {
                        Record::User { payload, .. } => payload.len() + 5,
                        Record::Instruction(_) => 0,
                    };
                    (*off as usize) < cut && (len == 0 || *off as usize + len <= cut)
                })
                .count()
        };
        // Reading by the flag alone (a file of the fixed writer): every block that ends before
        // the cut is read exactly, then the block cut through is an error.
        if !s.opts.legacy_thread_ids {
            let flag = ReadOptions {
                thread_ids: ThreadIdMode::Flag,
            };
            let (all, err) = slice_records_with(&bytes, flag);
            assert!(err.is_none());
            let (part, err) = slice_records_with(&bytes[..cut], flag);
            let n = complete(&all);
            let exact = part.iter().zip(&all).all(|(a, b)| a == b)
                && (part.len() == n || part.len() + 1 == n);
            if !exact || !cut_is_reported(&all, &err) {
                return TestResult::failed();
            }
        }
        // Recovering pre-#3920 thread ids (the default), the reader chooses a reading by a
        // trial parse of the next 16 blocks, which a cut within them can change: exactly the
        // blocks whose whole lookahead lies before the cut are guaranteed to read the same.
        // The cut is reported unless one of the others was read the other way, which can
        // end right at the cut: a file cut there is then also a whole file, and no reader
        // can tell (about once in 5,000 cases here).
        let (all, err) = slice_records(&bytes);
        assert!(err.is_none());
        let (part, err) = slice_records(&bytes[..cut]);
        let settled = complete(&all).saturating_sub(17);
        let reread = part.iter().zip(&all).any(|(a, b)| a != b);
        TestResult::from_bool(
            part.len() >= settled
                && part.iter().zip(&all).take(settled).all(|(a, b)| a == b)
                && (cut_is_reported(&all, &err) || reread),
        )
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Steps, u16) -> TestResult);
}

#[test]
fn never_panics_on_arbitrary_bytes() {
    fn raw(data: Vec<u8>) -> bool {
        fuzz_read(&data);
        true
    }
    fn after_header(tail: Vec<u8>, x86: bool) -> bool {
        let arch = if x86 { Arch::X86 } else { Arch::X64 };
        let mut data = Header::new(arch, "p").to_bytes().unwrap();
        data.extend_from_slice(&tail);
        fuzz_read(&data);
        true
    }
    fn mutated(flips: Vec<(u16, u8)>) -> bool {
        let mut data = testdata("legacy-tid.trace32");
        data.truncate(3000);
        for (at, b) in flips {
            let i = usize::from(at) % data.len();
            data[i] ^= b;
        }
        fuzz_read(&data);
        true
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(raw as fn(Vec<u8>) -> bool);
    QuickCheck::new()
        .tests(1000)
        .quickcheck(after_header as fn(Vec<u8>, bool) -> bool);
    QuickCheck::new()
        .tests(300)
        .quickcheck(mutated as fn(Vec<(u16, u8)>) -> bool);
}

/// On long synthetic traces (runs of up to 300 instructions per thread, so that the lean
/// runs of usual blocks are long), the pc cursor finds the reference's pcs, and the index
/// pass counts what the replay counts and seeks where it does.
#[test]
fn lean_walks_agree_on_long_traces() {
    use trac_x64dbg::testgen::{self, Options};
    for (arch, seed) in [(Arch::X64, 1), (Arch::X86, 2), (Arch::X64, 3)] {
        let opts = Options {
            arch,
            threads: 3,
            max_run: 300,
            seed,
        };
        let bytes = testgen::trace(opts, 20_000, RecorderOptions::default(), "t.exe");
        let trace = Trace::parse(&bytes).unwrap();
        // A range around an address accessed half-way.
        let addr = trace
            .blocks()
            .filter_map(|b| match b.unwrap() {
                Block::Instruction(i) if i.index() >= 10_000 => i.mem_addresses().next(),
                _ => None,
            })
            .next()
            .unwrap();
        let (lo, hi) = (addr - 4, addr + 12);
        let (reference, _) = replay_all(&trace);
        let pcs: Vec<u64> = reference.iter().map(|d| d.regs.ip()).collect();
        let mut scan = trace.cursor::<Pc>();
        let plain: Vec<(u64, u64)> = reference
            .iter()
            .filter(|d| {
                let w = arch.word_size() as u64;
                d.mem.iter().any(|m| m.address < hi && lo < m.address + w)
            })
            .map(|d| (d.index, d.regs.ip()))
            .collect();
        let mut lean = Vec::new();
        while let Some(ins) = next_match(&mut scan, None, lo, hi) {
            lean.push((ins.index(), scan.regs().ip()));
        }
        assert_eq!(lean, plain);
        let pc = pcs[pcs.len() / 2];
        let want: Vec<u64> = (0..pcs.len() as u64)
            .filter(|&i| pcs[i as usize] == pc)
            .collect();
        let mut scan = trace.cursor::<Pc>();
        let mut lean = Vec::new();
        while let Some(ins) = next_match(&mut scan, Some(pc), 1, 0) {
            lean.push(ins.index());
        }
        assert_eq!(lean, want);
        assert_eq!(scan.instructions(), pcs.len() as u64);
        let index = trace.build_index().unwrap();
        assert_eq!(index.instructions(), pcs.len() as u64);
        assert!(index.full_dumps() >= 20_000 / 512);
        for i in (0..pcs.len() as u64).step_by(997) {
            let (_, replay) = trace.seek(&index, i).unwrap();
            assert_eq!(replay.regs().ip(), pcs[i as usize]);
        }
    }
}

/// A cursor in any mode of its layers.
enum AnyCursor<'a> {
    Pc(Cursor<'a, Pc>),
    General(Cursor<'a, General>),
    Full(Cursor<'a, Full>),
}

/// Every mode of the cursor, on random traces (cut or whole), with `next_block`,
/// `next_instruction_where` and `next_instruction_with` mixed at random and the mode
/// narrowed at random (full, then
/// general, then pc), gives the reference replay's instructions (the block iterator and
/// [`Instruction::apply`](trac_x64dbg::Instruction::apply)): the same numbers, offsets,
/// threads and bytes, before each the reference's state in the words the mode keeps, and
/// exactly the block's changes to those words reported. It ends where the reference ends,
/// having read every block, with the streaming reader's counters.
#[test]
fn cursor_modes_follow_the_reference() {
    type Seen = (u64, u64, u64, u32, Vec<u8>);
    fn seen(ins: &trac_x64dbg::Instruction<'_>) -> Seen {
        (
            ins.index(),
            ins.block(),
            ins.offset().0,
            ins.thread(),
            ins.bytes().to_vec(),
        )
    }
    fn prop(s: Steps, picks: Vec<u8>, cut: u16) -> TestResult {
        let mut bytes = record(&s);
        bytes.truncate(bytes.len().saturating_sub(usize::from(cut % 4 * 3)));
        let trace = Trace::parse(&bytes).unwrap();
        let general = trac_x64dbg::general_words(s.arch);
        let cip = general - 2;
        // The reference.
        let mut regs = RegDump::new(s.arch);
        let mut want = Vec::new();
        let mut blocks = 0u64;
        let mut want_end = None;
        for block in trace.blocks() {
            match block {
                Ok(Block::Instruction(ins)) => {
                    ins.apply(&mut regs);
                    want.push((seen(&ins), regs.clone(), ins.regs().collect::<Vec<_>>()));
                }
                Ok(Block::User(_)) => {}
                Err(e) => {
                    want_end = Some(e.to_string());
                    break;
                }
            }
            blocks += 1;
        }
        let first = picks.first().copied().unwrap_or(0);
        let mut cursor = match first % 3 {
            0 => AnyCursor::Full(trace.cursor()),
            1 => AnyCursor::General(trace.cursor()),
            _ => AnyCursor::Pc(trace.cursor()),
        };
        let mut k = 0usize;
        let end = loop {
            let pick = picks.get(k % picks.len().max(1)).copied().unwrap_or(0);
            k += 1;
            // Narrow the mode now and then.
            if pick % 13 == 0 {
                cursor = match cursor {
                    AnyCursor::Full(c) => AnyCursor::General(c.into_mode()),
                    AnyCursor::General(c) => AnyCursor::Pc(c.into_mode()),
                    pc => pc,
                };
            }
            let by_block = pick % 5 == 0;
            // Searching: the next instruction whose number is a multiple of `every`.
            let every = u64::from(pick % 7 == 1) * u64::from(pick % 4 + 1);
            let mut changes = Vec::new();
            macro_rules! step {
                ($c:expr) => {{
                    let next = if every > 0 {
                        $c.next_instruction_where(|ins, _| ins.index() % every == 0)
                    } else if by_block {
                        loop {
                            match $c.next_block() {
                                Some(Ok(Block::User(_))) => {}
                                Some(Ok(Block::Instruction(ins))) => break Some(Ok(ins)),
                                Some(Err(e)) => break Some(Err(e)),
                                None => break None,
                            }
                        }
                    } else {
                        $c.next_instruction_with(|c| changes.push(c))
                    };
                    next.map(|r| {
                        r.map(|ins| {
                            (
                                seen(&ins),
                                ins.regs().collect::<Vec<_>>(),
                                $c.regs().clone(),
                            )
                        })
                    })
                }};
            }
            let (next, keep) = match &mut cursor {
                AnyCursor::Full(c) => (step!(c), usize::MAX),
                AnyCursor::General(c) => (step!(c), general),
                AnyCursor::Pc(c) => (step!(c), 0),
            };
            let (got, block_changes, got_regs) = match next {
                None => break None,
                Some(Err(e)) => break Some(e.to_string()),
                Some(Ok(x)) => x,
            };
            let Some((want_seen, want_regs, want_changes)) = want.get(got.0 as usize) else {
                return TestResult::error("an instruction past the reference's");
            };
            if got != *want_seen || block_changes != *want_changes {
                return TestResult::error(format!("instruction {} differs", got.0));
            }
            let kept = |i: usize| if keep == 0 { i == cip } else { i < keep };
            let words = got_regs.words().len();
            if let Some(w) =
                (0..words).find(|&w| kept(w) && got_regs.words()[w] != want_regs.words()[w])
            {
                return TestResult::error(format!("word {w} before {} differs", got.0));
            }
            let reported: Vec<RegChange> = want_changes
                .iter()
                .copied()
                .filter(|c| kept(usize::from(c.index)))
                .collect();
            if every > 0 && got.0 % every != 0 {
                return TestResult::error(format!("the search stopped at {}", got.0));
            }
            if !by_block && every == 0 && changes != reported {
                return TestResult::error(format!("the changes reported at {} differ", got.0));
            }
        };
        if end != want_end {
            return TestResult::error(format!("the cursor ends with {end:?}, want {want_end:?}"));
        }
        let (counters, blocks_read) = match &cursor {
            AnyCursor::Full(c) => (c.counters(), c.blocks_read()),
            AnyCursor::General(c) => (c.counters(), c.blocks_read()),
            AnyCursor::Pc(c) => (c.counters(), c.blocks_read()),
        };
        let mut stream = StreamReader::from_reader(&bytes[..]).unwrap();
        while let Some(Ok(_)) = stream.next_block_with_regs() {}
        if counters != stream.counters() || blocks_read != blocks {
            return TestResult::error("the counters differ");
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(trace_core::rng::property_cases(300))
        .quickcheck(prop as fn(Steps, Vec<u8>, u16) -> TestResult);
}
