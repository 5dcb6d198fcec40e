"""DuckDB over `tracekit export --calls`: the calls table joins instructions on i.

Usage: check_calls.py DATASET CALLS_JSONL
Every call's step is an instruction row, its entry step (entry_i) is the instruction whose
pc is the call's target, and the rows equal `tracekit calls --json` (CALLS_JSONL, without
its summary line) in number, steps and depths.
"""

import json
import sys

import duckdb

dataset, calls_jsonl = sys.argv[1], sys.argv[2]
calls = f"read_parquet('{dataset}/calls/*.parquet')"
instructions = f"read_parquet('{dataset}/instructions/*.parquet')"
expected = [json.loads(l) for l in open(calls_jsonl) if '"summary"' not in l]
problems = []

rows = duckdb.sql(f"select i, depth from {calls} order by i").fetchall()
if rows != [(c["i"], c["depth"]) for c in expected]:
    problems.append(f"calls (i, depth) {rows} differ from calls --json")
joined = duckdb.sql(f"select count(*) from {calls} c join {instructions} n on n.i = c.i").fetchall()[0][0]
if joined != len(expected):
    problems.append(f"{joined} of {len(expected)} calls join an instruction on i")
wrong = duckdb.sql(
    f"""select c.i, c.target, e.pc from {calls} c join {instructions} e on e.i = c.entry_i
        where c.target is distinct from e.pc"""
).fetchall()
if wrong:
    problems.append(f"entries whose pc is not the target: {wrong}")

print(f"calls: {len(expected)} rows, {joined} joined on i")
if problems:
    print("\n".join(problems))
    sys.exit(1)
