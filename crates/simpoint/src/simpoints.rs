//! SimPoint's output files: `.simpoints` (`<slice> <cluster>` per line: the simulation point
//! of each cluster, slices numbered from 0) and `.weights` (`<weight> <cluster>` per line:
//! each cluster's share of the run), as SimPoint 3.2's `-saveSimpoints` and
//! `-saveSimpointWeights` write them and the scripts around it (PinPoints, LoopPoint, gem5)
//! read them.
//!
//! Writers print clusters in ascending order and weights with 8 decimals, so the weights of
//! up to a thousand clusters still sum to 1 within 1e-5. Readers accept what SimPoint
//! writes: fields separated by spaces or tabs, blank lines, `\r\n` line ends, weights as
//! any decimal or exponent number; anything else is an error that names its line and
//! column (both from 1).

use std::fmt;
use std::io::{self, Write};

use crate::cluster::Clustering;

/// One line of a `.simpoints` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimPoint {
    /// The slice (interval), numbered from 0 in the `.bb` file's order of `T` lines.
    pub slice: u64,
    /// The cluster it represents.
    pub cluster: u64,
}

/// One line of a `.weights` file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weight {
    /// The cluster's share of the run, in \[0, 1\].
    pub weight: f64,
    /// The cluster.
    pub cluster: u64,
}

/// The `.simpoints` and `.weights` lines of a clustering, in cluster order.
#[must_use]
pub fn from_clustering(c: &Clustering) -> (Vec<SimPoint>, Vec<Weight>) {
    let points = c
        .simpoints
        .iter()
        .zip(0u64..)
        .map(|(&slice, cluster)| SimPoint {
            slice: slice as u64,
            cluster,
        })
        .collect();
    let weights = c
        .weights
        .iter()
        .zip(0u64..)
        .map(|(&weight, cluster)| Weight { weight, cluster })
        .collect();
    (points, weights)
}

/// Writes `points` as a `.simpoints` file.
///
/// # Errors
///
/// Writing fails.
pub fn write_simpoints<W: Write>(mut w: W, points: &[SimPoint]) -> io::Result<()> {
    for p in points {
        writeln!(w, "{} {}", p.slice, p.cluster)?;
    }
    Ok(())
}

/// Writes `weights` as a `.weights` file, each weight with 8 decimals.
///
/// # Errors
///
/// Writing fails.
pub fn write_weights<W: Write>(mut w: W, weights: &[Weight]) -> io::Result<()> {
    for x in weights {
        writeln!(w, "{:.8} {}", x.weight, x.cluster)?;
    }
    Ok(())
}

/// What is wrong in a `.simpoints` or `.weights` file.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// A field is not an unsigned decimal integer (or does not fit 64 bits).
    NotAnInteger(String),
    /// A weight is not a number.
    NotANumber(String),
    /// A weight is negative, above 1 or not finite.
    WeightOutOfRange(f64),
    /// The line ends before its second field.
    MissingField,
    /// There is more on the line after the second field.
    ExtraField,
    /// A cluster appears on two lines.
    DuplicateCluster(u64),
}

/// A parse error with its place: line and column, both from 1 (the column counts bytes).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct ParseError {
    /// The line, from 1.
    pub line: u64,
    /// The column (byte), from 1.
    pub column: u64,
    /// What is wrong.
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ParseErrorKind::NotAnInteger(s) => write!(f, "{s:?} is not an unsigned integer")?,
            ParseErrorKind::NotANumber(s) => write!(f, "{s:?} is not a number")?,
            ParseErrorKind::WeightOutOfRange(w) => write!(f, "weight {w} is not between 0 and 1")?,
            ParseErrorKind::MissingField => f.write_str("the line ends before its second field")?,
            ParseErrorKind::ExtraField => f.write_str("more than two fields on the line")?,
            ParseErrorKind::DuplicateCluster(c) => write!(f, "cluster {c} appears twice")?,
        }
        write!(f, " at line {}, column {}", self.line, self.column)
    }
}

/// The longest field shown in an error, so a huge garbage line makes a short message.
const MAX_SHOWN: usize = 40;

/// A field and its column.
type Field<'a> = (u64, &'a [u8]);

