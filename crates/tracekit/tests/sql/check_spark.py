#!/usr/bin/env python3
"""Reads tracekit Parquet datasets with Spark (local mode) and compares a GROUP BY with DuckDB.

Usage: check_spark.py [--readme README DIR DUMP.jsonl] DIR TABLE COLS [DIR TABLE COLS ...]

For each dataset DIR: Spark reads every table folder listed in DIR/_tracekit.json and counts
the manifest's rows; then for TABLE and every other table that has all the comma-separated
COLS columns, `SELECT COLS, count(*), sum(c) for every integer column c GROUP BY COLS` gives the
same answer in Spark (spark.read.parquet('DIR/<table>')) as in DuckDB
(read_parquet('DIR/<table>/*.parquet')). Spark reads UINT_64 as decimal(20,0): every value
is compared as a Python int. One Spark session (local[2], small memory, no UI) for all.
With --readme, the README's Spark example also runs in that session, on DIR (an export of
testdata/x64dbg/basic.trace64), and its answers are compared with DUMP.jsonl's
(check_readme.py). Prints one line per problem and exits 1 if there is any.
"""

import json
import os
import sys
import time

import check_readme
import duckdb
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def as_int(v):
    if v is None:
        return None
    return int(v)


def is_int(dt):
    return isinstance(dt, INT_TYPES) or (isinstance(dt, T.DecimalType) and dt.scale == 0)


def main(argv):
    readme = None
    if argv[:1] == ["--readme"]:
        readme, argv = argv[1:4], argv[4:]
    if not argv or len(argv) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    start = time.time()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tracekit-check")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    con = duckdb.connect()
    problems = []
    try:
        for i in range(0, len(argv), 3):
            root, table, cols = argv[i], argv[i + 1], argv[i + 2].split(",")
            problems += check(spark, con, root, table, cols)
        if readme:
            got = check_readme.spark_problems(spark, *readme)
            print(f"README Spark example: {len(got)} problem(s)")
            problems += got
    finally:
        spark.stop()
    print(f"spark checks took {time.time() - start:.1f} s")
    for p in problems:
        print(p)
    return 1 if problems else 0


def check(spark, con, root, table, cols):
    out = []
    with open(os.path.join(root, "_tracekit.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    tables = {t["name"]: t for t in manifest["tables"]}
    if table not in tables:
        return [f"{root}: no table {table} in the manifest ({list(tables)})"]
    frames = {}
    for name, t in tables.items():
        path = os.path.join(root, name)
        try:
            df = spark.read.parquet(path)
            n = df.count()
        except Exception as e:  # noqa: BLE001 - any Spark failure is the finding
            out.append(f"{root}: table {name}: Spark cannot read {path}: {str(e).splitlines()[0]}")
            continue
        frames[name] = df
        if n != t["rows"]:
            out.append(f"{root}: table {name}: Spark counts {n} rows, manifest says {t['rows']}")
        got = df.columns
        want = [c["name"] for c in t["columns"]]
        if got != want:
            out.append(f"{root}: table {name}: Spark columns {got} != manifest {want}")
    targets = [table] + [
        n for n in frames if n != table and all(c in frames[n].columns for c in cols)
    ]
    for name in targets:
        df = frames.get(name)
        if df is None:
            continue
        missing = [c for c in cols if c not in df.columns]
        if missing:
            out.append(f"{root}: table {name}: no column(s) {missing} to group by ({df.columns})")
            continue
        sums = [f.name for f in df.schema.fields if f.name not in cols and is_int(f.dataType)]
        aggs = [F.count(F.lit(1)).alias("n")] + [
            F.sum(F.col(c).cast(T.DecimalType(38, 0))).alias(f"sum_{c}") for c in sums
        ]
        spark_rows = {
            tuple(as_int(r[c]) for c in cols): [as_int(x) for x in list(r)[len(cols):]]
            for r in df.groupBy(*cols).agg(*aggs).collect()
        }
        q = (
            "SELECT "
            + ", ".join(f'"{c}"' for c in cols)
            + ", count(*)"
            + "".join(f', sum("{c}")' for c in sums)
            + f" FROM read_parquet('{os.path.join(root, name, '*.parquet')}') GROUP BY ALL"
        )
        duck_rows = {
            tuple(as_int(x) for x in r[: len(cols)]): [as_int(x) for x in r[len(cols):]]
            for r in con.sql(q).fetchall()
        }
        if not duck_rows:
            out.append(f"{root}: table {name}: no rows to group")
        labels = ["count(*)"] + [f"sum({c})" for c in sums]
        for key in sorted(set(spark_rows) | set(duck_rows), key=str):
            s, d = spark_rows.get(key), duck_rows.get(key)
            if s is None or d is None:
                out.append(
                    f"{root}: table {name}: group {dict(zip(cols, key))}: "
                    f"Spark {'has' if s else 'lacks'} it, DuckDB {'has' if d else 'lacks'} it"
                )
                continue
            for label, a, b in zip(labels, s, d):
                if a != b:
                    out.append(
                        f"{root}: table {name}: group {dict(zip(cols, key))}: {label}: "
                        f"Spark {a} != DuckDB {b}"
                    )
        print(
            f"{root}: {name} GROUP BY {','.join(cols)}: {len(duck_rows)} group(s), "
            f"{len(labels)} aggregate(s) compared"
        )
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
