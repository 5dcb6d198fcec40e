//! The tables of the dcfg and dcfg-trace handlers, as a columnar sink sees them: every row
//! checked against its schema, child tables ([`Type::Rows`]) split out with their parent's
//! key fields in front, nested records ([`Type::Struct`]) flattened.

// Test code: panics are failures; helpers outside #[test] functions are not exempted.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::panic
)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use trace_registry::schema::{Schema, Type, Visitor};
use trace_registry::{Ctx, Options};

/// A value as a columnar sink stores it.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    U(u64),
    I(i64),
    B(bool),
    Bytes(Vec<u8>),
    S(String),
    Null,
    List(Vec<Val>),
}

impl Val {
    fn u(&self) -> u64 {
        match self {
            Val::U(v) => *v,
            v => panic!("not an unsigned integer: {v:?}"),
        }
    }
}

/// One row: its columns by name, in order.
type Row = Vec<(String, Val)>;

enum Frame {
    /// A record of `schema`; `flatten` for a [`Type::Struct`] value, whose columns go to
    /// the parent's.
    Row {
        schema: Arc<Schema>,
        next: usize,
        keys: Row,
        values: Row,
        flatten: bool,
    },
    List {
        ty: Type,
        items: Vec<Val>,
    },
    Rows {
        schema: Arc<Schema>,
        keys: Row,
    },
}

/// Splits records into tables by schema name, checking every value against its field.
#[derive(Default)]
struct Tables {
    tables: BTreeMap<String, Vec<Row>>,
    stack: Vec<Frame>,
}

impl Tables {
    fn record(&mut self, schema: &Arc<Schema>, row: &dyn trace_registry::schema::Row) {
        self.tables.entry(schema.name.to_string()).or_default();
        self.stack.push(Frame::Row {
            schema: schema.clone(),
            next: 0,
            keys: Vec::new(),
            values: Vec::new(),
            flatten: false,
        });
        row.visit(self);
        self.finish_row();
        assert!(self.stack.is_empty(), "unbalanced row of {}", schema.name);
    }

    /// Every table reachable from `schema`, so that empty ones exist too.
    fn declare(&mut self, schema: &Schema) {
        self.tables.entry(schema.name.to_string()).or_default();
        for f in &schema.fields {
            if let Type::Rows(s) | Type::Struct(s) = &f.ty {
                self.declare(s);
            }
        }
    }

    fn finish_row(&mut self) {
        let Some(Frame::Row {
            schema,
            next,
            keys,
            mut values,
            flatten,
        }) = self.stack.pop()
        else {
            panic!("end_row outside a row");
        };
        assert_eq!(
            next,
            schema.fields.len(),
            "fields of {} visited",
            schema.name
        );
        if flatten {
            let Some(Frame::Row {
                values: parent,
                next,
                ..
            }) = self.stack.last_mut()
            else {
                panic!("a struct outside a row");
            };
            parent.extend(values);
            *next += 1;
            return;
        }
        let mut row = keys;
        row.append(&mut values);
        self.tables
            .entry(schema.name.to_string())
            .or_default()
            .push(row);
    }

    /// Stores a value in the current row or list, checking it fits.
    fn value(&mut self, v: Val, fits: impl Fn(&Type) -> bool) {
        match self.stack.last_mut() {
            Some(Frame::List { ty, items }) => {
                assert!(fits(ty), "{v:?} in a list of {ty:?}");
                items.push(v);
            }
            Some(Frame::Row {
                schema,
                next,
                values,
                ..
            }) => {
                let f = &schema.fields[*next];
                if v == Val::Null {
                    assert!(f.nullable, "null in {}.{}", schema.name, f.name);
                } else {
                    assert!(
                        fits(&f.ty),
                        "{v:?} in {}.{}: {:?}",
                        schema.name,
                        f.name,
                        f.ty
                    );
                }
                values.push((f.name.to_string(), v));
                *next += 1;
            }
            _ => panic!("a value outside a row or list"),
        }
    }
}