/// The two fields of every non-blank line, with their line number and columns.
fn lines(text: &[u8]) -> impl Iterator<Item = Result<(u64, [Field<'_>; 2]), ParseError>> {
    text.split(|&b| b == b'\n')
        .zip(1u64..)
        .filter_map(|(line, no)| {
            let mut fields = Vec::with_capacity(2);
            let mut pos = 0usize;
            let mut rest = line;
            loop {
                let skip = rest
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
                    .count();
                pos = pos.saturating_add(skip);
                rest = rest.get(skip..).unwrap_or_default();
                if rest.is_empty() {
                    break;
                }
                let len = rest
                    .iter()
                    .take_while(|b| !matches!(b, b' ' | b'\t' | b'\r'))
                    .count();
                let column = u64::try_from(pos).unwrap_or(u64::MAX).saturating_add(1);
                if fields.len() == 2 {
                    return Some(Err(ParseError {
                        line: no,
                        column,
                        kind: ParseErrorKind::ExtraField,
                    }));
                }
                let (field, tail) = rest.split_at_checked(len).unwrap_or((rest, &[]));
                fields.push((column, field));
                pos = pos.saturating_add(len);
                rest = tail;
            }
            match fields.as_slice() {
                [] => None,
                [a, b] => Some(Ok((no, [*a, *b]))),
                _ => Some(Err(ParseError {
                    line: no,
                    column: u64::try_from(line.len())
                        .unwrap_or(u64::MAX)
                        .saturating_add(1),
                    kind: ParseErrorKind::MissingField,
                })),
            }
        })
}

fn shown(field: &[u8]) -> String {
    let s = String::from_utf8_lossy(field.get(..MAX_SHOWN).unwrap_or(field));
    if field.len() > MAX_SHOWN {
        format!("{s}…")
    } else {
        s.into_owned()
    }
}

fn integer(line: u64, (column, field): Field<'_>) -> Result<u64, ParseError> {
    let err = || ParseError {
        line,
        column,
        kind: ParseErrorKind::NotAnInteger(shown(field)),
    };
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return Err(err());
    }
    std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(err)
}

/// Rejects a cluster seen before.
fn once(
    seen: &mut std::collections::BTreeSet<u64>,
    line: u64,
    column: u64,
    cluster: u64,
) -> Result<(), ParseError> {
    if seen.insert(cluster) {
        Ok(())
    } else {
        Err(ParseError {
            line,
            column,
            kind: ParseErrorKind::DuplicateCluster(cluster),
        })
    }
}

/// Reads a `.simpoints` file.
///
/// # Errors
///
/// The first line that is not `<slice> <cluster>`, or a cluster listed twice.
pub fn parse_simpoints(text: &[u8]) -> Result<Vec<SimPoint>, ParseError> {
    let mut seen = std::collections::BTreeSet::new();
    lines(text)
        .map(|l| {
            let (no, [a, b]) = l?;
            let slice = integer(no, a)?;
            let cluster = integer(no, b)?;
            once(&mut seen, no, b.0, cluster)?;
            Ok(SimPoint { slice, cluster })
        })
        .collect()
}

/// Reads a `.weights` file.
///
/// # Errors
///
/// The first line that is not `<weight> <cluster>` with a weight in \[0, 1\], or a cluster
/// listed twice.
pub fn parse_weights(text: &[u8]) -> Result<Vec<Weight>, ParseError> {
    let mut seen = std::collections::BTreeSet::new();
    lines(text)
        .map(|l| {
            let (no, [a, b]) = l?;
            let (column, field) = a;
            let weight: f64 = std::str::from_utf8(field)
                .ok()
                // Rust also reads "inf" and "NaN": only digits, signs, '.', 'e' are numbers here.
                .filter(|s| {
                    s.bytes()
                        .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c))
                })
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| ParseError {
                    line: no,
                    column,
                    kind: ParseErrorKind::NotANumber(shown(field)),
                })?;
            if !(0.0..=1.0).contains(&weight) {
                return Err(ParseError {
                    line: no,
                    column,
                    kind: ParseErrorKind::WeightOutOfRange(weight),
                });
            }
            let cluster = integer(no, b)?;
            once(&mut seen, no, b.0, cluster)?;
            Ok(Weight { weight, cluster })
        })
        .collect()
}

