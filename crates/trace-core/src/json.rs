//! JSON helpers for the DCFG family of formats.
//!
//! - [`JsonU64`] / [`JsonI64`]: integers that deserialize from a JSON number **or** a C-style
//!   hex string (`"0x400000"`), exactly. The DCFG specification allows hex strings for any
//!   integer, and real files have node ids above 2^53, so a value never passes through `f64`:
//!   a floating-point number is an error.
//! - [`HexU64`]: the same on input, but serialized as a `"0x…"` string (addresses).
//! - [`Table`]: a header-row table, `[["A","B"],[1,2],…]`, deserialized into a `Vec<T>` of
//!   structs by column **name** (`#[serde(rename = "A")]`), not position. Rows shorter than
//!   the header leave trailing columns missing (use `Option` fields for them), unknown columns
//!   are ignored, and errors name the row and column.
//!
//! ```
//! use trace_core::json::{JsonU64, Table};
//!
//! #[derive(serde::Deserialize)]
//! struct Edge {
//!     #[serde(rename = "EDGE_ID")]
//!     id: JsonU64,
//!     #[serde(rename = "COUNT")]
//!     count: Option<JsonU64>,
//! }
//!
//! let json = r#"[["COUNT","EDGE_ID","FUTURE"],[7,"0x10",null],[]]"#;
//! let err = serde_json::from_str::<Table<Edge>>(json).err().unwrap();
//! assert!(err.to_string().starts_with("table row 2: missing field `EDGE_ID`"));
//!
//! let Table(edges) = serde_json::from_str::<Table<Edge>>(r#"[["COUNT","EDGE_ID"],[7,"0x10"],[null,3]]"#)?;
//! assert_eq!((edges[0].id.0, edges[0].count.map(|c| c.0)), (16, Some(7)));
//! # Ok::<(), serde_json::Error>(())
//! ```

use core::fmt;
use core::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Parses a decimal or `0x`/`0X`-prefixed hex string as a `u64`, exactly.
///
/// Surrounding ASCII whitespace is allowed; signs, underscores and empty digit strings are
/// not.
#[must_use]
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim_ascii();
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Parses an optionally `-`-signed decimal or hex string as an `i64`, exactly.
#[must_use]
pub fn parse_i64(s: &str) -> Option<i64> {
    let s = s.trim_ascii();
    match s.strip_prefix('-') {
        Some(rest) => {
            let magnitude = parse_u64(rest)?;
            0i64.checked_sub_unsigned(magnitude)
        }
        None => i64::try_from(parse_u64(s)?).ok(),
    }
}

struct U64Visitor;

impl Visitor<'_> for U64Visitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an unsigned integer or a hex string such as \"0x400000\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_u64(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

struct I64Visitor;

impl Visitor<'_> for I64Visitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer or a hex string such as \"0x400000\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        parse_i64(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

/// Deserializes a `u64` from a JSON number or a decimal/hex string, for
/// `#[serde(deserialize_with = "trace_core::json::deserialize_u64")]`.
///
/// # Errors
///
/// A floating-point number, a negative number or a string that is not an integer.
pub fn deserialize_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(U64Visitor)
}

/// Deserializes an `i64` from a JSON number or a decimal/hex string.
///
/// # Errors
///
/// A floating-point number, a number out of range or a string that is not an integer.
pub fn deserialize_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(I64Visitor)
}

/// An unsigned integer read from a JSON number or a hex/decimal string; written as a number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JsonU64(pub u64);

/// A signed integer read from a JSON number or a hex/decimal string; written as a number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JsonI64(pub i64);

/// An unsigned integer read like [`JsonU64`] but written as a `"0x…"` string, the way Intel's
/// tools write addresses and offsets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HexU64(pub u64);

impl<'de> Deserialize<'de> for JsonU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_u64(d).map(JsonU64)
    }
}

impl<'de> Deserialize<'de> for JsonI64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_i64(d).map(JsonI64)
    }
}

impl<'de> Deserialize<'de> for HexU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_u64(d).map(HexU64)
    }
}

impl Serialize for JsonU64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl Serialize for JsonI64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(self.0)
    }
}

impl Serialize for HexU64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

/// A header-row table: the first row names the columns, every later row holds one record,
/// deserialized into `T` by column name. See the [module documentation](self).
///
/// Row numbers in errors count the header as row 0, so the first record is row 1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Table<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut rows = Vec::new();
        for_each_row(d, |row| {
            rows.push(row);
            Ok(())
        })?;
        Ok(Table(rows))
    }
}