impl Visitor for Tables {
    fn uint(&mut self, v: u64) {
        self.value(Val::U(v), |t| matches!(t, Type::UInt(_)));
    }
    fn int(&mut self, v: i64) {
        self.value(Val::I(v), |t| matches!(t, Type::Int(_)));
    }
    fn bool(&mut self, v: bool) {
        self.value(Val::B(v), |t| matches!(t, Type::Bool));
    }
    fn bytes(&mut self, v: &[u8]) {
        self.value(Val::Bytes(v.to_vec()), |t| matches!(t, Type::Bytes));
    }
    fn str(&mut self, v: &str) {
        self.value(Val::S(v.to_owned()), |t| {
            matches!(t, Type::Str | Type::Name)
        });
    }
    fn null(&mut self) {
        self.value(Val::Null, |_| true);
    }
    fn begin_list(&mut self) {
        let Some(Frame::Row {
            schema,
            next,
            values,
            keys,
            ..
        }) = self.stack.last()
        else {
            panic!("a list outside a row");
        };
        let f = &schema.fields[*next];
        let frame = match &f.ty {
            Type::List(t) => Frame::List {
                ty: (**t).clone(),
                items: Vec::new(),
            },
            Type::Rows(child) => {
                // The parent's key fields, all visited before its child tables.
                let mut parent_keys = keys.clone();
                for k in schema.keys() {
                    let v = values
                        .iter()
                        .find(|(n, _)| *n == k.name)
                        .unwrap_or_else(|| panic!("key {} after the child table", k.name));
                    parent_keys.push(v.clone());
                }
                Frame::Rows {
                    schema: child.clone(),
                    keys: parent_keys,
                }
            }
            t => panic!("a list in {}.{}: {t:?}", schema.name, f.name),
        };
        self.stack.push(frame);
    }
    fn end_list(&mut self) {
        match self.stack.pop() {
            Some(Frame::List { items, .. }) => {
                let Some(Frame::Row {
                    schema,
                    next,
                    values,
                    ..
                }) = self.stack.last_mut()
                else {
                    panic!("a list outside a row");
                };
                values.push((schema.fields[*next].name.to_string(), Val::List(items)));
                *next += 1;
            }
            Some(Frame::Rows { .. }) => {
                let Some(Frame::Row { next, .. }) = self.stack.last_mut() else {
                    panic!("a child table outside a row");
                };
                *next += 1;
            }
            _ => panic!("end_list without begin_list"),
        }
    }
    fn begin_row(&mut self) {
        let frame = match self.stack.last() {
            Some(Frame::Rows { schema, keys }) => Frame::Row {
                schema: schema.clone(),
                next: 0,
                keys: keys.clone(),
                values: Vec::new(),
                flatten: false,
            },
            Some(Frame::Row { schema, next, .. }) => match &schema.fields[*next].ty {
                Type::Struct(s) => Frame::Row {
                    schema: s.clone(),
                    next: 0,
                    keys: Vec::new(),
                    values: Vec::new(),
                    flatten: true,
                },
                t => panic!("a nested row in {t:?}"),
            },
            _ => panic!("begin_row outside a child table"),
        };
        self.stack.push(frame);
    }
    fn end_row(&mut self) {
        self.finish_row();
    }
}

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(name)
}

fn realdata(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from("/work/shared/realdata").join(name);
    p.exists().then_some(p)
}

/// Every table of `path` read by the handler the registry detects, and its `info --json`.
fn read(path: &std::path::Path, options: &Options) -> (Tables, serde_json::Value) {
    let (mut input, handler) = trace_registry::open(path.as_os_str(), None).unwrap();
    let mut ctx = Ctx::new(options);
    let info = handler.info(&mut input, &mut ctx).unwrap();
    let (mut input, _) = trace_registry::open(path.as_os_str(), None).unwrap();
    let mut records = handler.records(&mut input, &mut ctx).unwrap();
    let schemas: Vec<Arc<Schema>> = records.tables().to_vec();
    let mut t = Tables::default();
    for s in &schemas {
        t.declare(s);
    }
    while let Some(r) = records.next_record() {
        let r = r.unwrap();
        t.record(&schemas[r.table], r.row());
    }
    (t, serde_json::from_str(&info.to_json()).unwrap())
}

