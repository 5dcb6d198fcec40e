//! Parse errors: every one names the JSON path of the offending value, what was expected,
//! and the byte offset, identically from a slice and from a stream.

use dcfg::Dcfg;
use quickcheck::{Gen, QuickCheck};

use crate::{testdata, trickle};

/// The result of reading `json` as text, the same from a slice, from a whole stream and from
/// a trickling stream.
fn read_all_ways(json: &[u8]) -> Result<Dcfg, String> {
    let slice = Dcfg::parse(json).map_err(|e| e.to_string());
    let stream = Dcfg::from_reader(json).map_err(|e| e.to_string());
    let trickled =
        Dcfg::from_reader(trickle(json, &[1, 2, 3, 7, 13, 64, 1000])).map_err(|e| e.to_string());
    assert_eq!(slice, stream, "slice vs stream");
    assert_eq!(slice, trickled, "slice vs trickled stream");
    slice
}

fn sample_json() -> String {
    std::fs::read_to_string(testdata("sample.dcfg.json")).unwrap()
}

/// The sample with the first occurrence of `from` replaced by `to`, and the offset of `bad`
/// (which `to` contains) in the result.
fn edit(from: &str, to: &str, bad: &str) -> (String, u64) {
    let s = sample_json();
    let at = s
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not in the sample"));
    let within = to
        .find(bad)
        .unwrap_or_else(|| panic!("{bad:?} not in {to:?}"));
    (s.replacen(from, to, 1), (at + within) as u64)
}

/// Reads `json`, which must fail; returns the path and the offset, checking the message.
fn fails(json: &str) -> (String, u64, String) {
    let msg = read_all_ways(json.as_bytes()).unwrap_err();
    let e = Dcfg::parse(json.as_bytes()).unwrap_err();
    let (path, offset) = (e.path().unwrap().to_owned(), e.offset().unwrap().0);
    // Programs see the same through trace_core::Located.
    let located: &dyn trace_core::Located = &e;
    assert_eq!(located.path(), Some(path.as_str()));
    assert_eq!(located.offset(), Some(trace_core::Offset(offset)));
    let shown = if path.is_empty() { "top level" } else { &path };
    assert!(msg.starts_with(&format!("{shown}: ")), "{msg}");
    assert!(msg.ends_with(&format!(" at offset {offset:#x}")), "{msg}");
    (path, offset, msg)
}

/// Edits the sample as [`edit`] does; the read must fail at `bad` under `path`, with a
/// message containing `what`.
fn check(from: &str, to: &str, bad: &str, path: &str, what: &str) {
    let (json, at) = edit(from, to, bad);
    let (p, offset, msg) = fails(&json);
    assert_eq!(p, path, "{msg}");
    assert_eq!(offset, at, "{msg}");
    assert!(msg.contains(what), "{msg}");
}

#[test]
fn a_bad_value_in_a_nested_table_row() {
    // Routine 10's NODES table: its third row's dominator.
    check(
        "[ 12, 11 ]",
        "[ 12, true ]",
        "true",
        "PROCESSES[0].IMAGES[0].ROUTINES[1].NODES[2].IDOM_NODE_ID",
        "expected an unsigned integer or a hex string such as \"0x400000\", found `t`",
    );
    // An element of a loop's node list.
    check(
        "[ 11, [ 12 ], [ 11, 12 ] ]",
        "[ 11, [ 12 ], [ 11, -12 ] ]",
        "-12",
        "PROCESSES[0].IMAGES[0].ROUTINES[1].LOOPS[0].LOOP_NODE_IDS[1]",
        "found the number -12",
    );
    // A per-thread count of an edge.
    check(
        "[ 3, 5, 6, 13, [ 5, 19 ] ]",
        "[ 3, 5, 6, 13, [ 5, 1.9 ] ]",
        "1.9",
        "PROCESSES[0].EDGES[2].COUNT_PER_THREAD[1]",
        "found the number 1.9",
    );
    // A hex string that is not an integer, in the second image.
    check(
        "[ 101, 2, \"0x102c\"",
        "[ 101, 2, \"0x102c bytes\"",
        "\"0x102c bytes",
        "PROCESSES[0].IMAGES[1].SOURCE_DATA[1].ADDR_OFFSET",
        "found the string \"0x102c bytes\"",
    );
}

