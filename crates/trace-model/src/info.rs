//! The summary of a trace (`tracekit info`) as one value, rendered as text or as JSON from
//! the same tree, so that the two cannot drift apart.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::ser::{SerializeMap, SerializeSeq};

/// One value of a summary: a scalar, a list, or a map whose keys keep their order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// Not known or not present (`null`; `-` in text).
    Null,
    /// A boolean.
    Bool(bool),
    /// An unsigned integer, in decimal.
    UInt(u64),
    /// A signed integer, in decimal.
    Int(i64),
    /// An address or other bit pattern, as `0x…` (a JSON string).
    Hex(u64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<Value>),
    /// A map with keys in the order they were added.
    Map(Info),
}

/// A summary: keys in the order they were added, values of any [`Value`] kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    entries: Vec<(Cow<'static, str>, Value)>,
}

impl Info {
    /// An empty map.
    #[must_use]
    pub fn new() -> Info {
        Info::default()
    }

    /// Adds `key: value` and returns the map (builder style).
    #[must_use]
    pub fn with(mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) -> Info {
        self.push(key, value);
        self
    }

    /// Adds `key: value`.
    pub fn push(&mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) {
        self.entries.push((key.into(), value.into()));
    }

    /// The value of `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// The summary as one line of JSON.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The summary as indented `key: value` lines: nested maps indented by two spaces, lists
    /// of scalars on one line, lists of maps as `- ` items.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        text_map(&mut out, self, 0);
        out
    }
}

impl Value {
    fn is_scalar(&self) -> bool {
        !matches!(self, Value::List(_) | Value::Map(_))
    }

    /// The value as text, for a scalar.
    fn scalar_text(&self) -> String {
        match self {
            Value::Null => "-".to_owned(),
            Value::Bool(b) => b.to_string(),
            Value::UInt(n) => n.to_string(),
            Value::Int(n) => n.to_string(),
            Value::Hex(n) => format!("{n:#x}"),
            Value::Str(s) if s.is_empty() => "\"\"".to_owned(),
            Value::Str(s) => s.clone(),
            Value::List(_) | Value::Map(_) => String::new(),
        }
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn text_map(out: &mut String, map: &Info, depth: usize) {
    for (k, v) in &map.entries {
        indent(out, depth);
        let _ = write!(out, "{k}:");
        text_value(out, v, depth);
    }
}

/// Writes what follows `key:` (the rest of that line and any nested lines).
fn text_value(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Map(m) if m.entries.is_empty() => out.push_str(" -\n"),
        Value::Map(m) => {
            out.push('\n');
            text_map(out, m, depth.saturating_add(1));
        }
        Value::List(items) if items.is_empty() => out.push_str(" -\n"),
        Value::List(items) if items.iter().all(Value::is_scalar) => {
            let parts: Vec<String> = items.iter().map(Value::scalar_text).collect();
            let _ = writeln!(out, " {}", parts.join(", "));
        }
        Value::List(items) => {
            out.push('\n');
            for item in items {
                indent(out, depth.saturating_add(1));
                out.push('-');
                match item {
                    // A map of scalars on the item's line; other maps below it.
                    Value::Map(m) if m.entries.iter().all(|(_, v)| v.is_scalar()) => {
                        let parts: Vec<String> = m
                            .entries
                            .iter()
                            .map(|(k, v)| format!("{k}: {}", v.scalar_text()))
                            .collect();
                        let _ = writeln!(out, " {}", parts.join(", "));
                    }
                    Value::Map(m) => {
                        out.push('\n');
                        text_map(out, m, depth.saturating_add(2));
                    }
                    other => text_value(out, other, depth.saturating_add(1)),
                }
            }
        }
        scalar => {
            let _ = writeln!(out, " {}", scalar.scalar_text());
        }
    }
}

impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::UInt(n) => s.serialize_u64(*n),
            Value::Int(n) => s.serialize_i64(*n),
            Value::Hex(n) => s.serialize_str(&format!("{n:#x}")),
            Value::Str(v) => s.serialize_str(v),
            Value::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            Value::Map(m) => m.serialize(s),
        }
    }
}

impl serde::Serialize for Info {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k.as_ref(), v)?;
        }
        map.end()
    }
}

macro_rules! from_uint {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::UInt(v as u64)
            }
        }
    )*};
}
from_uint!(u8, u16, u32, u64, usize);

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(i64::from(v))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}

