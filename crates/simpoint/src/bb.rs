//! Basic-block vector files (`.bb`): SimPoint's frequency vectors, with LoopPoint's markers.
//!
//! Sources: `specs/notes/bbv-simpoint-notes.md`; SimPoint 3.2's reader (`FVParser`), read
//! for its behaviour.
//!
//! # The format
//!
//! One line per slice (interval) of the execution, and optionally a marker line between
//! slices:
//!
//! ```text
//! T:1:4200 :7:380 :12:1000
//! M: 0x401a2c 17
//! T:1:3900 :12:1100 :13:200
//! ```
//!
//! - `T:id:count :id:count …`: the first pair follows `T` directly, each further pair is
//!   preceded by a space. `id` is a basic-block number from 1 (SimPoint refuses 0; it reads
//!   ids as C `int`, so at most [`limits::MAX_ID`]); `count` is the number of instructions
//!   executed in that block during the slice (SimPoint reads it as a floating-point
//!   number). Blocks with count 0 are left out; tracekit writes ids ascending and integer
//!   counts.
//! - `M: 0x<pc> <count>`: the pc that starts the next slice and its execution count so far
//!   (counting that execution), as LoopPoint's profiles give region boundaries.
//! - SimPoint skips every line that does not start with `T`, so markers and comments do
//!   not disturb it. It reads lines of at most 1 MiB ([`limits::SIMPOINT_MAX_LINE`]).
//!
//! # The module
//!
//! - [`Writer`]: writes `T:` and `M:` lines to any `io::Write`, refusing what SimPoint
//!   could not read (id 0, unordered ids, an empty slice).
//! - [`Reader`]: a lazy, fused reader over any `io::BufRead` (a `&[u8]` too) giving
//!   [`Item`]s (borrowed, [`Reader::next_item`]) or [`Record`]s (owned, as an
//!   `Iterator`), with errors that give the line, column and offset ([`Error`]).
//!
//! ```
//! use simpoint::bb::{Entry, Marker, Reader, Record, Writer};
//!
//! let mut out = Vec::new();
//! let mut w = Writer::new(&mut out);
//! w.slice([(1, 4200), (7, 380), (9, 0)])?;
//! w.marker(0x401a2c, 17)?;
//! w.slice([(2, 5)])?;
//! w.finish()?;
//! assert_eq!(out, b"T:1:4200 :7:380\nM: 0x401a2c 17\nT:2:5\n");
//!
//! let records: Vec<Record> = Reader::new(&out[..]).collect::<Result<_, _>>()?;
//! assert_eq!(records[1], Record::Marker(Marker { pc: 0x401a2c, count: 17 }));
//! assert_eq!(records[2], Record::Slice(vec![Entry { id: 2, count: 5.0 }]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub mod limits;
mod read;
mod write;

pub use error::{Error, Problem, WriteError};
pub use read::{Entry, Item, Marker, Reader, Record};
pub use write::Writer;

/// Fuzzing entry point: reads `data` whole and through a tiny buffer (the two must agree,
/// item for item and on the error), then writes what was read back (when it is in
/// tracekit's canonical form: ids ascending, positive integer counts) and reads it again,
/// which must give the same items. Never panics (a mismatch is a `debug_assert`, which the
/// fuzzer reports).
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_read(data: &[u8]) {
    let whole: Vec<Result<Record, String>> = Reader::new(data)
        .map(|r| r.map_err(|e| e.to_string()))
        .collect();
    let pieces: Vec<Result<Record, String>> =
        Reader::new(std::io::BufReader::with_capacity(3, data))
            .map(|r| r.map_err(|e| e.to_string()))
            .collect();
    debug_assert!(whole == pieces, "whole and buffered reads disagree");
    let records: Vec<Record> = whole.into_iter().map_while(Result::ok).collect();
    let Some(bytes) = write_canonical(&records) else {
        return;
    };
    let again: Result<Vec<Record>, Error> = Reader::new(&bytes[..]).collect();
    debug_assert!(
        again.is_ok_and(|a| a == records),
        "write then read changed the items"
    );
}

