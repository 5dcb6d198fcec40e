//! Records as trees of native values in `tracekit dump`'s shape: the same keys, nesting and
//! omissions as each JSON line, but integers as integers (not `"0x…"` strings) and byte
//! strings as bytes. The sink of language bindings (the Python package turns each tree
//! into a `dict`), written once over rows and schemas like every other sink.
//!
//! ```
//! use trace_sinks::native::{Native, Node};
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! let mut records = handler.records(&mut input, &mut Ctx::new(&options))?;
//! let mut sink = Native::new(records.tables());
//! let first = records.next_record().expect("a record")?;
//! let node = sink.record(first.table, first.row());
//! // `tracekit dump` shows `"i":0,…,"pc":"0x7ff6a1b21000"`; here pc is a number.
//! assert_eq!(node.get("i"), Some(&Node::UInt(0)));
//! assert!(matches!(node.get("pc"), Some(Node::UInt(0x7ff6_a1b2_1000))));
//! # Ok::<(), trace_registry::Error>(())
//! ```

use std::sync::Arc;

use trace_model::schema::{Cell, Json, Row, Schema, Visitor, row_one_by_one, tree_layout};

/// One value of a record, as `tracekit dump` shows it but native.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Node {
    /// A missing value (JSON `null`).
    Null,
    /// A boolean.
    Bool(bool),
    /// An unsigned integer (decimal or `"0x…"` in JSON).
    UInt(u64),
    /// A signed integer.
    Int(i64),
    /// A byte string (hex digits in JSON).
    Bytes(Vec<u8>),
    /// A byte string JSON shows as one `"0x…"` number (a vector register): the bytes of a
    /// big-endian unsigned integer.
    BigUInt(Vec<u8>),
    /// A string or name.
    Str(String),
    /// A field name (shared by every record of the schema).
    Key(Arc<str>),
    /// A list (JSON array).
    List(Vec<Node>),
    /// A map with keys in order (JSON object; a key is a [`Node::Key`] for a field, or the
    /// value of a child row's first field for a child table shown as [`Json::Object`]).
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// For a map, the value of the field `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find_map(|(k, v)| match k {
                Node::Key(k) if **k == *key => Some(v),
                Node::Str(k) if k == key => Some(v),
                _ => None,
            }),
            _ => None,
        }
    }
}

/// How one field is shown, prepared once per schema.
#[derive(Debug)]
struct FieldPlan {
    name: Arc<str>,
    json: Json,
    omit_null: bool,
    /// Where a nested record's or child table's fields start.
    child: Option<usize>,
    /// For a child table shown as [`Json::Values`]: which field of its rows is shown.
    shown: Option<usize>,
}

/// Where the sink is inside a record.
#[derive(Debug)]
enum Frame {
    /// A record or nested record: field `base + next` comes next; `key` is its field name
    /// in the parent (none at the top).
    Row {
        base: usize,
        next: usize,
        key: Option<Arc<str>>,
        map: Vec<(Node, Node)>,
    },
    /// A list of plain values.
    List { key: Arc<str>, items: Vec<Node> },
    /// A child table shown as a list of maps.
    Rows {
        key: Arc<str>,
        base: usize,
        items: Vec<Node>,
    },
    /// A child table shown as one map.
    Object {
        key: Arc<str>,
        base: usize,
        entries: Vec<(Node, Node)>,
    },
    /// One row of such a map: its first value is the key, the first non-missing other
    /// value the value.
    Entry {
        base: usize,
        next: usize,
        key: Option<Node>,
        value: Option<Node>,
    },
    /// A child table shown as the list of one field of each row.
    Values {
        key: Arc<str>,
        shown: Option<usize>,
        json: Json,
        items: Vec<Node>,
    },
    /// One row of such a list.
    Value { next: usize, value: Option<Node> },
    /// A value not shown: everything up to its end is dropped.
    Skip { depth: usize },
}

/// Turns records into [`Node`] trees (see the module docs).
#[derive(Debug)]
pub struct Native {
    fields: Vec<FieldPlan>,
    /// Where each table's fields start, by table index.
    tables: Vec<usize>,
    /// `table`'s name for every table but the first (`"table":"name"` in JSON).
    labels: Vec<Option<Arc<str>>>,
    table_key: Arc<str>,
    stack: Vec<Frame>,
    /// The finished top-level record.
    done: Option<Node>,
}

