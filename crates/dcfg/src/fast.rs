//! Header-row tables read without per-cell indirection, for the large tables (basic blocks,
//! edges, routines, loops, source lines, symbols).
//!
//! The header row is mapped once to column slots; every data row is then read element by
//! element straight into its struct. Same rules as [`trace_core::json::Table`]: columns by
//! name in any order, unknown columns skipped, short rows leave the trailing optional
//! columns missing, errors name the row and column (the header is row 0).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, SeqAccess, Visitor};
use smallvec::SmallVec;
use trace_core::json::JsonU64;

use crate::model::{BasicBlock, Counts, Edge, Loop, Routine, RoutineNode, SourceLine, Symbol};

/// Unknown column.
const SKIP: u8 = u8::MAX;

/// A row type read by [`FastTable`].
pub(crate) trait FastRow: Default {
    /// The known column names (index = slot).
    const COLUMNS: &'static [&'static str];
    /// Slots that must have a value (bit i = slot i).
    const REQUIRED: u32;
    /// Reads the next element of `seq` into slot `slot`; `Ok(false)` if the row has ended.
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error>;
}

/// Alternative spellings of column names (the specification's own example writes "SIZE ").
fn alias(name: &str) -> &str {
    name.trim_end_matches(' ')
}

fn u64_el<'de, A: SeqAccess<'de>>(seq: &mut A, slot: &mut u64) -> Result<bool, A::Error> {
    Ok(match seq.next_element::<JsonU64>()? {
        Some(v) => {
            *slot = v.0;
            true
        }
        None => false,
    })
}

fn opt_el<'de, A: SeqAccess<'de>>(seq: &mut A, slot: &mut Option<u64>) -> Result<bool, A::Error> {
    Ok(match seq.next_element::<Option<JsonU64>>()? {
        Some(v) => {
            *slot = v.map(|x| x.0);
            true
        }
        None => false,
    })
}

fn vec_el<'de, A: SeqAccess<'de>>(seq: &mut A, slot: &mut Vec<u64>) -> Result<bool, A::Error> {
    Ok(match seq.next_element_seed(OptU64Vec)? {
        Some(v) => {
            *slot = v.unwrap_or_default();
            true
        }
        None => false,
    })
}

/// An array of integers (or `null`, read as empty).
struct OptU64Vec;

impl<'de> DeserializeSeed<'de> for OptU64Vec {
    type Value = Option<Vec<u64>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for OptU64Vec {
    type Value = Option<Vec<u64>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of integers")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(U64s).map(Some)
    }
}

struct U64s;