/// Deserializes a header-row table and hands each record to `f` as soon as it is read, so a
/// caller can aggregate a large table without holding its rows. Returns the column names.
///
/// # Errors
///
/// The deserializer's error, naming the row (and the column where one is to blame), or an
/// error returned by `f`.
pub fn for_each_row<'de, D, T, F>(d: D, f: F) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
    F: FnMut(T) -> Result<(), String>,
{
    d.deserialize_seq(TableVisitor {
        f,
        marker: PhantomData,
    })
}

struct TableVisitor<T, F> {
    f: F,
    marker: PhantomData<fn() -> T>,
}

impl<'de, T, F> Visitor<'de> for TableVisitor<T, F>
where
    T: Deserialize<'de>,
    F: FnMut(T) -> Result<(), String>,
{
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table: an array whose first element is an array of column names")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let header: Vec<String> = seq
            .next_element()
            .map_err(|e| de::Error::custom(format_args!("table header row: {e}")))?
            .ok_or_else(|| de::Error::custom("table has no header row"))?;
        let mut row: u64 = 1;
        while let Some(value) = seq.next_element_seed(RowSeed {
            header: &header,
            row,
            marker: PhantomData,
        })? {
            (self.f)(value).map_err(|e| de::Error::custom(format_args!("table row {row}: {e}")))?;
            row = row.saturating_add(1);
        }
        Ok(header)
    }
}

struct RowSeed<'h, T> {
    header: &'h [String],
    row: u64,
    marker: PhantomData<fn() -> T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for RowSeed<'_, T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for RowSeed<'_, T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table row {}: an array of values", self.row)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        let mut map = RowMap {
            seq: &mut seq,
            header: self.header,
            row: self.row,
            col: 0,
            ended: false,
            located: false,
        };
        let value = T::deserialize(de::value::MapAccessDeserializer::new(&mut map));
        let (col, ended, located) = (map.col, map.ended, map.located);
        let value = match value {
            Ok(v) => v,
            Err(e) if located => return Err(e),
            Err(e) => {
                return Err(de::Error::custom(format_args!(
                    "table row {}: {e}",
                    self.row
                )));
            }
        };
        if !ended && seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format_args!(
                "table row {}, column {}: more values than the {} columns of the header",
                self.row,
                col,
                self.header.len()
            )));
        }
        Ok(value)
    }
}

/// Presents a row (a JSON array) to `T` as a map from column name to value.
struct RowMap<'a, 'h, A> {
    seq: &'a mut A,
    header: &'h [String],
    row: u64,
    col: usize,
    /// The row ran out of values (a short row).
    ended: bool,
    /// An error was already given its row and column.
    located: bool,
}

impl<'de, A: SeqAccess<'de>> MapAccess<'de> for &mut RowMap<'_, '_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if self.ended {
            return Ok(None);
        }
        match self.header.get(self.col) {
            Some(name) => seed
                .deserialize(de::value::StrDeserializer::new(name))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let col = self.col;
        self.col = col.saturating_add(1);
        let name = self.header.get(col).map_or("?", String::as_str);
        let mut slot = Some(seed);
        let err = match self.seq.next_element_seed(TakeSeed(&mut slot)) {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {
                // A short row: the announced column has no value; an `Option` field takes
                // `None`, anything else is an error naming the column.
                self.ended = true;
                let missing = MissingValue {
                    row: self.row,
                    col,
                    name,
                    marker: PhantomData,
                };
                match slot.take() {
                    Some(seed) => match seed.deserialize(missing) {
                        Ok(v) => return Ok(v),
                        Err(e) => {
                            self.located = true;
                            return Err(e);
                        }
                    },
                    None => return Err(de::Error::custom("table row: value seed used twice")),
                }
            }
            Err(e) => e,
        };
        self.located = true;
        Err(de::Error::custom(format_args!(
            "table row {}, column {col} ({name}): {err}",
            self.row
        )))
    }
}

/// Hands a seed to `next_element_seed` without losing it when the sequence has ended.
struct TakeSeed<'s, V>(&'s mut Option<V>);

impl<'de, V: DeserializeSeed<'de>> DeserializeSeed<'de> for TakeSeed<'_, V> {
    type Value = V::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        match self.0.take() {
            Some(seed) => seed.deserialize(d),
            None => Err(de::Error::custom("table row: value seed used twice")),
        }
    }
}

