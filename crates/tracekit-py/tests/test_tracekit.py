"""The Python package against the command line: every fixture in testdata/ reads to the
same records as `tracekit dump`, the same summary as `tracekit info --json`, the same Arrow
tables as `tracekit export` read back with pyarrow, and the same errors as `tracekit validate
--json`. Run by `cargo test` (crates/tracekit/tests/python.rs), which builds the package
and passes the CLI's path in TRACEKIT_BIN."""

import gc
import itertools
import json
import os
import pathlib
import random
import shutil
import subprocess
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracekit

ROOT = pathlib.Path(__file__).resolve().parents[3]
TESTDATA = ROOT / "testdata"
TRACEKIT = os.environ.get("TRACEKIT_BIN", str(ROOT / "target" / "debug" / "tracekit"))

# Every readable fixture: (path relative to testdata/, forced format or None).
GOOD = [
    ("x64dbg/basic.trace64", None),
    ("x64dbg/basic.trace32", None),
    ("x64dbg/legacy-tid.trace64", None),
    ("x64dbg/sessions.trace64", None),
    ("gdb-tfile/amd64.tf", None),
    ("gdb-tfile/no-tdesc.tf", None),
    ("gdb-tfile/quirks.tf", None),
    ("gdb-tfile/tfile-basic.tf", None),
    ("dcfg/sample.dcfg.json", None),
    ("dcfg/sample.dcfg.json.gz", None),
    ("dcfg/sample.dcfg.json.bz2", None),
    ("dcfg/dialect-hex.dcfg.json", None),
    ("dcfg/dialect-qemu.dcfg.json", None),
    ("dcfg/no-cfg.dcfg.json", None),
    ("dcfg-trace/basic.trace.json", None),
    ("dcfg-trace/multi.trace.json", None),
    ("dcfg-trace/compressed.trace.json", None),
    ("amber/example.tt6", None),
    ("amber/escapes.tt6e", None),
    ("amber/all-opcodes.tt6", None),
    ("amber/full-1004.full", None),
    ("amber/full-1008.full", None),
    ("amber/threads", None),
    ("tenet/basic.log", None),
    ("tenet/qemu-x86.log", None),
]

ERRORS = sorted(
    str(p.relative_to(TESTDATA))
    for p in TESTDATA.rglob("err-*")
    if not p.name.endswith(".expected") and not p.name.endswith(".oracle")
)


