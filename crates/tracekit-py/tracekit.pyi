"""Read CPU execution traces (x64dbg, GDB tracepoint files, Intel DCFG and DCFG-Trace,
Apple amber TT6/TT6E/FULL, Tenet) as dicts or Arrow, through tracekit's Rust readers.

    import tracekit
    t = tracekit.open("run.trace64")
    for r in t:                      # one dict per record, as `tracekit dump` shows it
        ...
    t.to_arrow().read_all()          # the Parquet export's `instructions` table, as Arrow
"""

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import pyarrow

__version__: str
formats: List[str]
"""Every format name `open(format=...)` accepts."""

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[PathLike, bytes, bytearray, memoryview]

class TraceError(Exception):
    """A trace that cannot be read, and where."""

    offset: Optional[int]
    """The absolute byte offset of the problem, when known."""
    path: Optional[str]
    """The JSON path of the problem (DCFG, DCFG-Trace), else None."""
    record: Optional[int]
    """The index of the record being read, when known."""

class FormatError(TraceError):
    """Input of no known format (pass format=NAME)."""

def open(
    source: Source,
    format: Optional[str] = None,
    *,
    big_endian: bool = False,
    lenient: bool = False,
    dcfg: Optional[PathLike] = None,
    record_size: Optional[int] = None,
    arch: Optional[str] = None,
    disasm: bool = False,
    index: Optional[PathLike] = None,
) -> Trace:
    """Opens a trace: a path (`.gz`/`.bz2` decompressed on the fly; a directory of amber
    thread files) or bytes-like data, of the format `format` names (see `formats`) or the
    one detected from the content.

    Options as the command line's: `big_endian` (gdb-tfile), `lenient` and `dcfg`
    (dcfg-trace), `record_size` (amber FULL), `arch` (tenet), `disasm` (records get
    `asm`), `index` (sidecar index path).

    Raises FormatError (unknown format), TraceError (damaged start), FileNotFoundError,
    ValueError (unknown format name), TypeError (unknown option)."""

def validate(source: Source, format: Optional[str] = None, **options: Any) -> None:
    """Checks the whole trace: returns None or raises the first problem (TraceError with
    `offset` and `path`)."""

def diff(
    a: Union[Trace, Source],
    b: Union[Trace, Source],
    format: Optional[str] = None,
    *,
    threads: List[Tuple[int, int]] = [],
    ignore: List[str] = [],
    mem: bool = True,
    window: Optional[int] = None,
    context: int = 3,
    **options: Any,
) -> Dict[str, Any]:
    """Compares two traces of the same format, as `tracekit diff --json` does: {"equal":
    bool, "regions": [dict], "summary": dict} (addresses and values as ints)."""