impl Native {
    /// A sink for records of these tables (indexed as the record reader indexes them).
    #[must_use]
    pub fn new(tables: &[Arc<Schema>]) -> Native {
        let mut sink = Native {
            fields: Vec::new(),
            tables: Vec::new(),
            labels: Vec::new(),
            table_key: Arc::from("table"),
            stack: Vec::new(),
            done: None,
        };
        let (fields, starts) = tree_layout(tables);
        sink.fields = fields
            .into_iter()
            .map(|l| FieldPlan {
                name: Arc::from(l.field.name.as_ref()),
                json: l.field.json,
                omit_null: l.field.omit_null,
                child: l.child,
                shown: l.shown.map(|(at, _)| at),
            })
            .collect();
        sink.tables = starts;
        for (n, t) in tables.iter().enumerate() {
            sink.labels
                .push((n > 0).then(|| Arc::from(t.name.as_ref())));
        }
        sink
    }

    /// The tree of one record of table `table`.
    pub fn record(&mut self, table: usize, row: &dyn Row) -> Node {
        let base = self.tables.get(table).copied().unwrap_or(0);
        let mut map = Vec::new();
        if let Some(Some(label)) = self.labels.get(table) {
            map.push((
                Node::Key(Arc::clone(&self.table_key)),
                Node::Str(label.to_string()),
            ));
        }
        self.stack.clear();
        self.done = None;
        self.stack.push(Frame::Row {
            base,
            next: 0,
            key: None,
            map,
        });
        row.visit(self);
        // A row that left frames open (it cannot, but the tree is kept whole anyway).
        while self.stack.len() > 1 {
            self.close();
        }
        match self.stack.pop() {
            Some(Frame::Row { map, .. }) => Node::Map(map),
            _ => self.done.take().unwrap_or(Node::Map(Vec::new())),
        }
    }

    /// The field `base + next` of the row on top, moving past it.
    fn next_field(&mut self) -> Option<&FieldPlan> {
        match self.stack.last_mut() {
            Some(Frame::Row { base, next, .. }) => {
                let i = base.saturating_add(*next);
                *next = next.saturating_add(1);
                self.fields.get(i)
            }
            _ => None,
        }
    }

    /// Places a scalar (or null) where the top frame expects its next value.
    fn put(&mut self, v: Node) {
        let is_null = v == Node::Null;
        // A row of a child table shown as one field of each row: the enclosing frame says
        // which field and how.
        if let [
            ..,
            Frame::Values {
                shown: at, json, ..
            },
            Frame::Value { next, value },
        ] = self.stack.as_mut_slice()
        {
            let i = *next;
            *next = next.saturating_add(1);
            if *at == Some(i) && value.is_none() {
                *value = Some(shown(v, *json));
            }
            return;
        }
        match self.stack.last_mut() {
            Some(Frame::Row {
                base, next, map, ..
            }) => {
                let i = base.saturating_add(*next);
                *next = next.saturating_add(1);
                let Some(f) = self.fields.get(i) else {
                    return;
                };
                if f.json == Json::Skip || (is_null && f.omit_null) {
                    return;
                }
                map.push((Node::Key(Arc::clone(&f.name)), shown(v, f.json)));
            }
            Some(Frame::List { items, .. }) => items.push(v),
            Some(Frame::Entry {
                base,
                next,
                key,
                value,
            }) => {
                let i = base.saturating_add(*next);
                *next = next.saturating_add(1);
                if key.is_none() {
                    *key = Some(v);
                } else if value.is_none() && !is_null {
                    let json = self.fields.get(i).map_or(Json::Plain, |f| f.json);
                    *value = Some(shown(v, json));
                }
            }
            _ => {}
        }
    }

    /// Ends the frame on top and places what it built in its parent.
    fn close(&mut self) {
        let Some(frame) = self.stack.pop() else {
            return;
        };
        let (key, node) = match frame {
            Frame::Skip { .. } => return,
            Frame::Row { key, map, .. } => (key, Node::Map(map)),
            Frame::List { key, items } | Frame::Rows { key, items, .. } => {
                (Some(key), Node::List(items))
            }
            Frame::Values { key, items, .. } => (Some(key), Node::List(items)),
            Frame::Object { key, entries, .. } => (Some(key), Node::Map(entries)),
            Frame::Entry { key, value, .. } => {
                if let Some(Frame::Object { entries, .. }) = self.stack.last_mut() {
                    entries.push((key.unwrap_or(Node::Null), value.unwrap_or(Node::Null)));
                }
                return;
            }
            Frame::Value { value, .. } => {
                if let Some(Frame::Values { items, .. }) = self.stack.last_mut() {
                    items.push(value.unwrap_or(Node::Null));
                }
                return;
            }
        };
        match self.stack.last_mut() {
            Some(Frame::Row { map, .. }) => {
                if let Some(key) = key {
                    map.push((Node::Key(key), node));
                }
            }
            Some(Frame::Rows { items, .. }) => items.push(node),
            None => self.done = Some(node),
            _ => {}
        }
    }