impl<'de> Visitor<'de> for U64s {
    type Value = Vec<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of integers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u64>, A::Error> {
        let mut v = Vec::new();
        while let Some(JsonU64(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(v)
    }
}

/// Per-thread counts, into a `SmallVec` (no allocation for up to 2 threads).
struct CountsSeed;

impl<'de> DeserializeSeed<'de> for CountsSeed {
    type Value = Counts;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Counts, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for CountsSeed {
    type Value = Counts;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of integers")
    }
    fn visit_none<E: de::Error>(self) -> Result<Counts, E> {
        Ok(Counts::new())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Counts, E> {
        Ok(Counts::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Counts, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Counts, A::Error> {
        let mut v = Counts::new();
        while let Some(JsonU64(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(v)
    }
}

/// A nested fast table as a value (routine NODES and LOOPS).
fn table_el<'de, A: SeqAccess<'de>, T: FastRow>(
    seq: &mut A,
    slot: &mut Vec<T>,
) -> Result<bool, A::Error> {
    Ok(match seq.next_element_seed(OptTable::<T>(PhantomData))? {
        Some(v) => {
            *slot = v.unwrap_or_default();
            true
        }
        None => false,
    })
}

fn opt_table_el<'de, A: SeqAccess<'de>, T: FastRow>(
    seq: &mut A,
    slot: &mut Option<Vec<T>>,
) -> Result<bool, A::Error> {
    Ok(match seq.next_element_seed(OptTable::<T>(PhantomData))? {
        Some(v) => {
            *slot = v;
            true
        }
        None => false,
    })
}

struct OptTable<T>(PhantomData<fn() -> T>);

impl<'de, T: FastRow> DeserializeSeed<'de> for OptTable<T> {
    type Value = Option<Vec<T>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: FastRow> Visitor<'de> for OptTable<T> {
    type Value = Option<Vec<T>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        FastTable::<T>::new().deserialize(d).map(Some)
    }
}

/// Reads a whole table of `T` rows.
pub(crate) struct FastTable<T>(PhantomData<fn() -> T>);

impl<T> FastTable<T> {
    pub(crate) fn new() -> Self {
        FastTable(PhantomData)
    }
}

impl<'de, T: FastRow> DeserializeSeed<'de> for FastTable<T> {
    type Value = Vec<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: FastRow> Visitor<'de> for FastTable<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table: an array whose first element is an array of column names")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let slots = seq
            .next_element_seed(HeaderSeed {
                columns: T::COLUMNS,
            })
            .map_err(|e| de::Error::custom(format_args!("table header row: {e}")))?
            .ok_or_else(|| de::Error::custom("table has no header row"))?;
        let mut have = 0u32;
        for &s in &slots {
            if s != SKIP {
                have |= 1u32.checked_shl(u32::from(s)).unwrap_or(0);
            }
        }
        if have & T::REQUIRED != T::REQUIRED {
            let missing = T::COLUMNS
                .iter()
                .enumerate()
                .find(|(i, _)| {
                    T::REQUIRED & 1u32.checked_shl(*i as u32).unwrap_or(0) != 0
                        && have & 1u32.checked_shl(*i as u32).unwrap_or(0) == 0
                })
                .map_or("?", |(_, n)| n);
            return Err(de::Error::custom(format_args!(
                "table header row: no column {missing}"
            )));
        }
        let mut rows = Vec::new();
        let mut row: u64 = 1;
        while let Some(r) = seq.next_element_seed(RowSeed::<T> {
            slots: &slots,
            row,
            marker: PhantomData,
        })? {
            rows.push(r);
            row = row.saturating_add(1);
        }
        rows.shrink_to_fit();
        Ok(rows)
    }
}

struct HeaderSeed {
    columns: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for HeaderSeed {
    type Value = SmallVec<[u8; 8]>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for HeaderSeed {
    type Value = SmallVec<[u8; 8]>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of column names")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut slots = SmallVec::new();
        while let Some(slot) = seq.next_element_seed(ColumnName {
            columns: self.columns,
        })? {
            if slots.len() >= 64 {
                return Err(de::Error::custom("more than 64 columns"));
            }
            slots.push(slot);
        }
        Ok(slots)
    }
}

struct ColumnName {
    columns: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for ColumnName {
    type Value = u8;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u8, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for ColumnName {
    type Value = u8;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a column name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u8, E> {
        let v = alias(v);
        Ok(self
            .columns
            .iter()
            .position(|c| *c == v)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(SKIP))
    }
}

struct RowSeed<'s, T> {
    slots: &'s [u8],
    row: u64,
    marker: PhantomData<fn() -> T>,
}

impl<'de, T: FastRow> DeserializeSeed<'de> for RowSeed<'_, T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: FastRow> Visitor<'de> for RowSeed<'_, T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table row {}: an array of values", self.row)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        let mut value = T::default();
        let mut got = 0u32;
        let mut ended = false;
        let mut values = 0usize;
        for (col, &slot) in self.slots.iter().enumerate() {
            let name = T::COLUMNS.get(usize::from(slot)).copied().unwrap_or("?");
            let present = if slot == SKIP {
                seq.next_element::<IgnoredAny>().map(|v| v.is_some())
            } else {
                value.read(slot, &mut seq)
            }
            .map_err(|e| {
                de::Error::custom(format_args!(
                    "table row {}, column {col} ({name}): {e}",
                    self.row
                ))
            })?;
            if !present {
                ended = true;
                break;
            }
            values = values.saturating_add(1);
            if slot != SKIP {
                got |= 1u32.checked_shl(u32::from(slot)).unwrap_or(0);
            }
        }
        if got & T::REQUIRED != T::REQUIRED {
            let (col, name) = self
                .slots
                .iter()
                .enumerate()
                .find(|&(_, &s)| {
                    s != SKIP
                        && T::REQUIRED & 1u32.checked_shl(u32::from(s)).unwrap_or(0) != 0
                        && got & 1u32.checked_shl(u32::from(s)).unwrap_or(0) == 0
                })
                .map_or((0, "?"), |(c, &s)| {
                    (c, T::COLUMNS.get(usize::from(s)).copied().unwrap_or("?"))
                });
            return Err(de::Error::custom(format_args!(
                "table row {}, column {col} ({name}): missing (the row has only {values} values)",
                self.row
            )));
        }
        if !ended && seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(format_args!(
                "table row {}: more values than the {} columns of the header",
                self.row,
                self.slots.len()
            )));
        }
        Ok(value)
    }
}

impl FastRow for BasicBlock {
    const COLUMNS: &'static [&'static str] = &crate::raw::BLOCK_COLUMNS;
    const REQUIRED: u32 = 0b1111;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.id),
            1 => u64_el(seq, &mut self.addr_offset),
            2 => u64_el(seq, &mut self.size),
            3 => u64_el(seq, &mut self.num_instrs),
            4 => opt_el(seq, &mut self.last_instr_offset),
            _ => opt_el(seq, &mut self.count),
        }
    }
}