#[test]
fn a_section_of_the_wrong_type() {
    check(
        "\"SYMBOLS\" : [",
        "\"SYMBOLS\" : 5, \"X\" : [",
        "5",
        "PROCESSES[0].IMAGES[0].SYMBOLS",
        "expected a table (an array whose first element is an array of column names), found the number 5",
    );
    check(
        "\"INSTR_COUNT_PER_THREAD\" : [ 514, 974 ]",
        "\"INSTR_COUNT_PER_THREAD\" : { }",
        "{",
        "PROCESSES[0].INSTR_COUNT_PER_THREAD",
        "expected an array of integers, found an object",
    );
    check(
        "\"FILE_NAMES\" : [",
        "\"FILE_NAMES\" : \"none\", \"Y\" : [",
        "\"none",
        "FILE_NAMES",
        "found the string \"none\"",
    );
    // An image row whose data is not an object.
    check(
        "8644,\n            {",
        "8644,\n            [ ], {",
        "[",
        "PROCESSES[0].IMAGES[0].IMAGE_DATA",
        "expected an image-data object",
    );
    // The top level is not an object.
    let (path, offset, msg) = fails("[ 1, 2 ]");
    assert_eq!((path.as_str(), offset), ("", 0));
    assert!(msg.starts_with("top level: expected a DCFG"), "{msg}");
}

#[test]
fn tables_with_bad_headers_and_rows() {
    let (json, at) = edit("\"NUM_INSTRS\", \"LAST", "\"N_INSTRS\", \"LAST", "\"N_");
    let (path, offset, msg) = fails(&json);
    assert_eq!(path, "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[header]");
    assert!(
        msg.contains("the header row has no column NUM_INSTRS"),
        "{msg}"
    );
    assert!(offset < at, "at the start of the header row");
    check(
        "[ 5, \"0x101c\", 48, 12, 44, 26 ]",
        "[ 5, \"0x101c\", 48, 12, 44, 26, 0 ]",
        "0 ]",
        "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[1][6]",
        "more values than the 6 columns of the header row",
    );
    // A cell of an unknown column is skipped, but must still be JSON.
    let json = sample_json()
        .replacen("\"COUNT\" ]", "\"COUNT\", \"NEW\" ]", 1)
        .replacen(
            "[ 4, \"0x1000\", 28, 7, 24, 2 ]",
            "[ 4, \"0x1000\", 28, 7, 24, 2, [ 1, { \"a\" : tru } ] ]",
            1,
        );
    let (path, _, msg) = fails(&json);
    assert_eq!(path, "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0][6]");
    assert!(msg.contains("expected a value, found `t`"), "{msg}");
    // A syntax error between rows.
    check(
        "[ 2, 4, 5, 18, [ 1, 1 ] ],",
        "[ 2, 4, 5, 18, [ 1, 1 ] ];",
        ";",
        "PROCESSES[0].EDGES[2]",
        "expected `,` or `]`, found `;`",
    );
}

#[test]
fn truncated_files_name_where_they_end() {
    let json = sample_json();
    // The edge table's data rows, each ending ` ] ]` (its counts, then the row).
    let rows_at = json.find("\"COUNT_PER_THREAD\" ]").unwrap() + 20;
    let rows_end = json.rfind(" ] ]").unwrap() + 4;
    let mut in_edges = 0;
    // Every cut that removes at least the closing `}`.
    for cut in 0..json.len() - 1 {
        let prefix = &json[..cut];
        let (path, offset, msg) = fails(prefix);
        assert_eq!(offset, cut as u64, "{msg}");
        assert!(msg.contains("found the end of the input"), "{msg}");
        // Inside the edge table, the row named is the number of complete rows before the
        // cut (counted on the text, not by the reader).
        if (rows_at..rows_end).contains(&cut) {
            let complete = prefix[rows_at..].matches(" ] ]").count();
            let want = format!("PROCESSES[0].EDGES[{complete}]");
            assert!(path.starts_with(&want), "cut {cut}: {path} vs {want}");
            in_edges += 1;
        }
    }
    assert!(in_edges > 500);
}

