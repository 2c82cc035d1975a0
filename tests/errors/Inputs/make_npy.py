#!/usr/bin/env python3
"""Writes small .npy files (valid or deliberately broken) for the CLI error
tests without needing NumPy.

  make_npy.py OUT DESCR SHAPE [MODE]
DESCR is a NumPy dtype string ('<f4', '<i4'), SHAPE is comma-separated
('4' or '2,3' or '' for a scalar). MODE: ok (default), bad-magic,
bad-header (header dict cut short), truncated (too few data bytes).
"""
import struct
import sys


def main():
    out, descr, shape_text = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "ok"
    shape = tuple(int(s) for s in shape_text.split(",") if s)
    count = 1
    for d in shape:
        count *= d
    shape_repr = "(" + "".join(f"{d}," if len(shape) == 1 else f"{d}, " for d in shape).rstrip(" ") + ")"
    if len(shape) > 1:
        shape_repr = "(" + ", ".join(str(d) for d in shape) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_repr)
    if mode == "bad-header":
        header = "{'descr': '%s', 'fortran_order': Fal" % descr
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    width = int(descr[2:])
    data = bytes(count * width)
    if mode == "truncated":
        data = data[: len(data) // 2]
    magic = b"\x93NUMPY" if mode != "bad-magic" else b"\x93NUMPX"
    with open(out, "wb") as f:
        f.write(magic + bytes([1, 0]) + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(data)


if __name__ == "__main__":
    main()
