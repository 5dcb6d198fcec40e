//! The 3-thread sync fixture merged, checked against the order worked out by hand.

use amber_tt6::threads::{ThreadTrace, merge, parse_thread_file_name, thread_files};
use amber_tt6::{Dialect, SyncKind};
use trace_core::ThreadId;

use super::testdata;

#[test]
fn three_threads_merge_by_sync_records() {
    let files = thread_files(&testdata("threads")).unwrap();
    assert_eq!(files.len(), 3);
    let data: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(&f.path).unwrap())
        .collect();
    let traces: Vec<ThreadTrace<'_>> = files
        .iter()
        .zip(&data)
        .map(|(f, d)| ThreadTrace {
            thread: f.thread,
            data: d,
            dialect: f.dialect,
        })
        .collect();
    let mut m = merge(&traces).unwrap();
    let order: Vec<(u64, u64)> = m
        .by_ref()
        .map(|r| {
            let r = r.unwrap();
            (r.thread.0, r.record.index)
        })
        .collect();
    // By hand: T1 runs records 0-3 (lock M at 0, unlock M → 1 at 2), blocks at 4 (waits for
    // C count 1). T2 runs 0 (lock M observed 1: ok), 1 (unlock → 2), 2 (broadcast C → 1), 3.
    // T3 is next in thread order after T2: 0 (trylock observed 2: ok), 1 (unlock → 3),
    // blocks at 2 (waits 0x80003000 count 5). T1 resumes: 4, 5. Only T3 is left, blocked:
    // released as unmatched, 2, 3.
    let expected = [
        (1, 0),
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 0),
        (2, 1),
        (2, 2),
        (2, 3),
        (3, 0),
        (3, 1),
        (1, 4),
        (1, 5),
        (3, 2),
        (3, 3),
    ];
    assert_eq!(order, expected);
    let un = m.unmatched();
    assert_eq!(un.len(), 1);
    assert_eq!(
        (un[0].thread, un[0].record, un[0].address, un[0].count),
        (ThreadId(3), 2, 0x8000_3000, 5)
    );
}

#[test]
fn merged_timeline_respects_every_wait() {
    // Property of the output rather than a fixed order: every satisfied wait comes after a
    // signal of at least its count.
    let files = thread_files(&testdata("threads")).unwrap();
    let data: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(&f.path).unwrap())
        .collect();
    let traces: Vec<_> = files
        .iter()
        .zip(&data)
        .map(|(f, d)| ThreadTrace {
            thread: f.thread,
            data: d,
            dialect: f.dialect,
        })
        .collect();
    let mut m = merge(&traces).unwrap();
    let mut max = std::collections::HashMap::new();
    let mut waits_ok = 0;
    let mut last_index = std::collections::HashMap::new();
    for r in m.by_ref() {
        let r = r.unwrap();
        // Each thread's own order.
        let prev = last_index.insert(r.thread, r.record.index);
        assert!(prev.is_none_or(|p| p + 1 == r.record.index));
        for e in r.record.sync_events() {
            match e.kind {
                SyncKind::Signal | SyncKind::Broadcast => {
                    let c = max.entry(e.address).or_insert(0);
                    *c = (*c).max(e.count);
                }
                SyncKind::Wait | SyncKind::TryWait => {
                    if e.count == 0 || max.get(&e.address).is_some_and(|&c| c >= e.count) {
                        waits_ok += 1;
                    }
                }
            }
        }
    }
    assert_eq!(waits_ok, 4);
    assert_eq!(m.unmatched().len(), 1);
}

#[test]
fn thread_file_names() {
    assert_eq!(
        parse_thread_file_name("thread_001.tt6"),
        Some((ThreadId(1), Dialect::Tt6))
    );
    assert_eq!(
        parse_thread_file_name("THREAD_012.TT6E"),
        Some((ThreadId(12), Dialect::Tt6e))
    );
    assert_eq!(parse_thread_file_name("thread_.tt6"), None);
    assert_eq!(parse_thread_file_name("thread_1x.tt6"), None);
    assert_eq!(parse_thread_file_name("thread_001.tt6.oracle"), None);
}

#[test]
fn merge_files_takes_names_and_bytes_in_any_order() {
    use amber_tt6::Error;
    use amber_tt6::threads::merge_files;
    // The directory's files, given in reverse order and with a directory part: the thread
    // numbers come from the names and the merge is the same as by thread number.
    let files = thread_files(&testdata("threads")).unwrap();
    let data: Vec<(String, Vec<u8>)> = files
        .iter()
        .rev()
        .map(|f| {
            (
                f.path.to_string_lossy().into_owned(),
                std::fs::read(&f.path).unwrap(),
            )
        })
        .collect();
    let named: Vec<(&str, &[u8])> = data.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
    let mut m = merge_files(&named).unwrap();
    let timeline: Vec<(u64, u64, u64)> = m
        .by_ref()
        .map(|r| {
            let r = r.unwrap();
            (r.seq, r.thread.0, r.record.index)
        })
        .collect();
    assert_eq!(timeline.len(), 14);
    assert!(timeline.iter().enumerate().all(|(i, t)| t.0 == i as u64));
    assert_eq!(&timeline[8..11], &[(8, 3, 0), (9, 3, 1), (10, 1, 4)]);
    assert!(m.failed_thread().is_none());
    let un = m.into_unmatched();
    assert_eq!(
        un.iter()
            .map(|w| (w.thread, w.record, w.address, w.count))
            .collect::<Vec<_>>(),
        [(ThreadId(3), 2, 0x8000_3000, 5)]
    );

    // Names that say nothing about the thread, and the same thread twice, are errors.
    let one = &data[0].1[..];
    let e = merge_files(&[("trace.tt6", one)]).unwrap_err();
    assert!(matches!(e, Error::ThreadFile { .. }), "{e}");
    assert_eq!(e.offset(), None);
    let e = merge_files(&[("thread_1.tt6", one), ("thread_001.tt6e", one)]).unwrap_err();
    assert!(e.to_string().contains("same thread number"), "{e}");
}

#[test]
fn a_thread_error_names_its_thread() {
    use amber_tt6::threads::merge_files;
    let files = thread_files(&testdata("threads")).unwrap();
    let good = std::fs::read(&files[0].path).unwrap();
    // Thread 7: its initial PC, then half an instruction word.
    let bad = [0u8, 0, 0x10, 0, 0x38, 0x60];
    let mut m =
        merge_files(&[("thread_001.tt6", &good[..]), ("thread_007.tt6", &bad[..])]).unwrap();
    let err = m.find_map(Result::err).unwrap();
    assert_eq!(m.failed_thread(), Some(ThreadId(7)));
    assert_eq!(err.offset(), Some(trace_core::Offset(4)));
}