def cli(*args, check=True):
    r = subprocess.run([TRACEKIT, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"tracekit {' '.join(args)}: {r.stderr}")
    return r


def cli_args(path, fmt):
    return (["--format", fmt] if fmt else []) + [str(TESTDATA / path)]


def hexnum(s):
    """`dump`'s "0x…" strings as int, on both sides (the only difference allowed)."""
    if isinstance(s, str) and s.startswith("0x") and len(s) > 2:
        try:
            return int(s, 16)
        except ValueError:
            return s
    return s


def norm(v):
    """A value as comparable JSON: hex strings as int, bytes as dump's hex digits, map
    keys as strings."""
    if isinstance(v, dict):
        return {str(k): norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, bytes):
        return v.hex()
    return hexnum(v)


def dump(path, fmt):
    out = cli("dump", *cli_args(path, fmt)).stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("path,fmt", GOOD)
def test_records_equal_dump(path, fmt):
    t = tracekit.open(TESTDATA / path, format=fmt)
    mine = list(t)
    assert mine, "fixtures have records"
    for r in mine:
        assert all(isinstance(k, str) for k in r)
    assert [norm(r) for r in mine] == [norm(r) for r in dump(path, fmt)]


def test_native_types():
    first = next(iter(tracekit.open(TESTDATA / "x64dbg/basic.trace64")))
    assert isinstance(first["pc"], int) and isinstance(first["opcode"], bytes)
    assert all(isinstance(v, int) for v in first["regs"].values())
    frame = next(iter(tracekit.open(TESTDATA / "gdb-tfile/amd64.tf")))
    assert isinstance(frame["pc"], int)


def test_tenet_rows_number_accesses_by_their_instruction():
    """A Tenet row carries what its instruction accessed (the next line's items) and its
    line; the Arrow `instructions` table has the register state before it, None until
    the trace names a register."""
    rows = list(tracekit.open(TESTDATA / "tenet/basic.log"))
    call = rows[3]  # call: its line is 5, its write is on line 6
    assert (call["i"], call["line"], call["pc"]) == (3, 5, 0x401009)
    assert call["mem"] == [
        {"access": "write", "addr": 0x7FFE0, "data": (0x40100E).to_bytes(8, "little")}
    ]
    assert rows[-1]["mem"] == [] and "mem_before" not in rows[0]
    table = tracekit.open(TESTDATA / "tenet/basic.log").to_arrow("instructions").read_all()
    assert table.column("rsp").to_pylist()[:3] == [0x7FFF0, 0x7FFE8, 0x7FFE8]
    assert table.column("rip").to_pylist() == table.column("pc").to_pylist()
    trace = "rsp=0x10,rip=0x1,mw=0x8:01\nrax=0x5,rip=0x2\n"
    with tempfile.TemporaryDirectory() as d:
        f = pathlib.Path(d) / "t.log"
        f.write_text(trace)
        first = next(iter(tracekit.open(f)))
        assert first["mem_before"] == [{"access": "write", "addr": 8, "data": b"\x01"}]
        table = tracekit.open(f).to_arrow("instructions").read_all()
        assert table.column("rax").to_pylist() == [None, 5]


@pytest.mark.parametrize("path,fmt", GOOD)
def test_info_equals_info_json(path, fmt):
    t = tracekit.open(TESTDATA / path, format=fmt)
    expected = json.loads(cli("info", "--json", *cli_args(path, fmt)).stdout)
    assert norm(t.info()) == norm(expected)
    assert t.format == expected.get("format", t.format)


@pytest.mark.parametrize("path,fmt", GOOD)
def test_arrow_equals_parquet_export(path, fmt):
    t = tracekit.open(TESTDATA / path, format=fmt)
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "ds"
        cli("export", *cli_args(path, fmt), "-o", str(out), "--threads", "1")
        manifest = json.loads((out / "_tracekit.json").read_text())
        assert t.tables() == [m["name"] for m in manifest["tables"]]
        for name in t.tables():
            reader = t.to_arrow(name)
            assert isinstance(reader, pa.RecordBatchReader)
            mine = reader.read_all()
            theirs = pq.read_table(out / name)
            assert mine.schema.equals(theirs.schema, check_metadata=False), name
            assert mine.num_rows == theirs.num_rows, name
            assert mine.to_pylist() == theirs.to_pylist(), name


def test_default_tables():
    main = {
        "x64dbg/basic.trace64": "instructions",
        "gdb-tfile/amd64.tf": "frames",
        "dcfg/sample.dcfg.json": "basic_blocks",
        "dcfg-trace/basic.trace.json": "edges",
        "amber/example.tt6": "instructions",
    }
    for path, table in main.items():
        t = tracekit.open(TESTDATA / path)
        assert t.to_arrow().schema.equals(t.to_arrow(table).schema), path
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64").to_arrow("nope")


def test_calls_table_equals_calls_and_the_export(tmp_path):
    path = TESTDATA / "tenet/basic.log"
    t = tracekit.open(path)
    table = t.to_arrow("calls").read_all()
    calls = t.calls()
    assert table.num_rows == len(calls) > 0
    rows = table.to_pylist()
    for row, call in zip(rows, calls):
        args = [row.pop(f"arg{k}") for k in range(4)]
        assert args == call.pop("args")
        assert row == call
    cli("export", str(path), "-o", str(tmp_path / "ds"), "--calls")
    assert pq.read_table(tmp_path / "ds" / "calls").equals(table)
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "dcfg/sample.dcfg.json").to_arrow("calls").read_all()


def test_format_options_apply_only_to_the_formats_that_read_them():
    with pytest.raises(ValueError, match="arch not for x64dbg input"):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64", arch="amd64")
    with pytest.raises(ValueError, match="big_endian not for dcfg input"):
        tracekit.open(TESTDATA / "dcfg/sample.dcfg.json", big_endian=True)
    assert tracekit.open(TESTDATA / "tenet/basic.log", arch="amd64").info()["format"] == "tenet"


