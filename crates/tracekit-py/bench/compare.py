"""tracekit (Python) against x64trace, side by side in one run, on one x64dbg trace.

    pip install x64trace capstone            # the comparison only, not a tracekit dependency
    maturin develop --release -m crates/tracekit-py/Cargo.toml
    python crates/tracekit-py/bench/compare.py [--repeat 6600] [--trace FILE]

Without --trace the input is the real x64dbg sample's block stream (its header, then its
152 blocks, the first a full register dump, repeated --repeat times: 1,003,200 instructions
by default), which x64trace can read (no user blocks). Each measurement runs in a fresh
process and reports its wall time and peak resident memory (ru_maxrss):

- x64trace: `Trace.loadf(path)` (its load: every block with its registers and memory);
- tracekit iter: `for r in tracekit.open(path)` (a dict per instruction with every field
  `tracekit dump` shows: registers changed, memory accesses, opcode);
- tracekit to_arrow: `to_arrow("instructions")` read batch by batch (the stream; every
  column, the register state included), and `read_all()`. With more than one core
  available, to_arrow builds stretches of batches on several threads (the first from the
  start while one pass indexes the full dumps, the others through that index once it is
  made); `taskset -c 0 python compare.py` measures the one-thread path.

"cpu s" is the CPU time of the timed part (every thread of the process): on a shared,
loaded machine it is the steadier figure, and "M/cpu s" the rows per CPU second. The
tracekit rows run `--runs` times (default 5), each in a fresh process, and show the run
of median wall time, with the fastest beside it ("best s"): a shared machine's speed can
change within seconds.

x64trace's memory grows with the trace (about 9 KB per instruction), so `--x64trace-repeat N`
runs it on a prefix of N repeats instead and scales its time linearly (printed as such).
"""

import argparse
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64"

CHILD = r"""
import json, resource, sys, time
what, path = sys.argv[1], sys.argv[2]
# Imports are not timed.
if what == "x64trace":
    import x64trace
elif what != "baseline":
    import pyarrow, tracekit
t0 = time.perf_counter()
c0 = time.process_time()
n = 0
if what == "x64trace":
    import x64trace
    n = len(x64trace.Trace.loadf(path).blocks)
elif what == "iter":
    import tracekit
    for r in tracekit.open(path):
        n += 1
elif what == "arrow-stream":
    import tracekit
    for b in tracekit.open(path).to_arrow("instructions"):
        n += b.num_rows
elif what == "arrow-all":
    import tracekit
    n = tracekit.open(path).to_arrow("instructions").read_all().num_rows
elif what == "baseline":
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
secs = time.perf_counter() - t0
cpu = time.process_time() - c0
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"n": n, "secs": secs, "cpu": cpu, "maxrss_mib": u.ru_maxrss / 1024}))
"""


def write_repeated(sample: pathlib.Path, repeat: int, out: str) -> None:
    """The sample's header once, then its block stream `repeat` times, written block
    stream by block stream (so that this process stays small: the children's peak memory
    is measured, and a fork starts from this process's)."""
    data = sample.read_bytes()
    (json_len,) = struct.unpack_from("<I", data, 4)
    head = 8 + json_len
    with open(out, "wb") as f:
        f.write(data[:head])
        for _ in range(repeat):
            f.write(data[head:])


def measure(what: str, path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, what, path], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", help="an x64dbg .trace64 file (default: the repeated sample)")
    ap.add_argument("--repeat", type=int, default=6600)
    ap.add_argument("--x64trace-repeat", type=int, default=0, help="x64trace on this prefix only")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per tracekit row")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        if args.trace:
            path = args.trace
            prefix = path
            scale = 1.0
        else:
            path = os.path.join(d, "big.trace64")
            write_repeated(SAMPLE, args.repeat, path)
            prefix, scale = path, 1.0
            if args.x64trace_repeat:
                prefix = os.path.join(d, "prefix.trace64")
                write_repeated(SAMPLE, args.x64trace_repeat, prefix)
                scale = args.repeat / args.x64trace_repeat
        size = os.path.getsize(path)
        rows = {}
        def median_of_runs(what):
            runs = sorted((measure(what, path) for _ in range(max(args.runs, 1))),
                          key=lambda r: r["secs"])
            mid = dict(runs[len(runs) // 2])
            mid["best"] = runs[0]["secs"]
            return mid

        rows["read file (baseline)"] = median_of_runs("baseline")
        rows["tracekit iter (dicts)"] = median_of_runs("iter")
        rows["tracekit to_arrow (stream)"] = median_of_runs("arrow-stream")
        rows["tracekit to_arrow read_all"] = median_of_runs("arrow-all")
        x = measure("x64trace", prefix)
        if scale != 1.0:
            x = {"n": round(x["n"] * scale), "secs": x["secs"] * scale, "cpu": x["cpu"] * scale,
                 "maxrss_mib": x["maxrss_mib"],
                 "note": f"measured on {args.x64trace_repeat} repeats, time scaled x{scale:g}"}
        rows["x64trace Trace.loadf"] = x

    n = rows["tracekit iter (dicts)"]["n"]
    print(f"input: {n:,} instructions, {size / 2**20:.1f} MiB")
    print(f"threads available: {len(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':30} {'seconds':>9} {'best s':>8} {'cpu s':>8} {'M instr/s':>10} {'M/cpu s':>8} {'peak MiB':>9} {'vs x64trace':>12} {'(cpu)':>8}")
    xs = rows["x64trace Trace.loadf"]["secs"]
    xc = rows["x64trace Trace.loadf"]["cpu"]
    for name, r in rows.items():
        rate = r["n"] / r["secs"] / 1e6 if r["secs"] and r["n"] else float("nan")
        crate = r["n"] / r["cpu"] / 1e6 if r["cpu"] and r["n"] else float("nan")
        vs = xs / r["secs"] if r["secs"] else float("nan")
        vc = xc / r["cpu"] if r["cpu"] else float("nan")
        note = f"  ({r['note']})" if "note" in r else ""
        best = f"{r['best']:8.3f}" if "best" in r else f"{'':8}"
        print(f"{name:30} {r['secs']:9.3f} {best} {r['cpu']:8.3f} {rate:10.2f} {crate:8.2f} {r['maxrss_mib']:9.0f} {vs:11.1f}x {vc:7.1f}x{note}")


if __name__ == "__main__":
    main()
