//! Graphviz DOT drawings and loop-statistics CSV, in the manner of Intel's `dcfg-to-dot`
//! and `dcfg-reader` / loop-tracker examples.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use crate::model::{Dcfg, Image, Routine};
use crate::query::{Graph, LoopStats};

/// What [`Dcfg::write_dot`] draws. The default draws everything ("a monster graph" for a
/// whole program); the filters narrow it down and combine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotOptions {
    /// Only the process with this pid.
    pub process: Option<u64>,
    /// Only the image with this id.
    pub image: Option<u64>,
    /// Only the routine with this entry block id.
    pub routine: Option<u64>,
    /// Only the routine containing the loop with this head block id (as `dcfg-to-dot`'s id
    /// argument does).
    pub loop_head: Option<u64>,
    /// Leave out edges that were never executed.
    pub hide_zero_edges: bool,
    /// Leave out every image but the first one of each process (the main program).
    pub hide_libraries: bool,
}

fn dot_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

impl Dcfg {
    /// Draws (part of) the DCFG as Graphviz DOT: a cluster per process, image and routine;
    /// blocks labelled with id, address, instructions and executions; edges with id, type
    /// and executions. Edges with at least one drawn end are drawn; their other end is
    /// declared outside the clusters.
    ///
    /// # Errors
    ///
    /// Errors of `w`.
    pub fn write_dot<W: Write>(&self, w: W, opts: &DotOptions) -> io::Result<()> {
        let mut w = io::BufWriter::new(w);
        let procs: Vec<_> = self
            .processes
            .iter()
            .filter(|p| opts.process.is_none_or(|pid| p.id == pid))
            .collect();
        let prefix = |pid: u64, id: u64| {
            if procs.len() > 1 {
                format!("p{pid}_node{id}")
            } else {
                format!("node{id}")
            }
        };
        writeln!(
            w,
            "# DCFG version {}, drawn by the dcfg crate",
            self.version()
        )?;
        writeln!(w, "digraph dcfg {{")?;
        writeln!(w, "  node [shape=box];")?;
        for p in &procs {
            let g = Graph::new(self, p);
            let routine_filter = opts.routine.or_else(|| {
                opts.loop_head
                    .and_then(|h| g.loop_routine(h).map(|r| r.entry))
            });
            if opts.loop_head.is_some() && routine_filter.is_none() {
                continue;
            }
            writeln!(w, "  subgraph cluster_pid{} {{", p.id)?;
            writeln!(w, "    color=blue;")?;
            writeln!(w, "    label=\"Process {}\";", p.id)?;
            let mut drawn: HashSet<u64> = HashSet::new();
            for (ii, img) in p.images().iter().enumerate() {
                if opts.hide_libraries && ii > 0 {
                    continue;
                }
                if opts.image.is_some_and(|id| id != img.id) {
                    continue;
                }
                let routines: Vec<&Routine> = img
                    .routines()
                    .iter()
                    .filter(|r| routine_filter.is_none_or(|e| e == r.entry))
                    .collect();
                if routine_filter.is_some() && routines.is_empty() {
                    continue;
                }
                self.dot_image(
                    &mut w,
                    &g,
                    img,
                    &routines,
                    routine_filter.is_none(),
                    &mut drawn,
                    &prefix,
                )?;
            }
            writeln!(w, "  }}")?;
            writeln!(w, "  # Edges")?;
            let mut declared: HashSet<u64> = drawn.clone();
            for e in p.edges() {
                if !(drawn.contains(&e.source) || drawn.contains(&e.target)) {
                    continue;
                }
                if opts.hide_zero_edges && e.count() == 0 {
                    continue;
                }
                for end in [e.source, e.target] {
                    if declared.insert(end) {
                        writeln!(
                            w,
                            "  {} [label=\"{}\"];",
                            prefix(p.id, end),
                            end_label(&g, end)
                        )?;
                    }
                }
                let ty = g.edge_type_name(e).unwrap_or("?");
                writeln!(
                    w,
                    "  {} -> {} [label=\"EDGE{}\\n{}\\nexecutions={}\"];",
                    prefix(p.id, e.source),
                    prefix(p.id, e.target),
                    e.id,
                    dot_escape(ty),
                    e.count()
                )?;
            }
        }
        writeln!(w, "}}")?;
        w.flush()
    }

