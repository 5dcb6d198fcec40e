//! The `.bb` writer: SimPoint's frequency-vector lines and LoopPoint's marker lines.

use std::io::Write;

use super::error::WriteError;
use super::limits::MAX_ID;

/// Writes a `.bb` file to any [`io::Write`](std::io::Write), one line at a time:
/// [`Writer::slice`] a `T:` line, [`Writer::marker`] an `M:` line. Each line is built in
/// memory first and written whole, so a refused slice leaves the output as it was. The
/// output is not buffered beyond one line: give it a `BufWriter` for files.
#[derive(Debug)]
pub struct Writer<W> {
    out: W,
    line: Vec<u8>,
    slices: u64,
    markers: u64,
}

impl<W: Write> Writer<W> {
    /// A writer to `out`.
    pub fn new(out: W) -> Self {
        Writer {
            out,
            line: Vec::new(),
            slices: 0,
            markers: 0,
        }
    }

    /// Writes one slice: `T:id:count :id:count …` and a line feed. `entries` are (block id,
    /// instructions executed in that block in the slice) with ids strictly ascending in
    /// `1..=MAX_ID`; pairs with count 0 are left out. Errors (and writes nothing) on a bad or
    /// unordered id, or when every count is 0.
    pub fn slice<I>(&mut self, entries: I) -> Result<(), WriteError>
    where
        I: IntoIterator<Item = (u32, u64)>,
    {
        let slice = self.slices;
        self.line.clear();
        self.line.push(b'T');
        let mut previous = 0;
        for (id, count) in entries {
            if id == 0 || id > MAX_ID {
                return Err(WriteError::BadId { slice, id });
            }
            if id <= previous {
                return Err(WriteError::NotAscending {
                    slice,
                    previous,
                    id,
                });
            }
            previous = id;
            if count == 0 {
                continue;
            }
            if self.line.len() > 1 {
                self.line.push(b' ');
            }
            self.line.push(b':');
            push_decimal(&mut self.line, u64::from(id));
            self.line.push(b':');
            push_decimal(&mut self.line, count);
        }
        if self.line.len() == 1 {
            return Err(WriteError::EmptySlice { slice });
        }
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.slices = self.slices.saturating_add(1);
        Ok(())
    }

    /// Writes one marker line, `M: 0x<pc> <count>` (pc in lowercase hex, count in decimal).
    pub fn marker(&mut self, pc: u64, count: u64) -> Result<(), WriteError> {
        self.line.clear();
        self.line.extend_from_slice(b"M: ");
        write!(self.line, "{pc:#x} ")?;
        push_decimal(&mut self.line, count);
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.markers = self.markers.saturating_add(1);
        Ok(())
    }

    /// How many slices were written.
    #[must_use]
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// How many markers were written.
    #[must_use]
    pub fn markers(&self) -> u64 {
        self.markers
    }

    /// Flushes the output and returns it.
    pub fn finish(mut self) -> Result<W, WriteError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Appends `n` in decimal (no allocation, no formatting machinery: slices of many blocks
/// make long lines).
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        // `n % 10` < 10, so the digit fits a byte.
        *slot = b'0'.saturating_add(u8::try_from(n % 10).unwrap_or(0));
        start = start.saturating_sub(1);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(f: impl FnOnce(&mut Writer<&mut Vec<u8>>) -> Result<(), WriteError>) -> String {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        f(&mut w).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn simpoint_lines() {
        let text = written(|w| {
            w.slice([(1, 4200), (7, 380), (9, 0), (12, 1000)])?;
            w.marker(0x40_1000, 3)?;
            w.slice([(2, u64::MAX)])
        });
        assert_eq!(
            text,
            "T:1:4200 :7:380 :12:1000\nM: 0x401000 3\nT:2:18446744073709551615\n"
        );
    }

    #[test]
    fn decimal() {
        for n in [0, 1, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut v = Vec::new();
            push_decimal(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
        }
    }

    #[test]
    fn refused_slices_write_nothing() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        assert!(matches!(
            w.slice([(0, 1)]),
            Err(WriteError::BadId { slice: 0, id: 0 })
        ));
        assert!(matches!(
            w.slice([(MAX_ID + 1, 1)]),
            Err(WriteError::BadId { .. })
        ));
        assert!(matches!(
            w.slice([(3, 1), (3, 1)]),
            Err(WriteError::NotAscending {
                previous: 3,
                id: 3,
                ..
            })
        ));
        assert!(matches!(
            w.slice([(1, 0), (2, 0)]),
            Err(WriteError::EmptySlice { slice: 0 })
        ));
        assert_eq!(w.slices(), 0);
        w.slice([(MAX_ID, 1)]).unwrap();
        assert_eq!(w.slices(), 1);
        drop(w);
        assert_eq!(out, format!("T:{MAX_ID}:1\n").into_bytes());
    }
}