def test_export_parquet_matches_cli(tmp_path):
    t = tracekit.open(TESTDATA / "x64dbg/basic.trace64")
    rows = t.export_parquet(tmp_path / "mine")
    cli("export", str(TESTDATA / "x64dbg/basic.trace64"), "-o", str(tmp_path / "cli"))
    for name, n in rows.items():
        a = pq.read_table(tmp_path / "mine" / name)
        b = pq.read_table(tmp_path / "cli" / name)
        assert a.num_rows == n and a.to_pylist() == b.to_pylist()
    # On two threads (stretches of row groups, each encoded where it is read): the CLI's
    # files, byte for byte.
    t.export_parquet(tmp_path / "two", threads=2, row_group_rows=700)
    cli("export", str(TESTDATA / "x64dbg/basic.trace64"), "-o", str(tmp_path / "cli1"),
        "--threads", "1", "--row-group-rows", "700")
    parts = sorted(p.relative_to(tmp_path / "cli1") for p in (tmp_path / "cli1").rglob("*.parquet"))
    assert parts
    for part in parts:
        assert (tmp_path / "two" / part).read_bytes() == (tmp_path / "cli1" / part).read_bytes()
    with pytest.raises(OSError):
        t.export_parquet(tmp_path / "mine")  # exists, no force
    t.export_parquet(tmp_path / "mine", force=True, compression="snappy")


@pytest.mark.parametrize("path", ERRORS)
def test_errors_carry_offsets(path):
    """Every damaged fixture raises where `tracekit validate --json` says (offset, JSON
    path), and iteration stops with `dump`'s error after the same records."""
    expected = json.loads(cli("validate", "--json", str(TESTDATA / path), check=False).stdout)
    assert expected["ok"] is False
    with pytest.raises((tracekit.TraceError, OSError)) as e:
        tracekit.validate(TESTDATA / path)
    if isinstance(e.value, tracekit.TraceError):
        assert e.value.offset == expected["offset"], str(e.value)
        assert e.value.path == expected["path"]
        assert str(e.value) == expected["error"]
    d = cli("dump", str(TESTDATA / path), check=False)
    assert d.returncode != 0
    got = []
    try:
        for r in tracekit.open(TESTDATA / path):
            got.append(r)
    except tracekit.TraceError as err:
        assert f"error: {err}" in d.stderr
        if isinstance(err, tracekit.FormatError):
            return
        if err.offset is not None:
            assert f"0x{err.offset:x}" in str(err)
    # (Iteration may also end without an error: validate checks more than the reader.)
    lines = [json.loads(x) for x in d.stdout.splitlines()]
    assert [norm(r) for r in got] == [norm(r) for r in lines]


def test_error_attributes():
    with pytest.raises(tracekit.FormatError) as e:
        tracekit.open(b"not a trace at all")
    assert isinstance(e.value, tracekit.TraceError)
    assert e.value.offset is None and e.value.path is None
    data = (TESTDATA / "x64dbg/err-truncated-block.bin").read_bytes()
    t = tracekit.open(data)
    with pytest.raises(tracekit.TraceError) as e:
        list(t)
    assert e.value.offset == 0x8FA and e.value.record == 5 and e.value.path is None
    with pytest.raises(tracekit.TraceError) as e:
        list(tracekit.open(TESTDATA / "dcfg/err-short-row.dcfg.json"))
    assert e.value.path == "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].SIZE"
    assert e.value.offset == 0x968
    with pytest.raises(FileNotFoundError):
        tracekit.open(TESTDATA / "no-such-file")
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64", format="nope")
    with pytest.raises(TypeError):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64", bogus=1)


def test_bytes_and_memoryview():
    data = (TESTDATA / "x64dbg/basic.trace64").read_bytes()
    expected = list(tracekit.open(TESTDATA / "x64dbg/basic.trace64"))
    assert list(tracekit.open(data)) == expected
    assert list(tracekit.open(memoryview(data))) == expected
    assert list(tracekit.open(bytearray(data))) == expected
    tt6 = (TESTDATA / "amber/example.tt6").read_bytes()
    assert list(tracekit.open(tt6, format="tt6")) == list(tracekit.open(TESTDATA / "amber/example.tt6"))