    /// Skips into a value not shown, or deeper into one.
    fn skip(&mut self) -> bool {
        if let Some(Frame::Skip { depth }) = self.stack.last_mut() {
            *depth = depth.saturating_add(1);
            return true;
        }
        false
    }

    /// Leaves a level of a skipped value; true if the top frame was a skip.
    fn unskip(&mut self) -> bool {
        match self.stack.last_mut() {
            Some(Frame::Skip { depth }) if *depth > 1 => {
                *depth = depth.saturating_sub(1);
                true
            }
            Some(Frame::Skip { .. }) => {
                self.stack.pop();
                true
            }
            _ => false,
        }
    }
}

/// A value as a field shown as `json` gives it.
fn shown(v: Node, json: Json) -> Node {
    match (v, json) {
        (Node::Bytes(b), Json::HexBytes0x) => Node::BigUInt(b),
        (v, _) => v,
    }
}

impl Visitor for Native {
    fn uint(&mut self, v: u64) {
        self.put(Node::UInt(v));
    }

    fn int(&mut self, v: i64) {
        self.put(Node::Int(v));
    }

    fn bool(&mut self, v: bool) {
        self.put(Node::Bool(v));
    }

    fn bytes(&mut self, v: &[u8]) {
        if matches!(self.stack.last(), Some(Frame::Skip { .. })) {
            return;
        }
        self.put(Node::Bytes(v.to_vec()));
    }

    fn str(&mut self, v: &str) {
        if matches!(self.stack.last(), Some(Frame::Skip { .. })) {
            return;
        }
        self.put(Node::Str(v.to_owned()));
    }

    fn null(&mut self) {
        self.put(Node::Null);
    }

    fn begin_list(&mut self) {
        if self.skip() {
            return;
        }
        let Some(f) = self.next_field() else {
            self.stack.push(Frame::Skip { depth: 1 });
            return;
        };
        let key = Arc::clone(&f.name);
        let frame = match (f.json, f.child) {
            (Json::Skip, _) => Frame::Skip { depth: 1 },
            (Json::Object, Some(base)) => Frame::Object {
                key,
                base,
                entries: Vec::new(),
            },
            (Json::Values, Some(base)) => {
                let shown = f.shown;
                let json = shown
                    .and_then(|s| self.fields.get(base.saturating_add(s)))
                    .map_or(Json::Plain, |c| c.json);
                Frame::Values {
                    key,
                    shown,
                    json,
                    items: Vec::new(),
                }
            }
            (_, Some(base)) => Frame::Rows {
                key,
                base,
                items: Vec::new(),
            },
            (_, None) => Frame::List {
                key,
                items: Vec::new(),
            },
        };
        self.stack.push(frame);
    }

    fn end_list(&mut self) {
        if !self.unskip() {
            self.close();
        }
    }

    fn begin_row(&mut self) {
        if self.skip() {
            return;
        }
        let frame = match self.stack.last() {
            Some(Frame::Rows { base, .. }) => Frame::Row {
                base: *base,
                next: 0,
                key: None,
                map: Vec::new(),
            },
            Some(Frame::Object { base, .. }) => Frame::Entry {
                base: *base,
                next: 0,
                key: None,
                value: None,
            },
            Some(Frame::Values { .. }) => Frame::Value {
                next: 0,
                value: None,
            },
            Some(Frame::Row { .. }) => match self.next_field() {
                Some(f) if f.json != Json::Skip && f.child.is_some() => Frame::Row {
                    base: f.child.unwrap_or(0),
                    next: 0,
                    key: Some(Arc::clone(&f.name)),
                    map: Vec::new(),
                },
                _ => Frame::Skip { depth: 1 },
            },
            _ => Frame::Skip { depth: 1 },
        };
        self.stack.push(frame);
    }