fn col(row: &Row, name: &str) -> Val {
    row.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no column {name} in {row:?}"))
        .1
        .clone()
}

fn count_by_pid(t: &Tables, table: &str) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for r in &t.tables[table] {
        *out.entry(col(r, "pid").u()).or_default() += 1;
    }
    out
}

#[test]
fn dcfg_tables_match_info() {
    let mut files = vec![testdata("dcfg/sample.dcfg.json")];
    files.extend(realdata("dcfg/pinball2elf_dijkstra_omp_8t.dcfg.json"));
    files.extend(realdata("dcfg/passlab_simple_loop_whole.dcfg.json.bz2"));
    for path in files {
        let (t, info) = read(&path, &Options::default());
        let names: Vec<&str> = t.tables.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "basic_blocks",
                "edge_thread_counts",
                "edges",
                "images",
                "loops",
                "processes",
                "routine_nodes",
                "routines"
            ],
            "{path:?}"
        );
        let processes = info["processes"].as_array().unwrap();
        assert_eq!(t.tables["processes"].len(), processes.len(), "{path:?}");
        for (table, key) in [
            ("images", "images"),
            ("basic_blocks", "basic_blocks"),
            ("edges", "edges"),
            ("routines", "routines"),
            ("loops", "loops"),
        ] {
            let got = count_by_pid(&t, table);
            for p in processes {
                let pid = p["pid"].as_u64().unwrap();
                assert_eq!(
                    got.get(&pid).copied().unwrap_or(0),
                    p[key].as_u64().unwrap(),
                    "{path:?} pid {pid} {table}"
                );
            }
        }
        // Every edge's per-thread counts sum to its count, joined on its keys.
        let mut sums: HashMap<(u64, u64), (u64, u64)> = HashMap::new();
        for r in &t.tables["edge_thread_counts"] {
            assert_eq!(r[0].0, "pid");
            assert_eq!(r[1].0, "id");
            let s = sums.entry((r[0].1.u(), r[1].1.u())).or_default();
            s.0 += col(r, "count").u();
            s.1 += 1;
        }
        let mut with_counts = 0;
        for e in &t.tables["edges"] {
            let key = (col(e, "pid").u(), col(e, "id").u());
            let (sum, threads) = sums.get(&key).copied().unwrap_or_default();
            assert_eq!(sum, col(e, "count").u(), "{path:?} edge {key:?}");
            with_counts += u64::from(threads > 0);
        }
        assert!(with_counts > 0, "{path:?}");
        // Routine nodes join back to their routine, and include its entry.
        let routines: HashMap<(u64, u64), u64> = t.tables["routines"]
            .iter()
            .map(|r| {
                (
                    (col(r, "pid").u(), col(r, "entry").u()),
                    col(r, "image").u(),
                )
            })
            .collect();
        for n in &t.tables["routine_nodes"] {
            assert!(routines.contains_key(&(n[0].1.u(), n[1].1.u())), "{n:?}");
        }
    }
}

#[test]
fn dcfg_sample_rows() {
    let (t, _) = read(&testdata("dcfg/sample.dcfg.json"), &Options::default());
    let p = &t.tables["processes"][0];
    assert_eq!(col(p, "pid"), Val::U(4243));
    assert_eq!(col(p, "threads"), Val::U(2));
    assert_eq!(
        col(p, "instr_count_per_thread"),
        Val::List(vec![Val::U(514), Val::U(974)])
    );
    let img = &t.tables["images"][1];
    assert_eq!(col(img, "load_addr"), Val::U(0x7f00_0100_0000));
    assert_eq!(col(img, "file_name"), Val::S("/synth/lib/lib1.so".into()));
    let l = t.tables["loops"]
        .iter()
        .find(|l| col(l, "head") == Val::U(12))
        .unwrap();
    assert_eq!(col(l, "parent"), Val::U(11));
    assert_eq!(col(l, "routine"), Val::U(10));
    let e = &t.tables["edges"][0];
    assert_eq!(col(e, "type"), Val::S("ENTRY".into()));
}