/// `records` written, if every slice is in canonical form.
#[cfg(any(test, feature = "fuzzing"))]
fn write_canonical(records: &[Record]) -> Option<Vec<u8>> {
    let mut w = Writer::new(Vec::new());
    for record in records {
        match record {
            Record::Marker(m) => w.marker(m.pc, m.count).ok()?,
            Record::Slice(entries) => {
                let exact = |c: f64| (1.0..9.0e15).contains(&c) && c.fract() == 0.0;
                if !entries.iter().all(|e| exact(e.count)) {
                    return None;
                }
                // `exact` makes the conversion lossless.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                w.slice(entries.iter().map(|e| (e.id, e.count as u64)))
                    .ok()?;
            }
        }
    }
    w.finish().ok()
}

#[cfg(test)]
mod tests {
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    use super::*;

    fn read(text: &str) -> Result<Vec<Record>, Error> {
        Reader::new(text.as_bytes()).collect()
    }

    fn slice(pairs: &[(u32, f64)]) -> Record {
        Record::Slice(
            pairs
                .iter()
                .map(|&(id, count)| Entry { id, count })
                .collect(),
        )
    }

    fn error(text: &str) -> (u64, u64, u64, Problem, String) {
        let e = read(text).unwrap_err();
        (
            e.line(),
            e.column().unwrap(),
            e.offset(),
            e.problem().unwrap().clone(),
            e.to_string(),
        )
    }

    #[test]
    fn reads_what_simpoint_and_looppoint_write() {
        let text = "# comment\n\nT:1:4200 :7:380 :12:1000\r\nM: 0x401A2c 17\n\
                    Marker lines of other shapes are skipped\n\
                    T:3:1.5e3 :4:2.25\tT\nM: 401000 3 libc.so+0x12 foo.c:7\nT : 2 : 7 :9:1";
        let records = read(text);
        // `T` at the end of line 6 is not a pair: reported where it is (line 6).
        let e = records.unwrap_err();
        assert_eq!((e.line(), e.column()), (6, Some(19)), "{e}");
        let text = text.replace("\tT\n", "\n");
        assert_eq!(
            read(&text).unwrap(),
            vec![
                slice(&[(1, 4200.0), (7, 380.0), (12, 1000.0)]),
                Record::Marker(Marker {
                    pc: 0x40_1a2c,
                    count: 17
                }),
                slice(&[(3, 1500.0), (4, 2.25)]),
                Record::Marker(Marker {
                    pc: 0x40_1000,
                    count: 3
                }),
                slice(&[(2, 7.0), (9, 1.0)]),
            ]
        );
    }

    #[test]
    fn errors_say_where_and_what() {
        let (line, column, offset, problem, text) = error("T:1:5\nT:0:4\n");
        assert_eq!((line, column, offset), (2, 3, 8));
        assert_eq!(problem, Problem::ZeroId);
        assert_eq!(
            text,
            "line 2, column 3: block id 0 (SimPoint numbers blocks from 1), found '0' at offset 0x8"
        );
        let (_, column, _, problem, _) = error("T:2147483648:1");
        assert_eq!((column, problem), (3, Problem::IdTooLarge));
        let (_, column, _, problem, text) = error("T:1:5 ;2:3");
        assert_eq!(
            (column, problem),
            (7, Problem::Expected("':' before a block id"))
        );
        assert!(text.ends_with("found ';' at offset 0x6"), "{text}");
        let (_, column, _, problem, text) = error("T:1:");
        assert_eq!(
            (column, problem),
            (
                5,
                Problem::Expected("a count (a non-negative decimal number)")
            )
        );
        assert!(text.contains("found the end of the line"), "{text}");
        let (_, column, _, problem, _) = error("T:1:-3");
        assert_eq!(column, 5);
        assert!(matches!(problem, Problem::Expected(_)));
        let (_, column, _, problem, _) = error("T:1:1e999");
        assert_eq!((column, problem), (5, Problem::TooLarge("the count")));
        let (_, _, _, problem, _) = error("T:1:1e");
        assert!(matches!(problem, Problem::Expected(_)));
        let (_, column, _, problem, _) = error("T  \r\n");
        assert_eq!((column, problem), (4, Problem::EmptySlice));
        let (_, column, _, problem, _) = error("M: 0x12345678123456789 1");
        assert_eq!(column, 22);
        assert_eq!(problem, Problem::TooLarge("the marker's pc"));
        let (_, column, _, _, _) = error("M: 0x10");
        assert_eq!(column, 8);
        let (_, column, _, _, _) = error("M: zz 1");
        assert_eq!(column, 4);
        let (_, column, _, problem, _) = error("M: 0x10 99999999999999999999");
        assert_eq!(
            (column, problem),
            (9, Problem::TooLarge("the marker's count"))
        );
        let (_, column, _, _, _) = error("M: 0x10 5x");
        assert_eq!(column, 10);
        let (_, _, _, _, text) = error("T:1:\x01");
        assert!(text.contains("found byte 0x01"), "{text}");
    }

