#!/usr/bin/env python3
"""Independent oracle for the amber-tt6 reader tests (not used by the crate).

A naive TT6/TT6E decoder written straight from the spec's class macros and the notes'
section 3 stream description, with struct.unpack. For each file given it writes
`<file>.oracle`: the initial PC, then one line per instruction
`index pc opcode class next_pc ea extra escapes` (hex, `-` when absent; escapes as
`code:word,word;...`), then `dangling <escapes>` or `error <offset>`.

Run from the repository root:  python3 testdata/amber/oracle.py testdata/amber/*.tt6 testdata/amber/*.tt6e testdata/amber/threads/*.tt6
"""
import struct
import sys

FLOW = {(18, None), (16, None), (19, 528), (19, 16), (19, 50), (17, None), (19, 18)}
MEM_MAJ = {34, 35, 50, 51, 48, 49, 42, 43, 40, 41, 46, 32, 33, 38, 39, 54, 55, 52, 53,
           44, 45, 47, 36, 37, 58, 62}
MEM_31 = {597, 119, 87, 631, 599, 567, 535, 375, 343, 790, 311, 279, 20, 534, 55, 23, 7,
          39, 71, 103, 359, 310, 438, 247, 215, 759, 727, 983, 695, 663, 918, 439, 407,
          725, 662, 150, 183, 151, 135, 167, 199, 231, 487, 21, 53, 84, 341, 373, 149,
          181, 214}
MEM_31_E = {758, 86, 470, 54, 278, 246, 1014, 982}
EXT_31 = {533, 661, 342, 374}


def klass(w, tt6e):
    maj, mnr = w >> 26, (w >> 1) & 0x3FF
    if (maj, None) in FLOW or (maj, mnr) in FLOW:
        return "flow"
    if maj in MEM_MAJ or (maj == 31 and (mnr in MEM_31 or (tt6e and mnr in MEM_31_E))):
        return "memory"
    if maj == 31 and mnr in EXT_31:
        return "memory_extended"
    return "compute"


def decode(data, tt6e):
    out = []
    n = len(data) // 4
    words = struct.unpack(">%dI" % n, data[: 4 * n])
    if n == 0:
        return ["error 0x0"]
    pc = words[0]
    out.append("initial %x" % pc)
    i, idx, esc = 1, 0, []
    while True:
        if i >= n:
            if len(data) % 4:
                out.append("error %#x" % (4 * i))
            elif esc:
                out.append("dangling " + ";".join(esc))
            break
        w = words[i]
        if w >> 26 == 0:
            count = w & 0xFFFF
            if i + 1 + count > n:
                out.append("error %#x" % (4 * i))
                break
            esc.append("%x:" % ((w >> 16) & 0x3FF) + ",".join("%x" % x for x in words[i + 1 : i + 1 + count]))
            i += 1 + count
            continue
        k = klass(w, tt6e)
        extra = {"compute": 0, "flow": 1, "memory": 1, "memory_extended": 2}[k]
        if i + 1 + extra > n:
            out.append("error %#x" % (4 * i))
            break
        rest = words[i + 1 : i + 1 + extra]
        nxt = rest[0] if k == "flow" else (pc + 4) & 0xFFFFFFFF
        ea = "%x" % rest[0] if k.startswith("memory") else "-"
        ex = "%x" % rest[1] if k == "memory_extended" else "-"
        out.append("%d %x %08x %s %x %s %s %s" % (idx, pc, w, k, nxt, ea, ex, ";".join(esc) or "-"))
        pc, idx, esc = nxt, idx + 1, []
        i += 1 + extra
    return out


for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    lines = decode(data, path.endswith(".tt6e"))
    with open(path + ".oracle", "w") as f:
        f.write("\n".join(lines) + "\n")
