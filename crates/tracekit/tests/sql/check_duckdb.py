#!/usr/bin/env python3
"""Checks tracekit Parquet datasets with DuckDB against `tracekit dump`.

Usage: check_duckdb.py [--partial] DIR DUMP.jsonl [DIR DUMP.jsonl ...]

For each dataset DIR (written by `tracekit export`) and the JSON Lines that `tracekit dump`
printed for the same input:

* every table of DIR/_tracekit.json has its folder, DuckDB reads it with
  read_parquet('DIR/<t>/*.parquet') (even empty), its columns and types are the manifest's,
  its row count and file count are the manifest's, non-nullable columns hold no NULL;
* every dump line of a reader table (the first table; lines with "table":"t" for the others)
  is one row of that table, in order (ORDER BY i where the table has i, else file order), and
  every scalar field equals the same-named column ("0x…" strings as integers, byte strings
  as bytes); a nested object whose keys are columns is a flattened record;
* every other list/object field is a child table: its rows start with the parent's key
  columns, their number per parent equals the list/object's length, and their values equal
  the elements (list of objects: same-named columns; object: first column is the key, the
  first non-NULL other column the value; list of values: one column holds the values);
* the manifest says "complete": true, or with --partial "complete": false with an error and
  its offset.

The checks are driven by the dump and the manifest only (no per-format column lists), so they
follow schema changes. Prints one line per problem (dataset, table, row, column, expected vs
got) and exits 1 if there is any.
"""

import json
import os
import re
import sys

import duckdb

MAX_REPORTS_PER_DATASET = 40


class Report:
    def __init__(self, label):
        self.label = label
        self.problems = []

    def fail(self, msg):
        self.problems.append(f"{self.label}: {msg}")

    def full(self):
        return len(self.problems) >= MAX_REPORTS_PER_DATASET


DUCK_TYPES = {
    "UInt8": "UTINYINT",
    "UInt16": "USMALLINT",
    "UInt32": "UINTEGER",
    "UInt64": "UBIGINT",
    "Int8": "TINYINT",
    "Int16": "SMALLINT",
    "Int32": "INTEGER",
    "Int64": "BIGINT",
    "Boolean": "BOOLEAN",
    "Binary": "BLOB",
    "LargeBinary": "BLOB",
    "Utf8": "VARCHAR",
    "LargeUtf8": "VARCHAR",
    "Float32": "FLOAT",
    "Float64": "DOUBLE",
}


def base_type(arrow):
    """The manifest's Arrow type without dictionary/list wrappers: ('list'|None, inner)."""
    m = re.fullmatch(r"Dictionary\(\w+, (.+)\)", arrow)
    if m:
        return base_type(m.group(1))
    m = re.fullmatch(r"(?:Large)?List\((?:non-null )?(.+)\)", arrow)
    if m:
        inner = base_type(m.group(1))
        return ("list", inner[1])
    return (None, arrow)


def duck_type(arrow):
    kind, inner = base_type(arrow)
    t = DUCK_TYPES.get(inner, f"?{inner}")
    return t + "[]" if kind == "list" else t


def convert(value, arrow):
    """A dump value as the Python value DuckDB returns for a column of Arrow type `arrow`.
    Raises ValueError when the dump value cannot be that type."""
    if value is None:
        return None
    kind, inner = base_type(arrow)
    if kind == "list":
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON list for {arrow}")
        return [convert(v, inner) for v in value]
    if inner.startswith(("UInt", "Int")):
        if isinstance(value, bool):
            raise ValueError("boolean for an integer column")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?0x[0-9a-fA-F]+", value):
            return int(value, 16)
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
            return int(value)
        raise ValueError(f"{value!r} is not an integer")
    if inner in ("Binary", "LargeBinary"):
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a hex byte string")
        s = value[2:] if value.startswith("0x") else value
        if len(s) % 2:
            s = "0" + s
        return bytes.fromhex(s)
    if inner == "Boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not a boolean")
        return value
    if inner in ("Utf8", "LargeUtf8"):
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a string")
        return value
    return value


def same(expected, got):
    if isinstance(got, (bytes, bytearray, memoryview)):
        got = bytes(got)
    if isinstance(got, tuple):
        got = list(got)
    return expected == got and type(expected) is type(got) or (
        isinstance(expected, int)
        and isinstance(got, int)
        and not isinstance(expected, bool)
        and not isinstance(got, bool)
        and expected == got
    )