impl From<Info> for Value {
    fn from(v: Info) -> Value {
        Value::Map(v)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::List(v.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// An address or bit pattern shown as `0x…` in both renderings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex(pub u64);

impl From<Hex> for Value {
    fn from(v: Hex) -> Value {
        Value::Hex(v.0)
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    #[derive(Clone, Debug)]
    struct Tree(Info);

    fn value(g: &mut Gen, depth: u32) -> Value {
        let pick = u8::arbitrary(g) % if depth == 0 { 6 } else { 8 };
        match pick {
            0 => Value::Null,
            1 => Value::Bool(bool::arbitrary(g)),
            2 => Value::UInt(u64::arbitrary(g)),
            3 => Value::Int(i64::arbitrary(g)),
            4 => Value::Hex(u64::arbitrary(g)),
            5 => Value::Str(String::arbitrary(g).replace(['\n', '\r'], " ")),
            6 => Value::List(
                (0..u8::arbitrary(g) % 4)
                    .map(|_| value(g, depth - 1))
                    .collect(),
            ),
            _ => Value::Map(map(g, depth - 1)),
        }
    }

    fn map(g: &mut Gen, depth: u32) -> Info {
        let mut m = Info::new();
        for i in 0..u8::arbitrary(g) % 5 {
            m.push(format!("k{i}"), value(g, depth));
        }
        m
    }

    impl Arbitrary for Tree {
        fn arbitrary(g: &mut Gen) -> Tree {
            Tree(map(g, 3))
        }
    }

    /// Every scalar of the value, depth first, as text shows it.
    fn leaves(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::List(items) => items.iter().for_each(|i| leaves(i, out)),
            Value::Map(m) => m.entries.iter().for_each(|(_, v)| leaves(v, out)),
            s => out.push(s.scalar_text()),
        }
    }

    /// The JSON rendering's scalars in the same order, converted back to text form.
    fn json_leaves(v: &serde_json::Value, like: &Value, out: &mut Vec<String>) {
        match (v, like) {
            (serde_json::Value::Array(a), Value::List(items)) => {
                a.iter()
                    .zip(items)
                    .for_each(|(j, i)| json_leaves(j, i, out));
            }
            (serde_json::Value::Object(o), Value::Map(m)) => {
                for (k, v) in &m.entries {
                    json_leaves(&o[k.as_ref()], v, out);
                }
            }
            (serde_json::Value::Null, _) => out.push("-".into()),
            (serde_json::Value::String(s), _) if s.is_empty() => out.push("\"\"".into()),
            (serde_json::Value::String(s), _) => out.push(s.clone()),
            (other, _) => out.push(other.to_string()),
        }
    }

    #[test]
    fn text_and_json_show_the_same_values() {
        fn prop(t: Tree) -> bool {
            let v = Value::Map(t.0.clone());
            let mut want = Vec::new();
            leaves(&v, &mut want);
            let json: serde_json::Value = serde_json::from_str(&t.0.to_json()).unwrap();
            let mut got = Vec::new();
            json_leaves(&json, &v, &mut got);
            // Text shows every leaf, in order, after its key or list marker.
            let text = t.0.to_text();
            let mut rest = text.as_str();
            let in_order = want.iter().all(|leaf| match rest.find(leaf.as_str()) {
                Some(p) => {
                    rest = &rest[p + leaf.len()..];
                    true
                }
                None => false,
            });
            got == want && in_order
        }
        QuickCheck::new().quickcheck(prop as fn(Tree) -> bool);
    }

    #[test]
    fn text_layout() {
        let info = Info::new()
            .with("format", "x64dbg")
            .with("first_pc", Hex(0x1000))
            .with("missing", Value::Null)
            .with(
                "threads",
                vec![Info::new().with("id", 1u32).with("instructions", 5u64)],
            )
            .with("nested", Info::new().with("a", vec![1u32, 2]));
        assert_eq!(
            info.to_text(),
            "format: x64dbg\nfirst_pc: 0x1000\nmissing: -\nthreads:\n  - id: 1, instructions: 5\nnested:\n  a: 1, 2\n"
        );
        assert_eq!(
            info.to_json(),
            r#"{"format":"x64dbg","first_pc":"0x1000","missing":null,"threads":[{"id":1,"instructions":5}],"nested":{"a":[1,2]}}"#
        );
    }
}