#[test]
fn other_syntax_errors() {
    // (input, path, the text at the offset, what the message says)
    let cases = [
        ("", "", "", "expected a DCFG"),
        (
            "{ \"MAJOR_VERSION\" : 1, \"MINOR_VERSION\" : 0 } x",
            "",
            "x",
            "expected the end of the input",
        ),
        (
            "{ \"MAJOR_VERSION\" : 01, \"MINOR_VERSION\" : 0 }",
            "MAJOR_VERSION",
            "01",
            "(JSON allows no leading zero)",
        ),
        (
            "{ \"MAJOR_VERSION\" : 18446744073709551616 }",
            "MAJOR_VERSION",
            "18446744073709551616",
            "(above 2^64 - 1)",
        ),
        (
            "{ \"MAJOR_VERSION\" : 1, \"X\" : \"a\u{1}\" }",
            "X",
            "\u{1}",
            "control character",
        ),
        (
            "{ \"MAJOR_VERSION\" : 1, \"X\" : [ \"\\ud800\" ] }",
            "X",
            "\\ud800",
            "lone surrogate",
        ),
        (
            "{ \"MAJOR_VERSION\" : 1, \"X\" : \"\\q\" }",
            "X",
            "\\q",
            "expected a JSON escape",
        ),
        (
            "{ \"MINOR_VERSION\" : 0 }",
            "",
            "}",
            "missing key MAJOR_VERSION",
        ),
        (
            "{ \"MAJOR_VERSION\" : 1, MINOR_VERSION : 0 }",
            "",
            "MINOR",
            "expected a key (a string), found `M`",
        ),
    ];
    for (json, path, bad, what) in cases {
        let (p, o, msg) = fails(json);
        let at = if bad.is_empty() {
            0
        } else {
            json.find(bad).unwrap() as u64
        };
        assert_eq!((p.as_str(), o), (path, at), "{json}: {msg}");
        assert!(msg.contains(what), "{json}: {msg}");
    }
    // Unknown keys may hold any JSON, deeply nested up to a limit.
    let deep = format!(
        "{{ \"MAJOR_VERSION\" : 1, \"MINOR_VERSION\" : 0, \"X\" : {}1e-3{} }}",
        "[".repeat(1000),
        "]".repeat(1000)
    );
    assert!(read_all_ways(deep.as_bytes()).is_ok());
    let too_deep = deep
        .replace("[1e", "[[[[[[[[[[[[[[[[[[[[[[[[[[1e")
        .replace("]]]]", "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    let e = Dcfg::parse(too_deep.as_bytes()).unwrap_err();
    assert!(matches!(e, dcfg::Error::Limit { .. }), "{e}");
    assert_eq!(e.path(), Some("X"));
}

/// Whatever the input, the slice reader and the streaming reader (fed in any piece sizes)
/// give the same model or the same error.
#[test]
fn stream_and_slice_agree_on_mutated_files() {
    let base = std::fs::read(testdata("sample.dcfg.json")).unwrap();
    let dialect =
        dcfg::testgen::dialect_json(&crate::sample(), dcfg::testgen::IntStyle::HexEverywhere, 2);
    fn prop(base: &[u8], pos: usize, byte: u8, cut: bool, sizes: Vec<u8>) -> bool {
        let v = crate::mutate(base, pos, byte, cut);
        let sizes: Vec<usize> = sizes.iter().map(|&s| usize::from(s)).collect();
        let a = Dcfg::parse(&v).map_err(|e| e.to_string());
        let b = Dcfg::from_reader(trickle(&v, &sizes)).map_err(|e| e.to_string());
        a == b
    }
    let mut g = Gen::new(64);
    for input in [&base, &dialect] {
        for _ in 0..300 {
            let (pos, byte, cut, sizes) = (
                quickcheck::Arbitrary::arbitrary(&mut g),
                quickcheck::Arbitrary::arbitrary(&mut g),
                quickcheck::Arbitrary::arbitrary(&mut g),
                quickcheck::Arbitrary::arbitrary(&mut g),
            );
            assert!(prop(input, pos, byte, cut, sizes));
        }
    }
    QuickCheck::new().tests(100).quickcheck(
        (|data: Vec<u8>, sizes: Vec<u8>| {
            let sizes: Vec<usize> = sizes.iter().map(|&s| usize::from(s)).collect();
            Dcfg::parse(&data).map_err(|e| e.to_string())
                == Dcfg::from_reader(trickle(&data, &sizes)).map_err(|e| e.to_string())
        }) as fn(Vec<u8>, Vec<u8>) -> bool,
    );
}

#[test]
fn block_sizes_and_line_numbers_above_32_bits() {
    // The model keeps them as u32; a larger value is refused where it stands.
    check(
        "[ 5, \"0x101c\", 48, 12, 44, 26 ]",
        "[ 5, \"0x101c\", 4294967296, 12, 44, 26 ]",
        "4294967296",
        "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[1].SIZE",
        "expected an unsigned integer below 2^32, found 4294967296",
    );
    check(
        "[ 100, 2, \"0x101c\", 48, 12 ]",
        "[ 100, \"0x100000000\", \"0x101c\", 48, 12 ]",
        "\"0x100000000\"",
        "PROCESSES[0].IMAGES[0].SOURCE_DATA[1].LINE_NUM",
        "below 2^32",
    );
    // 2^32 - 1 still fits.
    let (json, _) = edit(
        "[ 5, \"0x101c\", 48, 12, 44, 26 ]",
        "[ 5, \"0x101c\", 4294967295, 12, 44, 26 ]",
        "4294967295",
    );
    let d = read_all_ways(json.as_bytes()).unwrap();
    assert_eq!(d.processes[0].images()[0].basic_blocks()[1].size, u32::MAX);
}