/// Fuzzing entry point: `data` read as a `.simpoints` and as a `.weights` file; what reads
/// must write and read back the same. Panics on a bug.
#[cfg(feature = "fuzzing")]
#[allow(clippy::panic, clippy::unwrap_used)]
pub fn fuzz_read(data: &[u8]) {
    if let Ok(points) = parse_simpoints(data) {
        let mut out = Vec::new();
        write_simpoints(&mut out, &points).unwrap();
        assert_eq!(parse_simpoints(&out).unwrap(), points);
    }
    if let Ok(weights) = parse_weights(data) {
        let mut out = Vec::new();
        write_weights(&mut out, &weights).unwrap();
        let back = parse_weights(&out).unwrap();
        assert_eq!(back.len(), weights.len());
        for (a, b) in back.iter().zip(&weights) {
            assert_eq!(a.cluster, b.cluster);
            assert!((a.weight - b.weight).abs() <= 5e-9);
        }
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn err(r: Result<impl fmt::Debug, ParseError>) -> (u64, u64, ParseErrorKind) {
        let e = r.unwrap_err();
        (e.line, e.column, e.kind)
    }

    #[test]
    fn reads_simpoints_output() {
        // As SimPoint prints them, with a blank line and CRLF thrown in.
        let text = b"12 0\n3 1\r\n\n  7\t2\n";
        assert_eq!(
            parse_simpoints(text).unwrap(),
            vec![
                SimPoint {
                    slice: 12,
                    cluster: 0
                },
                SimPoint {
                    slice: 3,
                    cluster: 1
                },
                SimPoint {
                    slice: 7,
                    cluster: 2
                },
            ]
        );
        let w = parse_weights(b"0.5 0\n0.25 1\n2.5e-01 2\n").unwrap();
        assert_eq!(w.iter().map(|w| w.weight).sum::<f64>(), 1.0);
        assert_eq!(parse_simpoints(b"").unwrap(), vec![]);
    }

    #[test]
    fn errors_say_where() {
        assert_eq!(
            err(parse_simpoints(b"1 0\n2 x1\n")),
            (2, 3, ParseErrorKind::NotAnInteger("x1".into()))
        );
        assert_eq!(
            err(parse_simpoints(b"1 0\n  2\n")),
            (2, 4, ParseErrorKind::MissingField)
        );
        assert_eq!(
            err(parse_simpoints(b"1 0 9\n")),
            (1, 5, ParseErrorKind::ExtraField)
        );
        assert_eq!(
            err(parse_simpoints(b"1 0\n4 0\n")),
            (2, 3, ParseErrorKind::DuplicateCluster(0))
        );
        assert_eq!(
            err(parse_simpoints(b"-1 0\n")),
            (1, 1, ParseErrorKind::NotAnInteger("-1".into()))
        );
        assert_eq!(
            err(parse_simpoints(b"99999999999999999999 0\n")),
            (
                1,
                1,
                ParseErrorKind::NotAnInteger("99999999999999999999".into())
            )
        );
        assert_eq!(
            err(parse_weights(b"0.5 0\n1.5 1\n")),
            (2, 1, ParseErrorKind::WeightOutOfRange(1.5))
        );
        assert_eq!(
            err(parse_weights(b"inf 0\n")),
            (1, 1, ParseErrorKind::NotANumber("inf".into()))
        );
        assert_eq!(
            err(parse_weights(b"NaN 0\n")),
            (1, 1, ParseErrorKind::NotANumber("NaN".into()))
        );
        let e = parse_weights(b"0.1 0\n\xff 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"\u{fffd}\" is not a number at line 2, column 1"
        );
    }

    quickcheck! {
        fn simpoints_round_trip(v: Vec<(u64, u64)>) -> bool {
            let mut seen = std::collections::BTreeSet::new();
            let points: Vec<SimPoint> = v
                .into_iter()
                .filter(|(_, c)| seen.insert(*c))
                .map(|(slice, cluster)| SimPoint { slice, cluster })
                .collect();
            let mut out = Vec::new();
            write_simpoints(&mut out, &points).unwrap();
            parse_simpoints(&out).unwrap() == points
        }

        fn weights_round_trip(v: Vec<(u32, u64)>) -> bool {
            let mut seen = std::collections::BTreeSet::new();
            let weights: Vec<Weight> = v
                .into_iter()
                .filter(|(_, c)| seen.insert(*c))
                .map(|(w, cluster)| Weight { weight: f64::from(w) / f64::from(u32::MAX), cluster })
                .collect();
            let mut out = Vec::new();
            write_weights(&mut out, &weights).unwrap();
            let back = parse_weights(&out).unwrap();
            back.len() == weights.len()
                && back.iter().zip(&weights).all(|(a, b)| {
                    a.cluster == b.cluster && (a.weight - b.weight).abs() <= 5e-9
                })
        }

        fn never_panics(data: Vec<u8>) -> bool {
            let _ = parse_simpoints(&data);
            let _ = parse_weights(&data);
            true
        }
    }
}