def test_iterator_outlives_trace():
    t = tracekit.open(TESTDATA / "x64dbg/basic.trace64")
    expected = list(t)
    it = iter(t)
    first = next(it)
    del t
    gc.collect()
    assert [first, *it] == expected
    assert next(it, None) is None  # fused
    # An abandoned iterator stops its reader.
    for _ in range(20):
        it = iter(tracekit.open(TESTDATA / "x64dbg/basic.trace64"))
        next(it)
        del it
    reader = tracekit.open(TESTDATA / "x64dbg/basic.trace64").to_arrow()
    gc.collect()
    assert reader.read_all().num_rows == 1100


def test_seek():
    t = tracekit.open(TESTDATA / "x64dbg/basic.trace64")
    assert list(t.seek(700)) == list(t)[700:]
    assert list(t.seek(5000)) == []


def repeated_trace(path, repeat, out):
    """An x64dbg trace of `path`'s header, then its block stream `repeat` times (each
    copy starts with a full dump, so the result is a valid trace)."""
    data = path.read_bytes()
    head = 8 + int.from_bytes(data[4:8], "little")
    with open(out, "wb") as f:
        f.write(data[:head])
        for _ in range(repeat):
            f.write(data[head:])


def test_seek_jumps_through_the_index(tmp_path):
    """`seek(i)` gives the records iteration gives from i on, for i near and far, at and
    around full dumps and past the end; and seeking far costs about what seeking near
    does (it jumps through the index of full dumps instead of reading the records before
    i, which would take ~60 times as long for the far one here)."""
    path = tmp_path / "big.trace64"
    repeated_trace(TESTDATA / "x64dbg/basic.trace64", 300, path)  # 330,000 instructions
    t = tracekit.open(path)
    n = 300 * 1100
    every = list(itertools.islice(t, 6000))
    for i in (0, 1, 511, 512, 513, 4095, 4096, 5000):
        assert list(itertools.islice(t.seek(i), 40)) == every[i : i + 40], i
    tail = [r for r in tracekit.open(path).seek(n - 1500)]
    assert len(tail) == 1500 and tail[0]["i"] == n - 1500 and tail[-1]["i"] == n - 1
    for i in (n - 1100, n - 513, n - 512, n - 1):
        got = list(itertools.islice(t.seek(i), 40))
        assert got == tail[i - (n - 1500) :][:40], i
    assert list(t.seek(n)) == [] and list(t.seek(n + 10**9)) == []

    def first(i):
        t0 = time.perf_counter()
        r = next(t.seek(i))
        assert r["i"] == i
        return time.perf_counter() - t0

    near = min(first(5000) for _ in range(5))
    far = min(first(n - 2) for _ in range(5))
    assert far < 5 * near + 0.02, (near, far)


