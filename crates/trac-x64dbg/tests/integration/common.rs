//! Helpers shared by the test modules.
#![allow(dead_code)]

use std::path::PathBuf;

use trac_x64dbg::{
    Block, Counters, Error, Instruction, ReadOptions, Record, RegDump, StreamReader, Trace,
};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn testdata(name: &str) -> Vec<u8> {
    let p = root().join("testdata/x64dbg").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One decoded instruction with the state before it, for comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub index: u64,
    pub thread: u32,
    pub opcode: Vec<u8>,
    pub regs: RegDump,
    pub mem: Vec<trac_x64dbg::MemAccess>,
}

/// The reference replay of the whole trace: every instruction with its state, then the
/// error if any, from the block iterator and [`Instruction::apply`] alone (no cursor).
pub fn replay_all(trace: &Trace<'_>) -> (Vec<Decoded>, Option<Error>) {
    let mut out = Vec::new();
    let mut regs = RegDump::new(trace.arch());
    for block in trace.blocks() {
        match block {
            Ok(Block::Instruction(ins)) => {
                ins.apply(&mut regs);
                out.push(decoded(&ins, &regs));
            }
            Ok(Block::User(_)) => {}
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// Every block as (offset, record) from the slice iterator, then the error if any.
pub fn slice_records(data: &[u8]) -> (Vec<(u64, Record)>, Option<String>) {
    slice_records_with(data, ReadOptions::default())
}

/// [`slice_records`] with explicit read options.
pub fn slice_records_with(
    data: &[u8],
    options: ReadOptions,
) -> (Vec<(u64, Record)>, Option<String>) {
    let trace = match Trace::with_options(data, options) {
        Ok(t) => t,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let mut out = Vec::new();
    for b in trace.blocks() {
        match b {
            Ok(b) => out.push((b.offset().0, b.to_record())),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// A reader that hands out at most `.1` bytes per read.
pub struct Chunked<'a>(pub &'a [u8], pub usize);

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.max(1).min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// The same from the streaming reader, reading through `chunk`-byte reads.
pub fn stream_records(data: &[u8], chunk: usize) -> (Vec<(u64, Record)>, Option<String>) {
    let mut r = match StreamReader::from_reader(Chunked(data, chunk)) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let mut out = Vec::new();
    while let Some(b) = r.next_block_with_regs() {
        match b {
            Ok((b, _)) => out.push((b.offset().0, b.to_record())),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// Checks that `seek` to every instruction gives the replayed state.
pub fn check_seek_everywhere(trace: &Trace<'_>) {
    let (all, err) = replay_all(trace);
    assert!(err.is_none(), "{err:?}");
    let index = trace.build_index().unwrap();
    assert_eq!(index.instructions(), all.len() as u64);
    for d in &all {
        let (ins, replay) = trace.seek(&index, d.index).unwrap();
        assert_eq!(ins.index(), d.index);
        assert_eq!(ins.thread(), d.thread, "thread at {}", d.index);
        assert_eq!(replay.regs(), &d.regs, "state before {}", d.index);
    }
    assert!(trace.seek(&index, all.len() as u64).is_err());
}

pub fn is_instruction(b: &Block<'_>) -> bool {
    matches!(b, Block::Instruction(_))
}

/// A whole replay: every instruction with the state before it, the counters, the error.
pub type Replayed = (Vec<Decoded>, Counters, Option<String>);

fn decoded(ins: &Instruction<'_>, regs: &RegDump) -> Decoded {
    Decoded {
        index: ins.index(),
        thread: ins.thread(),
        opcode: ins.opcode().to_vec(),
        regs: regs.clone(),
        mem: ins.mem().collect(),
    }
}

/// The slice replay of `data`, through the cursor.
pub fn slice_replay(data: &[u8], options: ReadOptions) -> Replayed {
    let trace = match Trace::with_options(data, options) {
        Ok(t) => t,
        Err(e) => return (Vec::new(), Counters::default(), Some(e.to_string())),
    };
    let mut r = trace.replay();
    let mut out = Vec::new();
    let mut err = None;
    while let Some(step) = r.next_instruction() {
        match step {
            Ok(ins) => out.push(decoded(&ins, r.regs())),
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
    }
    (out, r.counters(), err)
}

/// The streaming replay of `data` through `chunk`-byte reads; `by_block` walks it with
/// `next_block_with_regs` (else `next_instruction_with_regs`).
pub fn stream_replay(data: &[u8], chunk: usize, options: ReadOptions, by_block: bool) -> Replayed {
    let mut r = match StreamReader::with_options(Chunked(data, chunk), options) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Counters::default(), Some(e.to_string())),
    };
    let mut out = Vec::new();
    let mut err = None;
    loop {
        let step = if by_block {
            match r.next_block_with_regs() {
                None => break,
                Some(Ok((Block::Instruction(ins), regs))) => Ok(decoded(&ins, regs)),
                Some(Ok((Block::User(_), _))) => continue,
                Some(Err(e)) => Err(e),
            }
        } else {
            match r.next_instruction_with_regs() {
                None => break,
                Some(step) => step.map(|(ins, regs)| decoded(&ins, regs)),
            }
        };
        match step {
            Ok(d) => out.push(d),
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
    }
    assert_eq!(r.instructions(), out.len() as u64);
    (out, r.counters(), err)
}
