//! The streaming reader, seeking and parallel decoding.

use std::io::Read;

use dcfg_trace::read::{Event, ReadOptions, Reader, StreamReader, Trace};

use crate::testdata;

/// Reads one byte at a time, to exercise the streaming reader's buffer boundaries.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn events<'a, S: trace_core::json::Source<'a>>(r: Reader<'a, S>) -> Vec<String> {
    r.map(|ev| match ev {
        Ok(Event::Process(p)) => format!("process {} {}", p.pid, p.table.rows().len()),
        Ok(Event::Thread {
            pid,
            thread,
            offset,
        }) => format!("thread {pid} {thread} {offset}"),
        Ok(Event::Chunk(c)) => format!(
            "chunk {} {} {} {} {:?} {:?} {}",
            c.index,
            c.preceding_instr_count,
            c.instr_count,
            c.edge_count,
            c.first_edge_id,
            c.decode().map_err(|e| e.to_string()),
            c.offset.0
        ),
        Ok(_) => "other".into(),
        Err(e) => e.to_string(),
    })
    .collect()
}

#[test]
fn stream_and_slice_readers_agree() {
    for name in [
        "basic",
        "multi",
        "compressed",
        "spec",
        "tolerant",
        "bomb",
        "err-truncated",
        "err-cycle",
        "err-float",
    ] {
        let bytes = testdata(&format!("{name}.trace.json"));
        let a = events(Reader::from_slice(&bytes, ReadOptions::default()));
        for step in [1, 7, 4096] {
            let b = events(StreamReader::from_reader(
                Trickle(&bytes, step),
                ReadOptions::default(),
            ));
            assert_eq!(a, b, "{name} {step}");
        }
    }
}

#[test]
fn seek_finds_the_chunk_without_decoding_others() {
    let bytes = testdata("basic.trace.json");
    let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
    let th = &t.processes[0].threads[0];
    assert!(th.chunks.len() > 5);
    let total: u64 = th.chunks.iter().map(|c| c.instr_count).sum();
    for icount in (0..total).step_by(7) {
        let i = th.seek(icount).unwrap();
        let c = &th.chunks[i];
        assert!(
            c.preceding_instr_count <= icount && icount < c.preceding_instr_count + c.instr_count
        );
    }
    assert_eq!(th.seek(total), None);
    // A chunk that does not decode elsewhere does not matter: corrupt chunk 0's sequence
    // and seek to the last one.
    let mut model = dcfg_trace::write::TraceFile::from_trace(&t);
    model.processes[0].threads[0].chunks[0].sequence.push('/');
    let broken = model.to_vec();
    let t = Trace::parse(&broken, ReadOptions::default()).unwrap();
    let th = &t.processes[0].threads[0];
    assert!(th.chunks[0].decode().is_err());
    let last = th.seek(total - 1).unwrap();
    assert_eq!(last, th.chunks.len() - 1);
    assert!(th.chunks[last].decode().is_ok());
}

#[test]
fn parallel_decoding_keeps_order() {
    let cfg = dcfg_trace::synth::Cfg::new(500, 11);
    let file = cfg.trace(200_000, u64::MAX, 5_000, 5).to_vec();
    let t = Trace::parse(&file, ReadOptions::default()).unwrap();
    let th = &t.processes[0].threads[0];
    assert!(th.chunks.len() > 20);
    let seq: Vec<Vec<u64>> = th.chunks.iter().map(|c| c.decode().unwrap()).collect();
    for workers in [1, 2, 3, 8] {
        let par: Vec<Vec<u64>> = th
            .decode_parallel(workers)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(par, seq, "{workers}");
    }
    assert_eq!(seq.concat().len(), 200_000);
    assert!(th.chain_gaps().is_empty());
}

#[test]
fn batches_bound_memory() {
    let bytes = testdata("bomb.trace.json");
    let t = Trace::parse(&bytes, ReadOptions::default()).unwrap();
    let c = &t.processes[0].threads[0].chunks[0];
    let mut buf = Vec::new();
    let mut sizes = Vec::new();
    c.for_each_batch(2, |b| sizes.push(b.len()), &mut buf)
        .unwrap();
    assert_eq!(sizes.iter().sum::<usize>(), 6);
    assert!(sizes.iter().all(|&s| s <= 2));
}

/// `for_each_edge` hands out the edges `decode` gives, in order, with the same error after
/// the same edges on damaged chunks (every fixture that parses, and a synthetic trace);
/// an `emit` that refuses stops it right after that edge, or after the rest of a group.
#[test]
fn for_each_edge_matches_decode() {
    let mut files: Vec<Vec<u8>> = std::fs::read_dir(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dcfg-trace"),
    )
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.to_string_lossy().ends_with(".trace.json"))
    .map(|p| std::fs::read(p).unwrap())
    .collect();
    files.push(
        dcfg_trace::synth::Cfg::new(300, 3)
            .trace(50_000, u64::MAX, 3_000, 2)
            .to_vec(),
    );
    let mut chunks_seen = 0;
    for bytes in &files {
        let Ok(t) = Trace::parse(bytes, ReadOptions::default()) else {
            continue;
        };
        for c in t
            .processes
            .iter()
            .flat_map(|p| &p.threads)
            .flat_map(|t| &t.chunks)
        {
            chunks_seen += 1;
            let mut want = Vec::new();
            let want_err = c.for_each_batch(7, |b| want.extend_from_slice(b), &mut Vec::new());
            let mut got = Vec::new();
            let got_err = c.for_each_edge(|e| {
                got.push(e);
                true
            });
            assert_eq!(got, want);
            assert_eq!(
                got_err.map_err(|e| e.to_string()),
                want_err.map_err(|e| e.to_string())
            );
            for stop in [1, 2, 5] {
                let mut some = Vec::new();
                let _ = c.for_each_edge(|e| {
                    some.push(e);
                    some.len() < stop
                });
                assert!(want.starts_with(&some));
                assert!(some.len() >= stop.min(want.len()));
            }
        }
    }
    assert!(chunks_seen > 20);
}