    #[test]
    fn fused_after_an_error() {
        let mut r = Reader::new(&b"T:1:1\nT:x\nT:2:2\n"[..]);
        assert!(r.next().unwrap().is_ok());
        assert!(r.next().unwrap().is_err());
        assert!(r.next().is_none());
        assert_eq!(r.slices(), 1);
    }

    #[test]
    fn long_lines_are_bounded() {
        let mut text = b"# ".to_vec();
        text.resize(limits::MAX_LINE_LEN.saturating_add(10), b'x');
        let e = Reader::new(std::io::BufReader::new(&text[..]))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.problem(), Some(&Problem::LineTooLong));
        assert_eq!(e.offset(), limits::MAX_LINE_LEN as u64);
        // At exactly the limit it is fine.
        text.truncate(limits::MAX_LINE_LEN);
        assert!(Reader::new(&text[..]).next().is_none());
    }

    #[test]
    fn never_panics_on_arbitrary_bytes() {
        fn prop(data: Vec<u8>) -> bool {
            fuzz_read(&data);
            true
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>) -> bool);
        // Bytes drawn from the format's alphabet reach deeper.
        fn prop_alphabet(picks: Vec<u8>) -> bool {
            const ALPHABET: &[u8] = b"TM: 0x19afe.+-\n\r\t:T:1:2 ";
            let data: Vec<u8> = picks
                .iter()
                .map(|p| ALPHABET[usize::from(*p) % ALPHABET.len()])
                .collect();
            fuzz_read(&data);
            true
        }
        QuickCheck::new()
            .tests(5000)
            .quickcheck(prop_alphabet as fn(Vec<u8>) -> bool);
    }

    /// A slice or a marker as the writer takes it.
    #[derive(Clone, Debug)]
    enum Written {
        Slice(Vec<(u32, u64)>),
        Marker(u64, u64),
    }

    impl Arbitrary for Written {
        fn arbitrary(g: &mut Gen) -> Self {
            if bool::arbitrary(g) {
                return Written::Marker(u64::arbitrary(g), u64::arbitrary(g));
            }
            let mut ids: Vec<u32> = Vec::<u32>::arbitrary(g)
                .into_iter()
                .map(|id| id % limits::MAX_ID)
                .map(|id| id.saturating_add(1))
                .collect();
            ids.push(*g.choose(&[1, limits::MAX_ID]).unwrap());
            ids.sort_unstable();
            ids.dedup();
            // Counts exact in f64 (what tracekit writes stays far below 2^53); some zero.
            let entries = ids
                .into_iter()
                .map(|id| {
                    (
                        id,
                        (u64::arbitrary(g) % (1 << 53))
                            .saturating_mul(u64::from(u8::arbitrary(g) % 8 != 0)),
                    )
                })
                .collect();
            Written::Slice(entries)
        }
    }

    #[test]
    fn write_then_read_round_trips() {
        fn prop(items: Vec<Written>) -> bool {
            let mut w = Writer::new(Vec::new());
            let mut expected = Vec::new();
            for item in &items {
                match item {
                    Written::Marker(pc, count) => {
                        w.marker(*pc, *count).unwrap();
                        expected.push(Record::Marker(Marker {
                            pc: *pc,
                            count: *count,
                        }));
                    }
                    Written::Slice(entries) => {
                        let kept: Vec<Entry> = entries
                            .iter()
                            .filter(|(_, c)| *c > 0)
                            .map(|&(id, c)| Entry {
                                id,
                                count: c as f64,
                            })
                            .collect();
                        let result = w.slice(entries.iter().copied());
                        if kept.is_empty() {
                            assert!(matches!(result, Err(WriteError::EmptySlice { .. })));
                        } else {
                            result.unwrap();
                            expected.push(Record::Slice(kept));
                        }
                    }
                }
            }
            let bytes = w.finish().unwrap();
            let read: Vec<Record> = Reader::new(&bytes[..]).collect::<Result<_, _>>().unwrap();
            read == expected
        }
        QuickCheck::new()
            .tests(300)
            .quickcheck(prop as fn(Vec<Written>) -> bool);
    }
}
