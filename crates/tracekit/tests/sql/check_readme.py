#!/usr/bin/env python3
"""Runs the README's "Query with SQL" examples and compares their answers with the dump.

Usage: check_readme.py README DIR DUMP.jsonl

DIR is `tracekit export testdata/x64dbg/basic.trace64` and DUMP.jsonl `tracekit dump` of the
same file. The README's three ```sql blocks (hottest pcs, writes to an address range,
instructions per thread) run in DuckDB with 'basic/' replaced by DIR; their answers must
equal the ones computed here from the dump alone (the range is the block's two hex
literals). check_spark.py calls `spark_problems` to do the same with the ```python block
that reads the dataset with Spark, in its own session.

Prints one line per problem and exits 1 if there is any.
"""

import collections
import json
import re
import sys

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
HEX = re.compile(r"0x[0-9a-fA-F]+")


def blocks(readme, lang):
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index("## Query with SQL")
    end = text.index("\n## ", start + 1)
    return [m.group(2) for m in FENCE.finditer(text[start:end]) if m.group(1) == lang]


def spark_block(readme):
    found = [b for b in blocks(readme, "python") if "spark.read.parquet" in b]
    if len(found) != 1:
        raise ValueError(f"expected one Spark ```python block, found {len(found)}")
    return found[0]


def value(v):
    """An answer's value as an int ("0x…" strings, decimals and ints alike)."""
    if isinstance(v, str):
        return int(v, 16) if v.startswith("0x") else int(v)
    return int(v)


def rows(result):
    return [tuple(value(x) for x in r) for r in result]


def address_range(block):
    lo, hi = (int(h, 16) for h in HEX.findall(block)[:2])
    return lo, hi


def expected(dump, lo, hi):
    """The three answers from the dump's JSON Lines: hottest pcs (ties by pc), the writes
    to [lo, hi] as (i, pc, addr, old, new), instructions per thread."""
    pcs = collections.Counter()
    threads = collections.Counter()
    writes = []
    with open(dump, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            pc = int(r["pc"], 16)
            pcs[pc] += 1
            threads[r["thread"]] += 1
            for m in r["mem"]:
                addr = int(m["addr"], 16)
                if lo <= addr <= hi and "new" in m:
                    writes.append((r["i"], pc, addr, int(m["old"], 16), int(m["new"], 16)))
    hot = sorted(pcs.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    return hot, sorted(writes), sorted(threads.items())


def compare(engine, got, want):
    out = []
    for name, g, w in zip(("hottest pcs", "writes", "per thread"), got, want):
        if name == "writes":
            # Rows of one instruction and address have no order among themselves.
            g = sorted(g)
        if not w:
            out.append(f"{engine}: {name}: the dump gives no rows; the example shows nothing")
        if g != w:
            out.append(f"{engine}: {name}: got {g[:5]}… ({len(g)} rows), expected {w[:5]}… ({len(w)} rows)")
    return out


def duckdb_problems(readme, root, dump):
    import duckdb

    sql = blocks(readme, "sql")
    if len(sql) != 3:
        return [f"expected 3 ```sql blocks in Query with SQL, found {len(sql)}"]
    want = expected(dump, *address_range(sql[1]))
    con = duckdb.connect()
    got = [rows(con.sql(q.replace("'basic/", f"'{root}/")).fetchall()) for q in sql]
    return compare("DuckDB", got, want)


def spark_problems(spark, readme, root, dump):
    """Runs the README's Spark block in `spark` (its getOrCreate returns this session)."""
    code = spark_block(readme)
    want = expected(dump, *address_range(code))
    scope = {}
    exec(compile(code.replace('"basic/', f'"{root}/'), "README.md (Spark)", "exec"), scope)
    got = [rows(scope[name].collect()) for name in ("hot", "writes", "per_thread")]
    if scope["spark"] is not spark:
        return ["Spark: the README's block made a session of its own"]
    return compare("Spark", got, want)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = duckdb_problems(*argv)
    print(f"README DuckDB queries: {len(problems)} problem(s)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