/// The value of a column a short row does not have: `None` for an `Option`, an error
/// naming the row and column for anything else.
struct MissingValue<'n, E> {
    row: u64,
    col: usize,
    name: &'n str,
    marker: PhantomData<E>,
}

impl<'de, E: de::Error> Deserializer<'de> for MissingValue<'_, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, E> {
        Err(E::custom(format_args!(
            "table row {}, column {} ({}): missing (the row has only {} values)",
            self.row, self.col, self.name, self.col
        )))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    // An unknown column needs no value.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier
    }
}

/// Fuzzing entry point: integers and a table of arbitrary JSON text. Must never panic.
#[doc(hidden)]
pub fn fuzz_table(data: &[u8]) {
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Row {
        #[serde(rename = "A")]
        a: JsonU64,
        #[serde(rename = "B", default)]
        b: Option<JsonI64>,
        #[serde(rename = "C", default)]
        c: Option<HexU64>,
    }
    let _ = serde_json::from_slice::<Table<Row>>(data);
    let _ = serde_json::from_slice::<Vec<JsonU64>>(data);
    if let Ok(s) = core::str::from_utf8(data) {
        let _ = (parse_u64(s), parse_i64(s));
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Row {
        #[serde(rename = "ID")]
        id: JsonU64,
        #[serde(rename = "DELTA")]
        delta: JsonI64,
        #[serde(rename = "NAME", default)]
        name: Option<String>,
        #[serde(rename = "PARENT", default)]
        parent: Option<JsonU64>,
    }

    fn table(json: &str) -> Result<Vec<Row>, String> {
        serde_json::from_str::<Table<Row>>(json)
            .map(|t| t.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn integers_from_numbers_and_strings() {
        let v: Vec<JsonU64> =
            serde_json::from_str(r#"[1, "0x400000", "0X1f", "42", 18446744073709551615]"#).unwrap();
        assert_eq!(
            v,
            [
                JsonU64(1),
                JsonU64(0x40_0000),
                JsonU64(31),
                JsonU64(42),
                JsonU64(u64::MAX)
            ]
        );
        // Above 2^53: exact, never through f64.
        let v: JsonU64 = serde_json::from_str("9007199254740993").unwrap();
        assert_eq!(v.0, 9_007_199_254_740_993);
        let v: Vec<JsonI64> =
            serde_json::from_str(r#"[-5, "-0x10", "0x7fffffffffffffff"]"#).unwrap();
        assert_eq!(v, [JsonI64(-5), JsonI64(-16), JsonI64(i64::MAX)]);
        for bad in [
            "1.5",
            "1e3",
            "-1",
            r#""0x""#,
            r#""12z""#,
            r#""""#,
            "18446744073709551616",
            "true",
        ] {
            assert!(serde_json::from_str::<JsonU64>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<JsonI64>("9223372036854775808").is_err());
        assert_eq!(
            serde_json::to_string(&HexU64(0x40_1000)).unwrap(),
            r#""0x401000""#
        );
        assert_eq!(serde_json::to_string(&JsonU64(7)).unwrap(), "7");
        assert_eq!(
            serde_json::from_str::<HexU64>(r#""0x401000""#).unwrap(),
            HexU64(0x40_1000)
        );
    }

    #[test]
    fn tables_map_by_header_name() {
        let rows =
            table(r#"[["NAME","DELTA","ID","UNKNOWN"],["a",-1,"0x10",[1,2]],["b","0x2",3]]"#)
                .unwrap();
        assert_eq!(
            rows[0],
            Row {
                id: JsonU64(16),
                delta: JsonI64(-1),
                name: Some("a".into()),
                parent: None
            }
        );
        assert_eq!(
            rows[1],
            Row {
                id: JsonU64(3),
                delta: JsonI64(2),
                name: Some("b".into()),
                parent: None
            }
        );
        // Short rows: trailing optional columns missing.
        let rows =
            table(r#"[["ID","DELTA","NAME","PARENT"],[1,2],[3,4,"x"],[5,6,"y",7]]"#).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.parent).collect::<Vec<_>>(),
            [None, None, Some(JsonU64(7))]
        );
        assert_eq!(rows[0].name, None);
        assert!(table(r#"[["ID","DELTA"]]"#).unwrap().is_empty());
    }

    #[test]
    fn table_errors_name_row_and_column() {
        let e = table(r#"[["ID","DELTA"],[1,2],[3,"x"]]"#).unwrap_err();
        assert!(
            e.starts_with("table row 2, column 1 (DELTA): invalid value"),
            "{e}"
        );
        let e = table(r#"[["ID","DELTA","NAME"],[1,2],[3]]"#).unwrap_err();
        assert!(
            e.starts_with("table row 2, column 1 (DELTA): missing"),
            "{e}"
        );
        let e = table(r#"[["ID","NAME"],[1,"a"]]"#).unwrap_err();
        assert!(e.starts_with("table row 1: missing field `DELTA`"), "{e}");
        let e = table(r#"[["ID","DELTA"],[1,2,3]]"#).unwrap_err();
        assert!(
            e.starts_with("table row 1, column 2: more values than the 2 columns"),
            "{e}"
        );
        let e = table(r#"[]"#).unwrap_err();
        assert!(e.starts_with("table has no header row"), "{e}");
        let e = table(r#"[[1,2]]"#).unwrap_err();
        assert!(e.starts_with("table header row:"), "{e}");
        let e = table(r#"[["ID","DELTA"],[1.5,2]]"#).unwrap_err();
        assert!(
            e.starts_with("table row 1, column 0 (ID): invalid type: floating point"),
            "{e}"
        );
    }

    #[test]
    fn for_each_row_streams_and_reports_callback_errors() {
        let mut de = serde_json::Deserializer::from_str(r#"[["ID","DELTA"],[1,2],[3,4]]"#);
        let mut sum = 0;
        let header = for_each_row(&mut de, |r: Row| {
            sum += r.id.0;
            if r.id.0 == 3 {
                Err("three".to_owned())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(header.to_string().starts_with("table row 2: three"));
        assert_eq!(sum, 4);
    }

    quickcheck! {
        fn hex_and_decimal_agree(v: u64) -> bool {
            let forms = [v.to_string(), format!("\"{v}\""), format!("\"{v:#x}\""), format!("\"0X{v:X}\"")];
            forms.iter().all(|f| serde_json::from_str::<JsonU64>(f).ok() == Some(JsonU64(v)))
        }

        fn signed_hex_and_decimal_agree(v: i64) -> bool {
            let hex = if v < 0 { format!("\"-{:#x}\"", v.unsigned_abs()) } else { format!("\"{v:#x}\"") };
            [v.to_string(), format!("\"{v}\""), hex].iter().all(|f| serde_json::from_str::<JsonI64>(f).ok() == Some(JsonI64(v)))
        }

        /// Columns in any order, rows of any length >= the required columns: every row maps
        /// back to the values written under its column names.
        fn tables_map_any_column_order(rows: Vec<(u64, i64, Option<u64>)>, rotate: u8, short: bool) -> bool {
            let mut cols = vec!["ID", "DELTA", "PARENT", "EXTRA"];
            let r = usize::from(rotate) % cols.len();
            cols.rotate_left(r);
            let mut json = format!("[{}", serde_json::to_string(&cols).unwrap());
            for (id, delta, parent) in &rows {
                let cells: Vec<String> = cols.iter().map(|c| match *c {
                    "ID" => format!("\"{id:#x}\""),
                    "DELTA" => delta.to_string(),
                    "PARENT" => parent.map_or("null".to_owned(), |p| p.to_string()),
                    _ => "{\"x\":[1]}".to_owned(),
                }).collect();
                // Drop trailing optional columns when asked (only when they are not required).
                let mut keep = cells.len();
                while short && keep > 0 && matches!(cols[keep - 1], "PARENT" | "EXTRA") { keep -= 1; }
                json.push_str(&format!(",[{}]", cells[..keep].join(",")));
            }
            json.push(']');
            let parsed = serde_json::from_str::<Table<Row>>(&json).unwrap().0;
            parsed.len() == rows.len() && parsed.iter().zip(&rows).all(|(p, (id, delta, parent))| {
                let dropped = short && cols.iter().rposition(|c| *c == "PARENT").unwrap() >= cols.iter().rposition(|c| !matches!(*c, "PARENT" | "EXTRA")).unwrap();
                p.id.0 == *id && p.delta.0 == *delta && p.parent.map(|x| x.0) == if dropped { None } else { *parent }
            })
        }

        fn parse_never_panics(s: String) -> bool {
            let _ = parse_u64(&s);
            let _ = parse_i64(&s);
            let _ = serde_json::from_str::<Table<Row>>(&s);
            true
        }
    }
}