def test_state_keeps_the_trace_open(tmp_path):
    """`state` keeps its input and index: after the first call the file can be gone and
    later calls still answer (the same as a fresh Trace's), quickly."""
    path = tmp_path / "big.trace64"
    repeated_trace(TESTDATA / "x64dbg/basic.trace64", 100, path)
    n = 100 * 1100
    expected = {i: tracekit.open(path).state(i) for i in (5, n // 2, n - 1)}
    t = tracekit.open(path)
    t0 = time.perf_counter()
    assert t.state(n - 1) == expected[n - 1]
    first = time.perf_counter() - t0
    moved = tmp_path / "moved.trace64"
    shutil.move(path, moved)
    assert t.state(5) == expected[5]
    assert t.state(n // 2) == expected[n // 2]

    def timed():
        t0 = time.perf_counter()
        t.state(n - 1)
        return time.perf_counter() - t0

    # The best of five, so that one preempted call on a loaded machine cannot fail this.
    again = min(timed() for _ in range(5))
    assert again < first, (first, again)
    # Its records (read afresh) are another matter: the file is gone.
    with pytest.raises(FileNotFoundError):
        list(t)
    shutil.move(moved, path)
    assert next(t.seek(n - 1))["i"] == n - 1


def test_arrow_of_many_batches_equals_parquet_export(tmp_path):
    """A trace of several batches (built by several threads when there are cores: each
    from its own seek) streams the tables of the export, in order; `to_pandas`-free."""
    path = tmp_path / "big.trace64"
    repeated_trace(TESTDATA / "x64dbg/basic.trace64", 150, path)  # 165,000 instructions
    out = tmp_path / "ds"
    cli("export", str(path), "-o", str(out), "--threads", "1")
    t = tracekit.open(path)
    for name in t.tables():
        mine = t.to_arrow(name).read_all()
        theirs = pq.read_table(out / name)
        assert mine.schema.equals(theirs.schema, check_metadata=False), name
        assert mine.num_rows == theirs.num_rows, name
        assert mine.to_pylist() == theirs.to_pylist(), name
    assert t.to_arrow().read_all().column("i").to_pylist() == list(range(165_000))


def arrow_outcome(source):
    """`to_arrow()`'s rows (every column, as one table) and the error that ends them
    (offset, record, text), if any."""
    reader = tracekit.open(source).to_arrow()
    batches = []
    error = None
    try:
        for b in reader:
            batches.append(b)
    except tracekit.TraceError as e:
        error = (e.offset, e.record, str(e))
    return pa.Table.from_batches(batches, reader.schema), error


def test_arrow_on_several_threads_equals_one_thread(tmp_path):
    """Stretches built on several threads (the seek index made meanwhile, or kept from a
    first call; bytes shared by the readers) give the batches of one thread, in order, and
    on a trace cut short the same rows before the same error."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    path = tmp_path / "big.trace64"
    repeated_trace(TESTDATA / "x64dbg/basic.trace64", 250, path)  # 275,000 instructions
    data = path.read_bytes()
    cut = tmp_path / "cut.trace64"
    cut.write_bytes(data[: len(data) * 7 // 10 + 3])
    sources = [path, data, cut, cut.read_bytes()]
    cpus = os.sched_getaffinity(0)
    # One core: `to_arrow` reads on one thread.
    os.sched_setaffinity(0, {min(cpus)})
    try:
        alone = [arrow_outcome(s) for s in sources]
    finally:
        os.sched_setaffinity(0, cpus)
    assert alone[0][0].column("i").to_pylist() == list(range(275_000))
    assert alone[0][1] is None
    assert alone[2][1] is not None and 0 < alone[2][0].num_rows < 275_000
    for source, (rows, error) in zip(sources, alone):
        got, got_error = arrow_outcome(source)
        assert got.equals(rows) and got_error == error
    t = tracekit.open(path)
    first = t.to_arrow().read_all()
    assert t.to_arrow().read_all().equals(first)
    assert first.equals(alone[0][0])


def test_arrow_errors_are_trace_errors():
    """A damaged trace's error in the middle of a `to_arrow` stream is the TraceError
    (with its offset and record) that iteration raises, after the rows before it; the
    same through `read_all`, pandas-free."""
    path = TESTDATA / "x64dbg/err-truncated-block.bin"
    with pytest.raises(tracekit.TraceError) as it_err:
        list(tracekit.open(path))
    rows = []
    with pytest.raises(tracekit.TraceError) as e:
        for b in tracekit.open(path).to_arrow():
            rows.extend(b.column("i").to_pylist())
    assert rows == list(range(5))
    assert (e.value.offset, e.value.record, e.value.path) == (0x8FA, 5, None)
    assert str(e.value) == str(it_err.value)
    for table in ("instructions", "registers", "memory"):
        with pytest.raises(tracekit.TraceError) as e:
            tracekit.open(path).to_arrow(table).read_all()
        assert e.value.offset == 0x8FA, table
    with pytest.raises(tracekit.TraceError) as e:
        tracekit.open(TESTDATA / "dcfg/err-short-row.dcfg.json").to_arrow().read_all()
    assert e.value.path == "PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].SIZE"


def test_random_bytes_never_crash():
    """Random and mutated inputs through every format and every entry point: errors,
    never a crash of the interpreter."""
    rng = random.Random(16)
    seeds = [
        (TESTDATA / p).read_bytes()
        for p, _ in GOOD
        if (TESTDATA / p).is_file()
    ]
    inputs = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(30)]
    for s in seeds:
        for _ in range(4):
            b = bytearray(s[: rng.randrange(0, len(s) + 1)])
            for _ in range(rng.randrange(1, 8)):
                if b:
                    b[rng.randrange(len(b))] = rng.getrandbits(8)
            inputs.append(bytes(b))
    expected = (tracekit.TraceError, ValueError, OSError)
    for data in inputs:
        for fmt in [None, *tracekit.formats]:
            try:
                t = tracekit.open(data, format=fmt)
            except expected:
                continue
            for op in (
                lambda: list(t),
                t.info,
                lambda: [t.to_arrow(n).read_all() for n in t.tables()],
            ):
                try:
                    op()
                except (*expected, pa.ArrowException):
                    pass
            try:
                tracekit.validate(data, format=fmt)
            except expected:
                pass


def test_state_equals_cli():
    path = TESTDATA / "x64dbg/basic.trace64"
    t = tracekit.open(path)
    for at in (0, 700, 1099):
        expected = json.loads(cli("state", str(path), "--at", str(at), "--json").stdout)
        s = t.state(at)
        assert s["i"] == expected["i"] and s["thread"] == expected["thread"]
        assert norm(s["regs"]) == norm(expected["regs"])
    with pytest.raises(IndexError):
        t.state(1100)
    tf = TESTDATA / "gdb-tfile/amd64.tf"
    expected = json.loads(cli("state", str(tf), "--at", "1", "--json").stdout)
    assert norm(tracekit.open(tf).state(1)["regs"]) == norm(expected["regs"])
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "dcfg/sample.dcfg.json").state(0)


def test_find_equals_cli():
    tf = TESTDATA / "gdb-tfile/amd64.tf"
    frames = list(tracekit.open(tf))
    pc = frames[1]["pc"]
    for kwargs, args in (
        ({"pc": pc}, ["--pc", hex(pc)]),
        ({"tracepoint": frames[0]["tracepoint"]}, ["--tracepoint", str(frames[0]["tracepoint"])]),
    ):
        expected = [json.loads(x) for x in cli("find", str(tf), "--json", *args).stdout.splitlines()]
        assert norm(tracekit.open(tf).find(**kwargs)) == norm(expected)
        assert expected
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64").find(pc=1)


def test_pandas_and_polars():
    t = tracekit.open(TESTDATA / "x64dbg/basic.trace64")
    try:
        import pandas  # noqa: F401
    except ImportError:
        pandas = None
    if pandas is not None:
        df = t.to_pandas()
        assert len(df) == 1100 and list(df["pc"][:2]) == [r["pc"] for r in list(t)[:2]]
    try:
        import polars  # noqa: F401
    except ImportError:
        polars = None
    if polars is not None:
        df = t.to_polars("memory")
        assert df.height == t.to_arrow("memory").read_all().num_rows
    if pandas is None and polars is None:
        pytest.skip("neither pandas nor polars installed")


def test_dcfg_graph_matches_tables():
    """The graph objects against the same DCFG's tables (a separate reader path)."""
    t = tracekit.open(TESTDATA / "dcfg/sample.dcfg.json")
    g = t.graph
    blocks = t.to_arrow("basic_blocks").read_all().to_pylist()
    edges = t.to_arrow("edges").read_all().to_pylist()
    routines = t.to_arrow("routines").read_all().to_pylist()
    loops = t.to_arrow("loops").read_all().to_pylist()
    assert [p.id for p in g.processes] == sorted({b["pid"] for b in blocks} | {e["pid"] for e in edges})
    for p in g.processes:
        assert g.process(p.id).id == p.id
        mine = sorted(b.id for i in p.images for b in i.blocks)
        assert mine == sorted(b["id"] for b in blocks if b["pid"] == p.id)
        pe = [e for e in edges if e["pid"] == p.id]
        assert sorted((e.id, e.source, e.target, e.count, e.type) for e in p.edges) == sorted(
            (e["id"], e["source"], e["target"], e["count"], e["type"]) for e in pe
        )
        for i in p.images:
            for b in i.blocks:
                assert sorted(e.id for e in b.out_edges) == sorted(e["id"] for e in pe if e["source"] == b.id)
                assert sorted(e.id for e in b.in_edges) == sorted(e["id"] for e in pe if e["target"] == b.id)
                ids = {x.id for x in b.successors}
                assert ids <= {e["target"] for e in pe if e["source"] == b.id}
                assert p.block(b.id).addr == b.addr
        mine_r = sorted((r.entry, len(r.loops)) for i in p.images for r in i.routines)
        assert mine_r == sorted((r["entry"], r["loops"]) for r in routines if r["pid"] == p.id)
        mine_l = sorted(
            (lp.head, lp.parent, sorted(x.id for x in lp.blocks))
            for i in p.images
            for r in i.routines
            for lp in r.loops
        )
        assert mine_l == sorted(
            (lp["head"], lp["parent"] or None, sorted(lp["nodes"])) for lp in loops if lp["pid"] == p.id
        )
    assert p.block(2**63) is None
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "x64dbg/basic.trace64").graph


def test_stubs_and_docstrings_cover_the_api():
    stub = (ROOT / "crates/tracekit-py/tracekit.pyi").read_text()
    for name in dir(tracekit):
        if name.startswith("_"):
            continue
        assert f"{name}" in stub, name
        obj = getattr(tracekit, name)
        if callable(obj):
            assert obj.__doc__, name
    for name in dir(tracekit.Trace):
        if not name.startswith("_"):
            assert f"def {name}(" in stub, name
            assert getattr(tracekit.Trace, name).__doc__, name


def readme_python(path, heading):
    """The first ```python block under `heading` in the README at `path`."""
    section = path.read_text().split(heading, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example(capsys, monkeypatch):
    """The Python examples of the repository's README and of the package's run as written,
    from the repository root."""
    monkeypatch.chdir(ROOT)
    for path, heading in [
        (ROOT / "README.md", "## Python"),
        (ROOT / "crates/tracekit-py/README.md", "## API"),
    ]:
        code = readme_python(path, heading)
        exec(compile(code, str(path), "exec"), {})
        out = capsys.readouterr().out
        assert "x64dbg ['instructions', 'registers', 'memory']" in out, path
        assert "\n1100\n" in out, path
        assert "damaged at offset" in out, path


def ints(v):
    """A `tracekit … --json` value with its `0x…` strings as ints, as the package gives them."""
    if isinstance(v, str) and v.startswith("0x"):
        return int(v, 16)
    if isinstance(v, list):
        return [ints(x) for x in v]
    if isinstance(v, dict):
        return {k: ints(x) for k, x in v.items()}
    return v


def test_calls_equals_cli():
    """`Trace.calls` gives `tracekit calls --json`'s lines (addresses as ints, the symbol
    a string)."""
    for rel in ["tenet/basic.log", "x64dbg/basic.trace64"]:
        path = TESTDATA / rel
        lines = [json.loads(l) for l in cli("calls", "-q", "--json", str(path)).stdout.splitlines()]
        expected = [dict(ints(l), symbol=l["symbol"]) for l in lines[:-1]]
        assert tracekit.open(path).calls() == expected
    rows = tracekit.open(TESTDATA / "tenet/basic.log").calls(abi="win64")
    assert rows[0]["target"] == 0x402000 and rows[0]["ret"] == 0x55
    with pytest.raises(ValueError):
        tracekit.open(TESTDATA / "tenet/basic.log").calls(abi="pascal")


def test_mem_equals_cli():
    """`Trace.mem` gives `tracekit mem --json`'s answer, with the value as bytes; a
    tfile's bytes from earlier frames are marked as the CLI marks them."""
    path = TESTDATA / "x64dbg/basic.trace64"
    t = tracekit.open(path)
    for at, addr, length in ((701, 0x24FE00, 8), (690, 0x24FE00, 8), (5, 0x24FDF0, 32)):
        expected = json.loads(
            cli("mem", str(path), "--at", str(at), hex(addr), str(length), "--json").stdout
        )
        m = t.mem(at, addr, length)
        assert {k: m[k] for k in expected} == ints(expected)
        if None not in m["bytes"]:
            assert m["value"] == bytes(m["bytes"])
        else:
            assert m["value"] is None
    assert t.mem(701, 0x24FE00)["value"] == (0xB63E1BA01EC921ED).to_bytes(8, "little")
    with pytest.raises(IndexError):
        t.mem(1100, 0x24FE00)
    # quirks.tf's frame 6 does not collect 0x404060.., which frame 5 did.
    tf = TESTDATA / "gdb-tfile/quirks.tf"
    ft = tracekit.open(tf)
    for at in (5, 6):
        expected = json.loads(cli("mem", str(tf), "--at", str(at), "0x404060", "8", "--json").stdout)
        m = ft.mem(at, 0x404060, 8)
        assert {k: m[k] for k in expected} == ints(expected)
        assert m["earlier"] == [at == 6] * 8
        assert m["source"] == [5] * 8
    # An x64dbg answer has no "earlier".
    assert "earlier" not in t.mem(701, 0x24FE00)


def test_xref_equals_cli():
    path = TESTDATA / "x64dbg/basic.trace64"
    t = tracekit.open(path)
    expected = [
        ints(json.loads(l)) for l in cli("xref", str(path), "0x24fe00:8").stdout.splitlines()
    ]
    hits = t.xref(0x24FE00, len=8)
    assert len(hits) > 2
    assert hits == expected
    pc = hits[0]["pc"]
    expected = [
        ints(json.loads(l)) for l in cli("xref", str(path), "--pc", hex(pc)).stdout.splitlines()
    ]
    assert t.xref(pc=pc) == expected and len(expected) >= 1
    with pytest.raises(ValueError):
        t.xref()


def test_origin_equals_cli():
    """`Trace.origin` gives the hops `tracekit origin --json` prints, for registers and memory."""
    path = TESTDATA / "x64dbg/basic.trace64"
    t = tracekit.open(path)
    for at, target in [(1050, "rax"), (1099, "0x34fdf8"), (701, "0x24fe00:4"), (300, "rsp")]:
        expected = [
            json.loads(l)
            for l in cli("origin", "--json", "--at", str(at), str(path), target).stdout.splitlines()
        ]
        assert len(expected) >= 1
        assert t.origin(at, target) == expected
    assert t.origin(1099, 0x34FDF8) == t.origin(1099, "0x34fdf8:8")
    assert len(t.origin(1050, "rax", max_hops=2)) == 2
    with pytest.raises(IndexError):
        t.origin(1100, "rax")
    with pytest.raises(ValueError):
        t.origin(5, "nope")


def test_diff_equals_cli(tmp_path):
    """`tracekit.diff` gives the regions and the summary of `tracekit diff --json`."""
    a = TESTDATA / "x64dbg/basic.trace64"
    same = tracekit.diff(a, a)
    assert same["equal"] and same["regions"] == []
    assert same["summary"]["regions"] == 0
    # B: rax changed from the middle of a Tenet trace on (a text format, easy to edit).
    ta = TESTDATA / "tenet/basic.log"
    lines = ta.read_text().splitlines()
    k = next(
        n
        for n, l in enumerate(lines)
        if n > len(lines) // 2 and not l.startswith("#") and "rax=" not in l
    )
    lines[k] = "rax=0x1234," + lines[k]
    tb = tmp_path / "b.log"
    tb.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [TRACEKIT, "diff", str(ta), str(tb), "--json"], capture_output=True, text=True
    )
    expected = [json.loads(l) for l in out.stdout.splitlines()]
    got = tracekit.diff(ta, tb)
    assert got["regions"] == [ints(r) for r in expected[:-1]]
    assert got["summary"] == ints(expected[-1]["summary"])
    assert got["equal"] == (out.returncode == 0)
    # Traces as opened work too; formats must agree.
    assert tracekit.diff(tracekit.open(ta), tracekit.open(ta))["equal"]
    with pytest.raises(ValueError):
        tracekit.diff(a, ta)


def test_bbv_equals_cli(tmp_path):
    """`Trace.bbv` gives the slices `tracekit bbv` writes, per thread and merged."""
    path = TESTDATA / "x64dbg/basic.trace64"
    t = tracekit.open(path)
    for merged in (False, True):
        out = tmp_path / ("m.bb" if merged else "t.bb")
        args = ["bbv", str(path), "--slice", "100", "-o", str(out)] + (["--global"] if merged else [])
        cli(*args)
        streams = t.bbv(slice=100, merged=merged)
        assert streams
        for s in streams:
            file = out if merged else tmp_path / f"t.T{s['thread']}.bb"
            slices = [
                {int(e.split(":")[1]): int(e.split(":")[2]) for e in line[1:].split()}
                for line in file.read_text().splitlines()
                if line.startswith("T")
            ]
            assert s["slices"] == slices
            assert s["instructions"] == sum(sum(v.values()) for v in slices)
            assert (s["thread"] is None) == merged
    with pytest.raises(ValueError):
        t.bbv(slice=0)
