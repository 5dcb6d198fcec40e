//! The bounds-checked byte cursor every binary reader of the workspace is built on.

use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

use crate::{Offset, UnexpectedEof};

/// A read position in a borrowed byte slice that knows the absolute file offset of the
/// slice's first byte (`base`), so that readers over sub-slices still report file offsets.
///
/// Every read checks bounds in one place ([`Cursor::ensure`]) and fails with an
/// [`UnexpectedEof`] carrying the offset and the bytes needed; a failed read consumes nothing.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
}

macro_rules! read_int {
    ($(#[$doc:meta] $name:ident, $ty:ty, $from:ident;)*) => {$(
        #[$doc]
        ///
        /// # Errors
        ///
        /// [`UnexpectedEof`] when fewer bytes remain.
        #[inline]
        pub fn $name(&mut self) -> Result<$ty, UnexpectedEof> {
            let bytes = self.read_array::<{ core::mem::size_of::<$ty>() }>()?;
            Ok(<$ty>::$from(bytes))
        }
    )*};
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`, whose first byte is at file offset 0.
    #[must_use]
    pub const fn new(data: &'a [u8]) -> Self {
        Cursor {
            data,
            pos: 0,
            base: 0,
        }
    }

    /// A cursor over `data`, whose first byte is at file offset `base`.
    #[must_use]
    pub const fn with_base(data: &'a [u8], base: u64) -> Self {
        Cursor { data, pos: 0, base }
    }

    /// The absolute file offset of the next byte to be read.
    #[inline]
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.base.saturating_add(self.pos as u64))
    }

    /// The absolute file offset of the cursor's first byte.
    #[must_use]
    pub fn base(&self) -> Offset {
        Offset(self.base)
    }

    /// How many bytes have been read since the cursor was made.
    #[inline]
    #[must_use]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// How many bytes are left.
    #[inline]
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Whether every byte has been read.
    #[inline]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not yet read, without consuming them.
    #[inline]
    #[must_use]
    pub fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    /// The whole slice the cursor was made over.
    #[must_use]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Checks that at least `n` bytes remain.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] at the current offset when fewer remain.
    #[inline]
    pub fn ensure(&self, n: usize) -> Result<(), UnexpectedEof> {
        if self.remaining() >= n {
            Ok(())
        } else {
            Err(self.eof(n))
        }
    }

    #[cold]
    fn eof(&self, needed: usize) -> UnexpectedEof {
        UnexpectedEof {
            offset: self.offset(),
            needed: needed as u64,
            available: self.remaining() as u64,
        }
    }

    /// Reads `n` bytes as a borrowed slice.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer remain.
    #[inline]
    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8], UnexpectedEof> {
        let rest = self.rest();
        match rest.get(..n) {
            Some(bytes) => {
                self.pos = self.pos.saturating_add(n);
                Ok(bytes)
            }
            None => Err(self.eof(n)),
        }
    }

    /// Reads a fixed number of bytes as an array.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer remain.
    #[inline]
    pub fn read_array<const N: usize>(&mut self) -> Result<[u8; N], UnexpectedEof> {
        let rest = self.rest();
        match rest.first_chunk::<N>() {
            Some(a) => {
                self.pos = self.pos.saturating_add(N);
                Ok(*a)
            }
            None => Err(self.eof(N)),
        }
    }

    /// Skips `n` bytes.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer remain; nothing is skipped then.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Result<(), UnexpectedEof> {
        self.read_bytes(n).map(|_| ())
    }

    /// Reads `n` bytes as a new cursor whose offsets continue this one's.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer remain.
    pub fn sub_cursor(&mut self, n: usize) -> Result<Cursor<'a>, UnexpectedEof> {
        let base = self.offset().0;
        let data = self.read_bytes(n)?;
        Ok(Cursor { data, pos: 0, base })
    }

    /// Borrows a zerocopy struct (one whose fields are byte-order-aware integer types).
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than `size_of::<T>()` bytes remain.
    #[inline]
    pub fn read_ref<T>(&mut self) -> Result<&'a T, UnexpectedEof>
    where
        T: FromBytes + KnownLayout + Immutable + Unaligned,
    {
        match T::ref_from_prefix(self.rest()) {
            Ok((value, _)) => {
                self.pos = self.pos.saturating_add(core::mem::size_of::<T>());
                Ok(value)
            }
            Err(_) => Err(self.eof(core::mem::size_of::<T>())),
        }
    }

    /// Borrows `count` consecutive zerocopy structs.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than `count * size_of::<T>()` bytes remain (also when that
    /// product overflows).
    pub fn read_slice<T>(&mut self, count: usize) -> Result<&'a [T], UnexpectedEof>
    where
        T: FromBytes + Immutable + Unaligned,
    {
        let size = count.saturating_mul(core::mem::size_of::<T>());
        self.ensure(size)?;
        match <[T]>::ref_from_prefix_with_elems(self.rest(), count) {
            Ok((values, _)) => {
                self.pos = self.pos.saturating_add(size);
                Ok(values)
            }
            Err(_) => Err(self.eof(size)),
        }
    }

    /// Reads (copies) a zerocopy value.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than `size_of::<T>()` bytes remain.
    #[inline]
    pub fn read_copy<T: FromBytes>(&mut self) -> Result<T, UnexpectedEof> {
        match T::read_from_prefix(self.rest()) {
            Ok((value, _)) => {
                self.pos = self.pos.saturating_add(core::mem::size_of::<T>());
                Ok(value)
            }
            Err(_) => Err(self.eof(core::mem::size_of::<T>())),
        }
    }

    /// Looks at the next byte without consuming it.
    #[inline]
    #[must_use]
    pub fn peek_u8(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    read_int! {
        /// Reads a `u8`.
        read_u8, u8, from_le_bytes;
        /// Reads a little-endian `u16`.
        read_u16_le, u16, from_le_bytes;
        /// Reads a big-endian `u16`.
        read_u16_be, u16, from_be_bytes;
        /// Reads a little-endian `u32`.
        read_u32_le, u32, from_le_bytes;
        /// Reads a big-endian `u32`.
        read_u32_be, u32, from_be_bytes;
        /// Reads a little-endian `u64`.
        read_u64_le, u64, from_le_bytes;
        /// Reads a big-endian `u64`.
        read_u64_be, u64, from_be_bytes;
    }

    /// Reads a `u16` in the byte order given at run time.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than 2 bytes remain.
    #[inline]
    pub fn read_u16(&mut self, big_endian: bool) -> Result<u16, UnexpectedEof> {
        if big_endian {
            self.read_u16_be()
        } else {
            self.read_u16_le()
        }
    }

    /// Reads a `u32` in the byte order given at run time.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than 4 bytes remain.
    #[inline]
    pub fn read_u32(&mut self, big_endian: bool) -> Result<u32, UnexpectedEof> {
        if big_endian {
            self.read_u32_be()
        } else {
            self.read_u32_le()
        }
    }

    /// Reads a `u64` in the byte order given at run time.
    ///
    /// # Errors
    ///
    /// [`UnexpectedEof`] when fewer than 8 bytes remain.
    #[inline]
    pub fn read_u64(&mut self, big_endian: bool) -> Result<u64, UnexpectedEof> {
        if big_endian {
            self.read_u64_be()
        } else {
            self.read_u64_le()
        }
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;
    use zerocopy::big_endian::U32 as BeU32;
    use zerocopy::little_endian::U16;

    #[derive(Debug, FromBytes, KnownLayout, Immutable, Unaligned)]
    #[repr(C)]
    struct Pair {
        a: U16,
        b: BeU32,
    }

    #[test]
    fn reads_in_both_byte_orders() {
        let data: Vec<u8> = (1..=21).collect();
        let mut c = Cursor::new(&data);
        assert_eq!(c.read_u8().unwrap(), 1);
        assert_eq!(c.read_u16_le().unwrap(), 0x0302);
        assert_eq!(c.read_u16_be().unwrap(), 0x0405);
        assert_eq!(c.read_u32_le().unwrap(), 0x0908_0706);
        assert_eq!(c.read_u32(true).unwrap(), 0x0a0b_0c0d);
        assert_eq!(c.offset(), Offset(13));
        assert_eq!(c.read_u64_be().unwrap(), 0x0e0f_1011_1213_1415);
        assert!(c.is_empty());
        let e = c.read_u8().unwrap_err();
        assert_eq!(
            e,
            UnexpectedEof {
                offset: Offset(21),
                needed: 1,
                available: 0
            }
        );
    }

    #[test]
    fn zerocopy_structs_and_sub_cursors() {
        let data = [0xff, 0x34, 0x12, 0, 0, 0, 7, 0xaa];
        let mut c = Cursor::with_base(&data, 0x1000);
        c.skip(1).unwrap();
        let mut sub = c.sub_cursor(6).unwrap();
        assert_eq!(sub.base(), Offset(0x1001));
        let p = sub.read_ref::<Pair>().unwrap();
        assert_eq!((p.a.get(), p.b.get()), (0x1234, 7));
        assert_eq!(sub.read_u8().unwrap_err().offset, Offset(0x1007));
        assert_eq!(
            c.read_copy::<Pair>().unwrap_err(),
            UnexpectedEof {
                offset: Offset(0x1007),
                needed: 6,
                available: 1
            }
        );
        let words = Cursor::new(&data).read_slice::<U16>(4).unwrap();
        assert_eq!(words[1].get(), 0x0012);
        assert!(Cursor::new(&data).read_slice::<U16>(usize::MAX).is_err());
    }

    #[derive(Clone, Debug)]
    enum Op {
        U8,
        U16(bool),
        U32(bool),
        U64(bool),
        Bytes(usize),
        Skip(usize),
        Sub(usize),
    }

    impl quickcheck::Arbitrary for Op {
        fn arbitrary(g: &mut quickcheck::Gen) -> Self {
            let n = usize::arbitrary(g) % 40;
            match u8::arbitrary(g) % 7 {
                0 => Op::U8,
                1 => Op::U16(bool::arbitrary(g)),
                2 => Op::U32(bool::arbitrary(g)),
                3 => Op::U64(bool::arbitrary(g)),
                4 => Op::Bytes(n),
                5 => Op::Skip(if bool::arbitrary(g) { n } else { usize::MAX }),
                _ => Op::Sub(n),
            }
        }
    }

    quickcheck! {
        /// Any sequence of reads: never panics, a read succeeds exactly when enough bytes are
        /// left, successful reads return the bytes at the absolute offset reported, and a
        /// failed read reports the right offset and consumes nothing.
        fn cursor_matches_model(data: Vec<u8>, base: u32, ops: Vec<Op>) -> bool {
            let base = u64::from(base);
            let mut c = Cursor::with_base(&data, base);
            let mut pos = 0usize; // the model
            for op in ops {
                let before = c.offset();
                if before.0 != base + pos as u64 { return false; }
                let (n, got): (usize, Result<Vec<u8>, UnexpectedEof>) = match op {
                    Op::U8 => (1, c.read_u8().map(|v| vec![v])),
                    Op::U16(be) => (2, c.read_u16(be).map(|v| if be { v.to_be_bytes().to_vec() } else { v.to_le_bytes().to_vec() })),
                    Op::U32(be) => (4, c.read_u32(be).map(|v| if be { v.to_be_bytes().to_vec() } else { v.to_le_bytes().to_vec() })),
                    Op::U64(be) => (8, c.read_u64(be).map(|v| if be { v.to_be_bytes().to_vec() } else { v.to_le_bytes().to_vec() })),
                    Op::Bytes(n) => (n, c.read_bytes(n).map(<[u8]>::to_vec)),
                    Op::Skip(n) => (n, c.skip(n).map(|()| data.get(pos..pos.saturating_add(n)).unwrap_or_default().to_vec())),
                    Op::Sub(n) => (n, c.sub_cursor(n).map(|s| {
                        assert_eq!(s.base(), before);
                        s.rest().to_vec()
                    })),
                };
                let left = data.len() - pos;
                match got {
                    Ok(bytes) => {
                        if n > left || bytes != data[pos..pos + n] { return false; }
                        pos += n;
                    }
                    Err(e) => {
                        if n <= left || e.offset != before || e.needed != n as u64 || e.available != left as u64 {
                            return false;
                        }
                    }
                }
            }
            c.remaining() == data.len() - pos
        }
    }
}
