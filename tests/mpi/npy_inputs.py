#!/usr/bin/env python3
"""Writes seeded random .npy inputs (<parameter name>.npy) for the entry
parameters of an HLO text module, for the mpi-vs-threads backend tests.
Only f32/f64/s32 array parameters; needs no numpy."""
import random
import re
import struct
import sys


def entry_parameters(text):
    entry = text[text.index("ENTRY"):]
    entry = entry[:entry.index("\n}")]
    pat = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(f32|f64|s32)\[([\d,]*)\]\S*\s+parameter\((\d+)\)",
                     re.M)
    params = [(int(m.group(4)), m.group(1), m.group(2),
               [int(d) for d in m.group(3).split(",") if d]) for m in pat.finditer(entry)]
    return sorted(params)


def write_npy(path, dtype, dims, values):
    descr = {"f32": "<f4", "f64": "<f8", "s32": "<i4"}[dtype]
    shape = "(" + "".join(f"{d}, " for d in dims).rstrip(" ") + ")" if dims else "()"
    if len(dims) > 1:
        shape = "(" + ", ".join(str(d) for d in dims) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    fmt = "<%d%s" % (len(values), {"f32": "f", "f64": "d", "s32": "i"}[dtype])
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(fmt, *values))


def main():
    module, out_dir, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    params = entry_parameters(open(module).read())
    # Optional NAME=D0,D1 overrides: the global shape of a parameter of an
    # already partitioned module (whose text holds the per-device shape).
    overrides = dict(a.split("=", 1) for a in sys.argv[4:])
    params = [(i, n, t, [int(d) for d in overrides[n].split(",")] if n in overrides else dims)
              for i, n, t, dims in params]
    if not params:
        sys.exit("no f32/f64/s32 parameters found in " + module)
    for _, name, dtype, dims in params:
        n = 1
        for d in dims:
            n *= d
        vals = ([rng.uniform(-1, 1) for _ in range(n)] if dtype in ("f32", "f64")
                else [rng.randint(-4, 4) for _ in range(n)])
        write_npy(f"{out_dir}/{name}.npy", dtype, dims, vals)


if __name__ == "__main__":
    main()