    fn row(&mut self, cells: &[Cell<'_>]) {
        // A struct JSON does not show (x64dbg's register state) is dropped at once.
        if let Some(Frame::Row { base, next, .. }) = self.stack.last_mut()
            && self
                .fields
                .get(base.saturating_add(*next))
                .is_some_and(|f| f.json == Json::Skip)
        {
            *next = next.saturating_add(1);
            return;
        }
        if matches!(self.stack.last(), Some(Frame::Skip { .. })) {
            return;
        }
        row_one_by_one(self, cells);
    }

    fn end_row(&mut self) {
        if !self.unskip() {
            self.close();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::Value as J;
    use trace_model::schema::testing;

    /// The JSON value a node stands for, with every integer as a number (as the Python
    /// tests compare): `dump`'s `"0x…"` strings are turned into numbers on the other side.
    fn to_json(n: &Node) -> J {
        match n {
            Node::Null => J::Null,
            Node::Bool(b) => J::Bool(*b),
            Node::UInt(v) => J::from(*v),
            Node::Int(v) => J::from(*v),
            Node::Bytes(b) => J::String(b.iter().map(|x| format!("{x:02x}")).collect()),
            Node::BigUInt(b) => {
                let s: String = b.iter().map(|x| format!("{x:02x}")).collect();
                let s = s.trim_start_matches('0');
                J::String(format!("0x{}", if s.is_empty() { "0" } else { s }))
            }
            Node::Str(s) => J::String(s.clone()),
            Node::Key(s) => J::String(s.to_string()),
            Node::List(items) => J::Array(items.iter().map(to_json).collect()),
            Node::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let k = match to_json(k) {
                            J::String(s) => s,
                            other => other.to_string(),
                        };
                        (k, to_json(v))
                    })
                    .collect(),
            ),
        }
    }

    /// `dump`'s JSON with `"0x…"` strings as numbers where they fit 64 bits.
    fn numbers(v: J) -> J {
        match v {
            J::String(s) => match s.strip_prefix("0x") {
                Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    // Wider numbers (vector registers) stay strings, without zero padding.
                    let h = h.trim_start_matches('0');
                    match u64::from_str_radix(if h.is_empty() { "0" } else { h }, 16) {
                        Ok(v) => J::from(v),
                        Err(_) => J::String(format!("0x{h}")),
                    }
                }
                _ => J::String(s),
            },
            J::Array(a) => J::Array(a.into_iter().map(numbers).collect()),
            J::Object(o) => J::Object(o.into_iter().map(|(k, v)| (k, numbers(v))).collect()),
            v => v,
        }
    }

    /// Every fixture's records as trees equal its JSON lines, value for value.
    #[test]
    fn trees_match_json_lines() {
        let cases: &[(&str, &str)] = &[
            ("x64dbg", "x64dbg/basic.trace64"),
            ("gdb-tfile", "gdb-tfile/amd64.tf"),
            ("gdb-tfile", "gdb-tfile/no-tdesc.tf"),
            ("tt6e", "amber/escapes.tt6e"),
            ("dcfg", "dcfg/sample.dcfg.json"),
            ("dcfg-trace", "dcfg-trace/spec.trace.json"),
            ("tt6", "amber/example.tt6"),
            ("amber-full", "amber/full-1008.full"),
            ("tenet", "tenet/basic.log"),
        ];
        for (format, path) in cases {
            let Ok(bytes) = std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../testdata")
                    .join(path),
            ) else {
                panic!("missing fixture {path}");
            };
            let handler = trace_registry::by_name(format).unwrap();
            let name = path.rsplit('/').next().unwrap();
            let options = trace_model::Options::default();
            let mut input = testing::input(name, &bytes, false);
            let mut records = handler
                .records(&mut input, &mut trace_model::Ctx::new(&options))
                .unwrap();
            let mut native = Native::new(records.tables());
            let mut jsonl = crate::JsonLines::new(Vec::new(), records.tables());
            let mut trees = Vec::new();
            while let Some(r) = records.next_record() {
                let r = r.unwrap();
                trees.push(to_json(&native.record(r.table, r.row())));
                jsonl.write(r.table, r.row()).unwrap();
            }
            jsonl.flush().unwrap();
            let text = String::from_utf8(jsonl.into_inner()).unwrap();
            let lines: Vec<J> = text
                .lines()
                .map(|l| numbers(serde_json::from_str(l).unwrap()))
                .collect();
            assert_eq!(trees.len(), lines.len(), "{path}");
            for (n, (t, l)) in trees.into_iter().zip(lines).enumerate() {
                assert_eq!(numbers(t), l, "{path}: record {n}");
            }
        }
    }
}