    #[allow(clippy::too_many_arguments)]
    fn dot_image<W: Write>(
        &self,
        w: &mut W,
        g: &Graph<'_>,
        img: &Image,
        routines: &[&Routine],
        all_blocks: bool,
        drawn: &mut HashSet<u64>,
        prefix: &dyn Fn(u64, u64) -> String,
    ) -> io::Result<()> {
        let pid = g.process().id;
        writeln!(w, "    subgraph cluster_image{} {{", img.id)?;
        writeln!(w, "      color=plum;")?;
        let name = img
            .file_name_id
            .and_then(|f| self.file_name(f))
            .unwrap_or("?");
        writeln!(
            w,
            "      label=\"Image {}\\n{}\\nload-addr = {:#x}\\nsize = {}\";",
            img.id,
            dot_escape(name),
            img.load_addr,
            img.size
        )?;
        let block_line = |w: &mut W, id: u64, indent: &str| -> io::Result<()> {
            let Some(b) = g.block(id) else { return Ok(()) };
            writeln!(
                w,
                "{indent}{} [label=\"BB {}\\naddr={:#x}\\nnum-instrs={}\\nexecutions={}\"];",
                prefix(pid, id),
                id,
                img.load_addr.wrapping_add(b.addr_offset),
                b.num_instrs,
                g.block_count(id)
            )
        };
        let mut in_routine = HashSet::new();
        for r in routines {
            writeln!(w, "      subgraph cluster_routine{} {{", r.entry)?;
            writeln!(w, "        color=violet;")?;
            let sym = g.block_symbol(r.entry).map(|(s, _)| s).unwrap_or("?");
            writeln!(
                w,
                "        label=\"Routine {}\\nname='{}'\\naddr={:#x}\";",
                r.entry,
                dot_escape(sym),
                g.block_addr(r.entry).unwrap_or(0)
            )?;
            for n in &r.nodes {
                if g.block(n.id).is_some() && drawn.insert(n.id) {
                    in_routine.insert(n.id);
                    block_line(w, n.id, "        ")?;
                }
            }
            writeln!(w, "      }}")?;
        }
        if all_blocks {
            for b in img.basic_blocks() {
                if !in_routine.contains(&b.id) && drawn.insert(b.id) {
                    block_line(w, b.id, "      ")?;
                }
            }
        }
        writeln!(w, "    }}")
    }

    /// Loop statistics as CSV, one line per loop of every process (`dcfg-reader`'s
    /// `nesting-depth,filename:linenumber,#visits,#iterations,#static-instrs,
    /// #dynamic-instructions`, plus ids, address and the other iteration counts):
    /// `pid,loop_id,image_id,routine_id,address,source,depth,visits,iterations,head_count,
    /// back_edge_count,static_instrs,dynamic_instrs`. See [`LoopStats`] for the definitions.
    ///
    /// # Errors
    ///
    /// Errors of `w`.
    pub fn write_loops_csv<W: Write>(&self, w: W) -> io::Result<()> {
        let mut w = io::BufWriter::new(w);
        writeln!(
            w,
            "pid,loop_id,image_id,routine_id,address,source,depth,visits,iterations,head_count,back_edge_count,static_instrs,dynamic_instrs"
        )?;
        for p in &self.processes {
            let g = Graph::new(self, p);
            let mut rows: Vec<(u64, u64, u64, LoopStats)> = Vec::new();
            let mut seen = HashMap::new();
            for (img, r, l) in g.loops() {
                if seen.insert(l.head, ()).is_some() {
                    continue;
                }
                rows.push((img.id, r.entry, l.head, g.loop_stats(l.head)));
            }
            for (image, routine, head, s) in rows {
                let source = g
                    .block_source(head)
                    .map(|(f, l)| csv_field(&format!("{f}:{l}")))
                    .unwrap_or_default();
                writeln!(
                    w,
                    "{},{},{},{},{:#x},{},{},{},{},{},{},{},{}",
                    p.id,
                    head,
                    image,
                    routine,
                    g.block_addr(head).unwrap_or(0),
                    source,
                    s.depth,
                    s.visits(),
                    s.iterations(),
                    s.head_count,
                    s.back_edge_count,
                    s.static_instrs,
                    s.dynamic_instrs
                )?;
            }
        }
        w.flush()
    }
}

fn end_label(g: &Graph<'_>, id: u64) -> String {
    if let Some(name) = g
        .dcfg()
        .special_nodes
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|n| n.id == id)
        .map(|n| n.name.as_str())
    {
        return format!("{}\\n{}", dot_escape(name), id);
    }
    match (g.block(id), g.block_addr(id)) {
        (Some(b), Some(addr)) => format!(
            "BB {id}\\naddr={addr:#x}\\nnum-instrs={}\\nexecutions={}",
            b.num_instrs,
            g.block_count(id)
        ),
        _ => format!("node {id}"),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}