class Trace:
    """An opened trace. Each pass (iteration, to_arrow, info, …) reads the input afresh."""

    @property
    def format(self) -> str:
        """The format's name: x64dbg, gdb-tfile, dcfg, dcfg-trace, tt6, tt6e, amber-full,
        tenet."""

    def info(self) -> Dict[str, Any]:
        """The summary, `tracekit info --json`'s content (addresses as int)."""

    def tables(self) -> List[str]:
        """The output tables, as the Parquet export names them (x64dbg: instructions,
        registers, memory)."""

    def __iter__(self) -> RecordIter:
        """One dict per record with `tracekit dump`'s keys: integers as int, byte strings as
        bytes. Raises TraceError where the input is damaged, after every complete record."""

    def seek(self, i: int) -> RecordIter:
        """The records from record (instruction) `i` on. An x64dbg trace jumps there
        through its index of full dumps (the sidecar's, else built on the first far seek
        and kept by the Trace)."""

    def to_arrow(self, table: Optional[str] = None) -> pyarrow.RecordBatchReader:
        """One output table as Arrow record batches (each crossing through the Arrow C
        data interface, uncopied), built in a reader thread without the GIL: the same
        columns and types as the Parquet export. Default table: the format's main one
        (instructions, frames, basic_blocks, edges). A damaged trace raises TraceError
        (with its offset) from the batch where the damage is, after the rows before it.
        `"calls"` (x86/x64 traces): the call tree, the table `tracekit export --calls`
        writes (one row per dict of `calls()`, `args` as `arg0`…`arg3`)."""

    def to_pandas(self, table: Optional[str] = None) -> Any:
        """`to_arrow(table).read_all().to_pandas()` (needs pandas)."""

    def to_polars(self, table: Optional[str] = None) -> Any:
        """`polars.from_arrow(to_arrow(table).read_all())` (needs polars)."""

    def export_parquet(
        self,
        dir: PathLike,
        compression: str = "zstd",
        rows_per_file: Optional[int] = None,
        row_group_rows: int = 1 << 20,
        threads: int = 1,
        force: bool = False,
        partial: bool = False,
    ) -> Dict[str, int]:
        """Writes the records as a Parquet dataset at `dir`, as `tracekit export` does;
        returns the rows written per table. FileExistsError if `dir` exists and not
        `force`."""

    def state(self, i: int) -> Dict[str, Any]:
        """The named registers before instruction `i`: {"i", "thread", "pc", "regs":
        {name: int}} (x64dbg, gdb-tfile, amber-full, tenet). IndexError past the end,
        ValueError for formats without registers. The Trace keeps the input open and the
        index of full dumps between calls."""

    def find(
        self,
        pc: Optional[int] = None,
        tracepoint: Optional[int] = None,
        range: Optional[Tuple[int, int]] = None,
        outside: Optional[Tuple[int, int]] = None,
        mem: Union[None, int, Tuple[int, int]] = None,
    ) -> List[Dict[str, Any]]:
        """GDB tracepoint files: the frames matching every criterion given, as
        [{"frame", "tracepoint", "pc"}] (GDB's tfind)."""

    def mem(self, i: int, addr: int, len: Optional[int] = None) -> Dict[str, Any]:
        """The memory as known before instruction `i`, as `tracekit mem --json` gives it:
        {"i", "addr", "len", "bytes": [int or None], "source": [int or None], "inferred":
        [bool or None], "value": bytes or None}, and for a gdb-tfile "earlier": [bool or
        None] (collected at an earlier frame). `len` defaults to one word. IndexError past
        the end."""

    def xref(
        self, addr: Optional[int] = None, len: Optional[int] = None, *, pc: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """Every access to `len` bytes at `addr` (default one word), or with `pc=` every
        execution of that address, as `tracekit xref` lists them: [{"i", "thread", "pc"}
        plus "addr", "old", "new" for an access]."""

    def origin(
        self, i: int, target: Union[str, int], max_hops: int = 64
    ) -> List[Dict[str, Any]]:
        """Where the value of `target` (a register name, "ADDR[:LEN]" or an address of 8
        bytes) before instruction `i` came from, as `tracekit origin --json` lists it: one
        dict per hop, {"i", "thread", "pc" ("0x…"), "asm", "from", "kind", "loc"}. x86/x64
        only; IndexError past the end."""

    def calls(
        self, *, thread: Optional[int] = None, abi: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        """The call tree of an x86/x64 trace, as `tracekit calls --json` lists it: one dict
        per call in the order of its step, {"i", "thread", "depth", "target",
        "return_address", "entry_i", "ret_i", "unwound", "args", "ret", "instructions",
        "symbol"} (None where unknown). `abi`: "win64", "sysv" or "cdecl"."""

    def bbv(
        self, slice: int, *, merged: bool = False, loop_bounded: bool = False
    ) -> List[Dict[str, Any]]:
        """Basic-block vectors, as `tracekit bbv` writes them: per thread (or one merged
        stream) {"process", "thread", "instructions", "slices": [{block id: count}]}."""

    @property
    def graph(self) -> Graph:
        """A DCFG's graph (dcfg only): processes → images → routines → loops → blocks →
        edges."""

class RecordIter(Iterator[Dict[str, Any]]):
    """Records as dicts. Owns its reader: it stays valid after its Trace is gone."""

    def __iter__(self) -> RecordIter: ...
    def __next__(self) -> Dict[str, Any]: ...

class BatchIter(Iterator[pyarrow.RecordBatch]):
    """The batches under `to_arrow`'s reader (raises TraceError at damage)."""

    def __iter__(self) -> BatchIter: ...
    def __next__(self) -> pyarrow.RecordBatch: ...

class Graph:
    @property
    def processes(self) -> List[Process]: ...
    def process(self, pid: int) -> Optional[Process]: ...

class Process:
    id: int
    instr_count: Optional[int]
    images: List[Image]
    edges: List[Edge]
    def block(self, id: int) -> Optional[Block]: ...
    def edge(self, id: int) -> Optional[Edge]: ...

class Image:
    id: int
    load_addr: int
    size: int
    file_name: Optional[str]
    routines: List[Routine]
    blocks: List[Block]

class Routine:
    entry: int
    exits: List[int]
    loops: List[Loop]
    blocks: List[Block]
    def idom(self, id: int) -> Optional[int]: ...

class Loop:
    head: int
    parent: Optional[int]
    back_edge_sources: List[int]
    blocks: List[Block]

class Block:
    id: int
    addr: int
    size: int
    num_instrs: int
    count: Optional[int]
    out_edges: List[Edge]
    in_edges: List[Edge]
    successors: List[Block]
    predecessors: List[Block]

class Edge:
    id: int
    source: int
    target: int
    type: Optional[str]
    count: int
    counts: List[int]
