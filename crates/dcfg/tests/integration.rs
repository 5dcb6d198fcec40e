//! The dcfg crate's one integration-test binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

mod errors;
mod fixtures;
mod queries;
mod real;
mod realdata;
mod roundtrip;

use std::path::PathBuf;

/// A file under `testdata/dcfg/`.
pub fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/dcfg")
        .join(name)
}

/// Compares `actual` with a golden file; `TRACE_BLESS=1` rewrites it.
pub fn assert_golden(name: &str, actual: &str) {
    let path = testdata(name);
    if std::env::var_os("TRACE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (TRACE_BLESS=1 creates it)", path.display()));
    assert_eq!(
        expected,
        actual,
        "{} differs (TRACE_BLESS=1 rewrites it)",
        path.display()
    );
}

/// `base` with the byte at `pos` (modulo its length) set to `byte`, or cut there.
pub fn mutate(base: &[u8], pos: usize, byte: u8, cut: bool) -> Vec<u8> {
    let mut v = base.to_vec();
    let i = pos % v.len().max(1);
    if cut {
        v.truncate(i);
    } else if let Some(b) = v.get_mut(i) {
        *b = byte;
    }
    v
}

/// A reader that hands out its bytes in small pieces of varying sizes, so that every value
/// of the input lands across a refill of the streaming reader's window somewhere.
#[derive(Debug)]
pub struct Trickle<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    k: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = self.sizes[self.k % self.sizes.len()].max(1);
        self.k += 1;
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A [`Trickle`] over `data` with read sizes cycling through `sizes` (1 if empty).
pub fn trickle<'a>(data: &'a [u8], sizes: &[usize]) -> Trickle<'a> {
    Trickle {
        data,
        sizes: if sizes.is_empty() {
            vec![1]
        } else {
            sizes.to_vec()
        },
        k: 0,
    }
}

/// The model behind `sample.dcfg.json` (the same call as the xtask fixture generator).
pub fn sample() -> dcfg::Dcfg {
    dcfg::testgen::synthetic(dcfg::testgen::SynthConfig {
        images: 2,
        routines_per_image: 2,
        threads: 2,
        seed: 1,
    })
}

/// A JSON value as text tokens, for [`intel_layout`].
enum Tok {
    Leaf(Vec<u8>),
    Arr(Vec<Tok>),
    Obj(Vec<(Vec<u8>, Tok)>),
}

/// Parses one JSON value of a well-formed text into tokens (strings and numbers verbatim).
fn parse_tok(s: &[u8], i: &mut usize) -> Tok {
    let ws = |i: &mut usize| {
        while s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(i);
    let open = s[*i];
    if open == b'[' || open == b'{' {
        *i += 1;
        let (mut arr, mut obj) = (Vec::new(), Vec::new());
        loop {
            ws(i);
            if s[*i] == b']' || s[*i] == b'}' {
                *i += 1;
                break;
            }
            if s[*i] == b',' {
                *i += 1;
            }
            if open == b'{' {
                let Tok::Leaf(k) = parse_tok(s, i) else {
                    panic!("key")
                };
                ws(i);
                assert_eq!(s[*i], b':');
                *i += 1;
                obj.push((k, parse_tok(s, i)));
            } else {
                arr.push(parse_tok(s, i));
            }
        }
        return if open == b'[' {
            Tok::Arr(arr)
        } else {
            Tok::Obj(obj)
        };
    }
    let start = *i;
    if open == b'"' {
        *i += 1;
        while s[*i] != b'"' {
            *i += if s[*i] == b'\\' { 2 } else { 1 };
        }
        *i += 1;
    } else {
        while !b",]} \n".contains(&s[*i]) {
            *i += 1;
        }
    }
    Tok::Leaf(s[start..*i].to_vec())
}

fn tok_size(t: &Tok) -> usize {
    match t {
        Tok::Leaf(_) => 0,
        Tok::Arr(v) => v.iter().map(|c| 1 + tok_size(c)).sum(),
        Tok::Obj(v) => v.iter().map(|(_, c)| 1 + tok_size(c)).sum(),
    }
}

fn tok_print(t: &Tok, level: usize, out: &mut Vec<u8>) {
    let (open, close, n) = match t {
        Tok::Leaf(s) => return out.extend_from_slice(s),
        Tok::Arr(v) => (b'[', b']', v.len()),
        Tok::Obj(v) => (b'{', b'}', v.len()),
    };
    let flat = tok_size(t) <= 23;
    out.extend_from_slice(&[open, b' ']);
    for k in 0..n {
        if k > 0 {
            if flat {
                out.extend_from_slice(b", ");
            } else {
                out.extend_from_slice(b",\n");
                out.extend(std::iter::repeat_n(b' ', 2 * (level + 1)));
            }
        }
        match t {
            Tok::Arr(v) => tok_print(&v[k], level + 1, out),
            Tok::Obj(v) => {
                out.extend_from_slice(&v[k].0);
                out.extend_from_slice(b" : ");
                tok_print(&v[k].1, level + 1, out);
            }
            Tok::Leaf(_) => unreachable!(),
        }
    }
    if n == 0 {
        out.push(close);
    } else if flat {
        out.extend_from_slice(&[b' ', close]);
    } else {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', 2 * level));
        out.push(close);
    }
}

/// An independent statement of Intel's layout rule, applied to the tokens of a JSON text: a
/// container with at most 23 values at any depth on one line, else one element per line,
/// two spaces of indentation per level; a newline at the end.
pub fn intel_layout(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    tok_print(&parse_tok(json, &mut 0), 0, &mut out);
    out.push(b'\n');
    out
}