/// Every chunk's edges are rows of `edges`, keyed by the chunk and numbered from 0.
fn check_chunk_edges(t: &Tables) -> u64 {
    let mut per_chunk: HashMap<(u64, u64, u64), Vec<u64>> = HashMap::new();
    for e in &t.tables["edges"] {
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..5], ["pid", "thread", "chunk", "seq", "edge_id"]);
        per_chunk
            .entry((e[0].1.u(), e[1].1.u(), e[2].1.u()))
            .or_default()
            .push(e[3].1.u());
    }
    let mut total = 0;
    for c in &t.tables["chunks"] {
        let key = (col(c, "pid").u(), col(c, "thread").u(), col(c, "chunk").u());
        let n = col(c, "edge_count").u();
        let seqs = per_chunk.remove(&key).unwrap_or_default();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "chunk {key:?}");
        total += n;
    }
    assert!(per_chunk.is_empty(), "edges of no chunk: {per_chunk:?}");
    assert_eq!(t.tables["edges"].len() as u64, total);
    total
}

#[test]
fn dcfg_trace_edges_are_rows_of_their_chunk() {
    for name in [
        "basic",
        "bomb",
        "compressed",
        "gap",
        "multi",
        "spec",
        "tolerant",
    ] {
        let path = testdata(&format!("dcfg-trace/{name}.trace.json"));
        let options = Options {
            lenient: name == "tolerant",
            ..Options::default()
        };
        let (t, info) = read(&path, &options);
        assert_eq!(
            t.tables.keys().collect::<Vec<_>>(),
            ["chunks", "edges"],
            "{name}"
        );
        let total = check_chunk_edges(&t);
        assert_eq!(total, info["edges"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn dcfg_trace_edges_with_a_dcfg_have_their_target_blocks() {
    let dcfg_path = testdata("dcfg/sample.dcfg.json");
    let d = dcfg::Dcfg::from_path(&dcfg_path).unwrap();
    let p = &d.processes[0];
    let edges: Vec<u64> = p.edges().map(|e| e.id).collect();
    let trace = dcfg_trace::encode::encode(
        &[dcfg_trace::encode::ProcessEdges {
            pid: p.id,
            threads: vec![dcfg_trace::encode::ThreadEdges {
                thread: 0,
                edges: edges.iter().chain(&edges).copied().collect(),
            }],
        }],
        |_, _| 3,
        &dcfg_trace::encode::EncodeOptions {
            chunk_instrs: 40,
            ..Default::default()
        },
    );
    let dir = std::env::temp_dir().join(format!("trace-registry-tables-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("joined.trace.json");
    std::fs::write(&path, trace.to_vec()).unwrap();
    let options = Options {
        dcfg: Some(dcfg_path),
        ..Options::default()
    };
    let (t, _) = read(&path, &options);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t.tables["chunks"].len() > 1);
    assert_eq!(check_chunk_edges(&t), 2 * edges.len() as u64);
    let graph = d.graph(p.id).unwrap();
    for e in &t.tables["edges"] {
        let edge = graph.edge(col(e, "edge_id").u()).unwrap();
        assert_eq!(col(e, "block"), Val::U(edge.target));
        let addr = graph.block_addr(edge.target).map_or(Val::Null, Val::U);
        assert_eq!(col(e, "addr"), addr);
    }
    // The chunk's `blocks` list holds the same targets, in order.
    for c in &t.tables["chunks"] {
        let Val::List(blocks) = col(c, "blocks") else {
            panic!("blocks is a list")
        };
        let key = (col(c, "thread").u(), col(c, "chunk").u());
        let targets: Vec<Val> = t.tables["edges"]
            .iter()
            .filter(|e| (e[1].1.u(), e[2].1.u()) == key)
            .map(|e| col(e, "block"))
            .collect();
        assert_eq!(blocks, targets);
    }
}