def show(v, limit=120):
    s = repr(bytes(v)) if isinstance(v, memoryview) else repr(v)
    return s if len(s) <= limit else s[:limit] + "…"


def composite(v):
    return isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, dict) for x in v))


class Dataset:
    def __init__(self, con, root, report):
        self.con = con
        self.root = root
        self.r = report
        with open(os.path.join(root, "_tracekit.json"), encoding="utf-8") as f:
            self.manifest = json.load(f)
        self.tables = {t["name"]: t for t in self.manifest.get("tables", [])}
        self.order = [t["name"] for t in self.manifest.get("tables", [])]
        self.cols = {n: [c["name"] for c in t["columns"]] for n, t in self.tables.items()}
        # Columns `tracekit dump` does not show (x64dbg register state): Parquet only.
        self.hidden = {
            n: {c["name"] for c in t["columns"] if c.get("in_dump", True) is False}
            for n, t in self.tables.items()
        }
        self.types = {
            n: {c["name"]: c["type"] for c in t["columns"]} for n, t in self.tables.items()
        }
        self.readable = set()
        self.used = {}  # child table -> "parent.field" that maps to it

    def glob(self, t):
        return os.path.join(self.root, t, "*.parquet").replace("'", "''")

    # ---- table-level checks -------------------------------------------------------------
    def check_tables(self):
        m = self.manifest
        if m.get("tracekit_schema") is None:
            self.r.fail("manifest has no tracekit_schema")
        src = m.get("source") or {}
        for k in ("file", "size", "format"):
            if k not in src:
                self.r.fail(f"manifest source has no {k!r}")
        if len(self.order) != len(set(self.order)):
            self.r.fail(f"manifest lists a table name twice: {self.order}")
        on_disk = sorted(
            d for d in os.listdir(self.root) if os.path.isdir(os.path.join(self.root, d))
        )
        if sorted(set(self.order)) != on_disk:
            self.r.fail(f"table folders {on_disk} != manifest tables {sorted(set(self.order))}")
        for name, t in self.tables.items():
            folder = os.path.join(self.root, name)
            if not os.path.isdir(folder):
                self.r.fail(f"table {name}: folder {folder} missing")
                continue
            files = sorted(f for f in os.listdir(folder) if f.endswith(".parquet"))
            if len(files) != t.get("files"):
                self.r.fail(f"table {name}: {len(files)} parquet file(s) on disk, manifest says files={t.get('files')}")
            size = sum(os.path.getsize(os.path.join(folder, f)) for f in files)
            if size != t.get("bytes"):
                self.r.fail(f"table {name}: files hold {size} bytes, manifest says bytes={t.get('bytes')}")
            if not t["columns"]:
                self.r.fail(f"table {name}: manifest lists no columns (a Parquet file without columns; DuckDB and Spark cannot read it)")
            try:
                desc = self.con.sql(f"DESCRIBE SELECT * FROM read_parquet('{self.glob(name)}')").fetchall()
                (n,) = self.con.sql(f"SELECT count(*) FROM read_parquet('{self.glob(name)}')").fetchall()[0]
            except duckdb.Error as e:
                self.r.fail(f"table {name}: DuckDB cannot read {self.glob(name)}: {str(e).splitlines()[0]}")
                continue
            self.readable.add(name)
            if n != t.get("rows"):
                self.r.fail(f"table {name}: DuckDB counts {n} rows, manifest says rows={t.get('rows')}")
            got = [(d[0], d[1]) for d in desc]
            want = [(c["name"], duck_type(c["type"])) for c in t["columns"]]
            if got != want:
                self.r.fail(f"table {name}: DuckDB columns {got} != manifest columns {want}")
            for c in t["columns"]:
                if not c["nullable"] and c["name"] in [g[0] for g in got]:
                    q = f'SELECT count(*) FROM read_parquet(\'{self.glob(name)}\') WHERE "{c["name"]}" IS NULL'
                    (nulls,) = self.con.sql(q).fetchall()[0]
                    if nulls:
                        self.r.fail(f"table {name}: non-nullable column {c['name']} holds {nulls} NULL(s)")

    def check_complete(self, partial):
        m = self.manifest
        if not partial:
            if m.get("complete") is not True:
                self.r.fail(f"manifest complete={m.get('complete')!r}, expected true")
            for k in ("error", "offset"):
                if k in m and m[k] is not None:
                    self.r.fail(f"complete manifest carries {k}={m[k]!r}")
        else:
            if m.get("complete") is not False:
                self.r.fail(f"partial export: manifest complete={m.get('complete')!r}, expected false")
            if not isinstance(m.get("error"), str) or not m.get("error"):
                self.r.fail(f"partial export: manifest error={m.get('error')!r}, expected the error message")
            if not isinstance(m.get("offset"), int):
                self.r.fail(f"partial export: manifest offset={m.get('offset')!r}, expected the error's offset")

    # ---- rows against the dump ----------------------------------------------------------
    def fetch(self, table, order_by_i):
        cols = self.cols[table]
        sel = ", ".join(f'"{c}"' for c in cols)
        order = '"i"' if order_by_i and "i" in cols else "filename, file_row_number"
        q = (
            f"SELECT {sel} FROM read_parquet('{self.glob(table)}', filename=true, "
            f"file_row_number=true) ORDER BY {order}"
        )
        return [dict(zip(cols, row)) for row in self.con.sql(q).fetchall()]

    def find_child(self, parent, field, values, elements):
        """The child table that `parent.field` (a list/object in the dump) maps to."""
        cands = [t for t in self.order if t != parent and t not in self.reader_tables]

        def name_score(t):
            if t == field:
                return 3
            if field in t or t in field:
                return 2
            # `mem_before` → `memory_before`: the same qualifier after the first `_`.
            if "_" in field and t.endswith(field[field.index("_"):]):
                return 2
            if os.path.commonprefix([t, field]).__len__() >= 3:
                return 1
            return 0

        def shape_ok(t):
            keys = self.child_keys(parent, t, elements)
            own = self.cols[t][len(keys):]
            if not own:
                return False
            if values == "objects":
                fields = set().union(*[set(e) for e in elements]) if elements else set()
                return fields <= set(own)
            return True

        scored = [(name_score(t), -self.order.index(t), t) for t in cands if shape_ok(t)]
        scored = [s for s in scored if s[0] > 0]
        if not scored:
            return None
        scored.sort(reverse=True)
        return scored[0][2]

    def child_keys(self, parent, child, elements):
        """The leading columns of `child` that copy a key of `parent`."""
        own_fields = set()
        for e in elements:
            if isinstance(e, dict):
                own_fields |= set(e)
        keys = []
        for c in self.cols[child]:
            if c in self.cols[parent] and c not in own_fields:
                keys.append(c)
            else:
                break
        return keys

    def check_all(self, lines):
        by_table = {}
        main = self.order[0] if self.order else None
        for lineno, d in enumerate(lines, 1):
            t = d.pop("table", main)
            by_table.setdefault(t, []).append((lineno, d))
        self.reader_tables = set(by_table)
        carriers = set()
        for t, entries in by_table.items():
            if t not in self.tables:
                # A carrier table: its lines hold only keys and child lists (amber's dangling
                # escapes); the export writes their child rows, not the lines themselves.
                scalars = {k for _, d in entries for k, v in d.items() if not composite(v) and not isinstance(v, list)}
                has_child = all(any(composite(v) or isinstance(v, list) for v in d.values()) for _, d in entries)
                if has_child:
                    carriers.add(t)
                    self.cols[t] = sorted(scalars)
                    continue
                self.r.fail(f"dump has {len(entries)} line(s) of table {t!r} that the manifest does not list")
                continue
        # Reader tables that never appear in the dump must be empty... unless a field maps to them.
        children = {}  # child table -> list of (where, keyvals, kind, element)
        for t, entries in by_table.items():
            if t not in self.tables and t not in carriers:
                continue
            objs = [(f"dump line {n}", {}, "objects", d) for n, d in entries]
            if t in self.readable and t not in carriers:
                # ORDER BY i where the dump numbers the lines in order (a merged amber
                # directory numbers each thread's records on its own: file order there).
                ids = [d.get("i") for _, d in entries]
                by_i = all(isinstance(x, int) for x in ids) and all(a < b for a, b in zip(ids, ids[1:]))
                self.check_rows(t, objs, by_i, children)
            else:
                # Still collect its child rows, keyed by the dump's values.
                field_child = {}
                for where, _, _, d in objs:
                    for k, v in d.items():
                        if composite(v) or (isinstance(v, list) and k not in self.cols[t]):
                            self.child_entries(t, k, v, d, where, field_child, children, where)
        # Children (and their children) in turn.
        done = set()
        while True:
            pending = [c for c in children if c not in done]
            if not pending:
                break
            for c in pending:
                done.add(c)
                if c in self.readable:
                    self.check_rows(c, children[c], False, children)
        for t in self.order:
            if t not in by_table and t not in children and self.tables[t].get("rows"):
                self.r.fail(f"table {t}: {self.tables[t]['rows']} row(s), but no dump line or field maps to it")

    def check_rows(self, table, entries, top, children):
        """`entries`: (where, keyvals, kind, element) in expected order; kind is objects,
        object (an {"k": v} entry as a pair) or values."""
        if self.r.full():
            return
        rows = self.fetch(table, top)
        cols = self.cols[table]
        types = self.types[table]
        keycols = []
        if entries:
            keycols = list(entries[0][1])
            if cols[: len(keycols)] != keycols:
                self.r.fail(f"table {table}: expected leading key columns {keycols}, columns are {cols}")
                return
        groups_got = {}
        for row in rows:
            groups_got.setdefault(tuple(row[k] for k in keycols), []).append(row)
        groups_want = {}
        for e in entries:
            groups_want.setdefault(tuple(e[1][k] for k in keycols), []).append(e)
        if len(rows) != len(entries):
            self.r.fail(f"table {table}: {len(rows)} row(s) in Parquet, {len(entries)} expected from the dump")
        for key, want in groups_want.items():
            got = groups_got.get(key, [])
            if len(got) != len(want) and keycols:
                self.r.fail(
                    f"table {table}: {dict(zip(keycols, key))} ({want[0][0]}): "
                    f"expected {len(want)} child row(s), got {len(got)}"
                )
        for key in groups_got:
            if key not in groups_want and keycols:
                self.r.fail(f"table {table}: {len(groups_got[key])} row(s) with key {dict(zip(keycols, key))} that no dump line has")
        # Columns never shown in the dump (JSON Skip): not compared.
        shown = set()
        for _, _, kind, e in entries:
            if kind == "objects":
                for k, v in e.items():
                    shown.add(k)
                    if isinstance(v, dict) and v and set(v) <= set(cols):
                        shown |= set(v)
        # Map composite fields to child tables once per (table, field).
        field_child = {}
        for key, want in groups_want.items():
            got = groups_got.get(key, [])
            for idx, (where, keyvals, kind, e) in enumerate(want):
                if idx >= len(got):
                    break
                row = got[idx]
                at = f"table {table} row {idx} of key {dict(zip(keycols, key))}" if keycols else f"table {table} row {idx}"
                at += f" ({where})"
                if kind == "objects":
                    self.compare_object(table, at, e, row, shown, keycols, field_child, children, where)
                elif kind == "object":
                    k, v = e
                    own = [c for c in cols if c not in keycols]
                    first = own[0] if own else None
                    if first is None:
                        self.r.fail(f"{at}: table has no column for the object's keys")
                        continue
                    if str(row[first]) != k:
                        self.r.fail(f"{at}: column {first}: expected {k!r} (the object's key), got {show(row[first])}")
                    rest = [c for c in own[1:] if row[c] is not None]
                    if not rest:
                        self.r.fail(f"{at}: object entry {k!r}: every value column is NULL, expected {show(v)}")
                        continue
                    self.compare_value(at, rest[0], types[rest[0]], v, row[rest[0]], f"value of {k!r}")
                elif kind == "values":
                    pass  # compared per column below
                if self.r.full():
                    return
        # A list of values: one of the non-key columns holds them.
        if entries and entries[0][2] == "values":
            own = [c for c in cols if c not in keycols]
            best = None
            for c in own:
                bad = []
                for key, want in groups_want.items():
                    got = groups_got.get(key, [])
                    for idx, (where, _, _, v) in enumerate(want[: len(got)]):
                        try:
                            exp = convert(v, types[c])
                        except ValueError:
                            exp = object()
                        if not same(exp, got[idx][c]):
                            bad.append(f"{where} element {idx}: column {c}: expected {show(v)}, got {show(got[idx][c])}")
                if not bad:
                    best = None
                    break
                if best is None:
                    best = bad
            if best:
                self.r.fail(f"table {table}: no column holds the dump's values; first mismatches: " + "; ".join(best[:3]))

    def compare_value(self, at, col, arrow, value, got, what=None):
        try:
            exp = convert(value, arrow)
        except ValueError as err:
            self.r.fail(f"{at}: column {col} ({arrow}): dump value {show(value)} does not fit: {err}")
            return
        if not same(exp, got):
            label = f" ({what})" if what else ""
            self.r.fail(f"{at}: column {col}{label}: expected {show(exp)} (dump {show(value)}), got {show(got)}")

    def compare_object(self, table, at, e, row, shown, keycols, field_child, children, where):
        cols = self.cols[table]
        types = self.types[table]
        seen = set(keycols)
        for k, v in e.items():
            if composite(v) or (isinstance(v, list) and k not in cols):
                flat = set(cols) - self.hidden[table]
                if isinstance(v, dict) and v and set(v) <= flat and (table, k) not in field_child:
                    # A nested record flattened into this table's columns (shown ones: an
                    # object of register names is not the Parquet-only register state).
                    for kk, vv in v.items():
                        seen.add(kk)
                        self.compare_value(at, kk, types[kk], vv, row[kk], f"{k}.{kk}")
                    continue
                self.child_entries(table, k, v, e, at, field_child, children, where)
                continue
            if k not in cols:
                self.r.fail(f"{at}: dump field {k}={show(v)} has no column in table {table} (columns {cols})")
                continue
            seen.add(k)
            self.compare_value(at, k, types[k], v, row[k])
        for c in cols:
            if c not in seen and c in shown and c not in self.hidden[table] and row[c] is not None:
                self.r.fail(f"{at}: column {c}: dump line leaves it out (missing value), expected NULL, got {show(row[c])}")

    def child_entries(self, table, field, v, row, at, field_child, children, where):
        if isinstance(v, dict):
            kind, elements = "object", list(v.items())
        elif all(isinstance(x, dict) for x in v):
            kind, elements = "objects", list(v)
        else:
            kind, elements = "values", list(v)
        child = field_child.get((table, field))
        if child is None:
            # Decide with every element of this field seen so far in the whole table (the
            # first line may hold an empty list): use this line's elements.
            child = self.find_child(table, field, kind, elements if kind == "objects" else [])
            if child is None:
                # Try again with all rows' sizes unknown: pick by name only.
                self.r.fail(f"{at}: dump field {field} ({kind}) maps to no child table; tables are {self.order}")
                field_child[(table, field)] = False
                return
            field_child[(table, field)] = child
            prev = self.used.get(child)
            if prev and prev != f"{table}.{field}":
                # Several fields sharing one child table (allowed: rows are appended in order).
                pass
            self.used[child] = f"{table}.{field}"
        if child is False:
            return
        keys = self.child_keys(table, child, elements if kind == "objects" else [])
        keyvals = {}
        for k in keys:
            try:
                # A carrier's keys take the child table's column types.
                ty = self.types[table][k] if table in self.types else self.types[child][k]
                keyvals[k] = convert(row.get(k), ty)
            except ValueError:
                keyvals[k] = row.get(k)
        lst = children.setdefault(child, [])
        for n, el in enumerate(elements):
            lst.append((f"{where} {field}[{n}]", keyvals, kind, el))


def check(con, root, dump, partial):
    r = Report(root)
    if not os.path.isdir(root):
        r.fail("dataset folder missing")
        return r.problems
    if not os.path.isfile(os.path.join(root, "_tracekit.json")):
        r.fail("_tracekit.json missing")
        return r.problems
    ds = Dataset(con, root, r)
    ds.check_complete(partial)
    ds.check_tables()
    with open(dump, encoding="utf-8") as f:
        lines = [json.loads(l) for l in f if l.strip()]
    ds.check_all(lines)
    return r.problems


def main(argv):
    partial = False
    if argv and argv[0] == "--partial":
        partial = True
        argv = argv[1:]
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    con = duckdb.connect()
    con.sql("SET threads TO 2")
    problems = []
    for i in range(0, len(argv), 2):
        root, dump = argv[i], argv[i + 1]
        got = check(con, root, dump, partial)
        print(f"{'ok  ' if not got else 'FAIL'} {root} ({len(got)} problem(s))")
        problems += got
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
