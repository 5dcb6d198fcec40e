//! The streaming reader gives the same frames as the slice reader, in bounded memory.

use gdb_tfile::{Block, ReadOptions, StreamReader, TraceFile, testgen, write};

/// A reader that returns at most 7 bytes per call, to exercise partial reads.
struct Trickle<'a>(&'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(7).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn owned(b: Block<'_>) -> gdb_tfile::BlockData {
    b.to_owned_block()
}

#[test]
fn stream_matches_slice_reader() {
    let bytes = write::to_bytes(&testgen::amd64_file(50, 9), gdb_tfile::Endian::Little).unwrap();
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let mut s = StreamReader::from_reader(Trickle(&bytes), ReadOptions::default()).unwrap();
    assert_eq!(s.description(), file.description());
    assert_eq!(s.tdesc(), file.tdesc());
    for f in file.frames() {
        let f = f.unwrap();
        let g = s.next_frame().unwrap().unwrap();
        assert_eq!(
            (g.index, g.offset, g.tracepoint),
            (f.index, f.offset, f.tracepoint)
        );
        let a: Vec<_> = f.blocks().map(|b| owned(b.unwrap())).collect();
        let b: Vec<_> = g.blocks().map(|b| owned(b.unwrap())).collect();
        assert_eq!(a, b);
    }
    assert!(s.next_frame().unwrap().is_none());
    assert!(s.next_frame().unwrap().is_none());
}

#[test]
fn stream_truncated_yields_complete_frames_then_error() {
    let bytes = write::to_bytes(&testgen::amd64_file(5, 9), gdb_tfile::Endian::Little).unwrap();
    let cut = &bytes[..bytes.len() - 10];
    let mut s = StreamReader::from_reader(cut, ReadOptions::default()).unwrap();
    for _ in 0..4 {
        assert!(s.next_frame().unwrap().is_some());
    }
    let e = s.next_frame().unwrap_err();
    assert!(e.to_string().contains("trace frame 4 is truncated"), "{e}");
    assert!(s.next_frame().unwrap().is_none(), "fused after the error");
}