impl FastRow for Edge {
    const COLUMNS: &'static [&'static str] = &crate::raw::EDGE_COLUMNS;
    const REQUIRED: u32 = 0b1111;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.id),
            1 => u64_el(seq, &mut self.source),
            2 => u64_el(seq, &mut self.target),
            3 => u64_el(seq, &mut self.type_id),
            _ => Ok(match seq.next_element_seed(CountsSeed)? {
                Some(c) => {
                    self.counts = c;
                    true
                }
                None => false,
            }),
        }
    }
}

impl FastRow for RoutineNode {
    const COLUMNS: &'static [&'static str] = &crate::raw::ROUTINE_NODE_COLUMNS;
    const REQUIRED: u32 = 0b11;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.id),
            _ => u64_el(seq, &mut self.idom),
        }
    }
}

impl FastRow for Loop {
    const COLUMNS: &'static [&'static str] = &crate::raw::LOOP_COLUMNS;
    const REQUIRED: u32 = 0b1;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.head),
            1 => vec_el(seq, &mut self.back_edge_sources),
            2 => vec_el(seq, &mut self.nodes),
            _ => opt_el(seq, &mut self.parent),
        }
    }
}

impl FastRow for Routine {
    const COLUMNS: &'static [&'static str] = &crate::raw::ROUTINE_COLUMNS;
    const REQUIRED: u32 = 0b1;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.entry),
            1 => vec_el(seq, &mut self.exits),
            2 => table_el(seq, &mut self.nodes),
            _ => opt_table_el(seq, &mut self.loops),
        }
    }
}

impl FastRow for SourceLine {
    const COLUMNS: &'static [&'static str] = &crate::raw::SOURCE_COLUMNS;
    const REQUIRED: u32 = 0b111;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => u64_el(seq, &mut self.file_name_id),
            1 => u64_el(seq, &mut self.line),
            2 => u64_el(seq, &mut self.addr_offset),
            3 => opt_el(seq, &mut self.size),
            _ => opt_el(seq, &mut self.num_instrs),
        }
    }
}

impl FastRow for Symbol {
    const COLUMNS: &'static [&'static str] = &crate::raw::SYMBOL_COLUMNS;
    const REQUIRED: u32 = 0b11;
    fn read<'de, A: SeqAccess<'de>>(&mut self, slot: u8, seq: &mut A) -> Result<bool, A::Error> {
        match slot {
            0 => Ok(match seq.next_element::<String>()? {
                Some(s) => {
                    self.name = s;
                    true
                }
                None => false,
            }),
            1 => u64_el(seq, &mut self.addr_offset),
            _ => opt_el(seq, &mut self.size),
        }
    }
}
