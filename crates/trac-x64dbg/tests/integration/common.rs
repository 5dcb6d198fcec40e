//! Helpers shared by the test modules.
#![allow(dead_code)]

use std::path::PathBuf;

use trac_x64dbg::{Block, Error, ReadOptions, Record, RegDump, StreamReader, Trace};

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

/// Replays the whole trace: every instruction with its state, then the error if any.
pub fn replay_all(trace: &Trace<'_>) -> (Vec<Decoded>, Option<Error>) {
    let mut out = Vec::new();
    let mut r = trace.replay();
    while let Some(ins) = r.next_instruction() {
        match ins {
            Ok(ins) => out.push(Decoded {
                index: ins.index(),
                thread: ins.thread(),
                opcode: ins.opcode().to_vec(),
                regs: r.regs().clone(),
                mem: ins.mem().collect(),
            }),
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

/// The same from the streaming reader, reading through `chunk`-byte reads.
pub fn stream_records(data: &[u8], chunk: usize) -> (Vec<(u64, Record)>, Option<String>) {
    struct Chunked<'a>(&'a [u8], usize);
    impl std::io::Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut r = match StreamReader::new(Chunked(data, chunk.max(1))) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let mut out = Vec::new();
    while let Some(b) = r.next_block() {
        match b {
            Ok(b) => out.push((b.offset().0, b.to_record())),
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
