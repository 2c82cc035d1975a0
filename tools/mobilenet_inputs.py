#!/usr/bin/env python3
"""Writes the .npy inputs of MobileNet-V2's training step whose role
`meshsplit verify --init fan-in` cannot see, for `verify --inputs DIR`.

torch_xla passes every Python scalar and batch-norm parameter of the step as
an entry parameter, and shrink-batch expands the batch-norm ops, so in the
shrunk module nothing says which vector is a batch-norm scale or which scalar
is ReLU6's bound. This script finds those roles by structure in the ORIGINAL
module (where the batch-norm ops are still fused) and writes, by parameter
name:
  - batch-norm scale (gamma) = 1 and offset (beta) = 0, as PyTorch
    initialises them (for batch-norm-inference also mean = 0, variance = 1);
  - the scalar upper bound of a clamp whose lower bound is the constant 0
    (ReLU6, torch's hardtanh(0, 6)) = 6;
  - scalar divisors: the dropout keep probability (the divisor of a
    dropout-tagged divide) = 0.8 (torchvision's MobileNet-V2 dropout is 0.2);
    a divisor broadcast to [N, C, H, W] (the average pool's backward) = H*W;
    any other scalar divisor (the loss's) = 1.
Weights, images and everything else are left to the generator. No numpy:
.npy version 1.0 is written by hand (little-endian f4, or f8 with --f64
for a copy of the module with every f32 made f64).

Usage: mobilenet_inputs.py [--f64] ORIGINAL.hlo OUT_DIR
"""
import os
import re
import struct
import sys

PARAM_RE = re.compile(r"^\s*%(\S+) = (\w+)\[([0-9,]*)\]\S* parameter\((\d+)\)")
INSTR_RE = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\([^=]*\)|\S+) ([a-z0-9-]+)\((.*)$")
OPERAND_RE = re.compile(r"%([A-Za-z0-9_.\-]+)")


def entry_lines(text):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ENTRY "):
            body = []
            for l in lines[i + 1:]:
                if l.startswith("}"):
                    break
                body.append(l)
            return body
    sys.exit("error: no ENTRY computation")


def operand_names(args):
    # Operands come before the first "), " that closes the operand list.
    depth, end = 1, len(args)
    for i, c in enumerate(args):
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
            if depth == 0:
                end = i
                break
    return OPERAND_RE.findall(args[:end])


def write_npy(path, dims, values, code):
    header = "{'descr': '<" + code + "', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d," % d for d in dims) if len(dims) == 1 else ", ".join(map(str, dims)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path + ".tmp", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), "d" if code == "f8" else "f"), *values))
    os.replace(path + ".tmp", path)


def main():
    args = sys.argv[1:]
    code = "f4"
    if args and args[0] == "--f64":
        code = "f8"
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    with open(args[0]) as f:
        body = entry_lines(f.read())
    params = {}  # name -> dims
    instrs = {}  # name -> (opcode, operands, line)
    for line in body:
        m = PARAM_RE.match(line)
        if m:
            if m.group(2) == "f32":
                params[m.group(1)] = [int(d) for d in m.group(3).split(",") if d]
            continue
        m = INSTR_RE.match(line)
        if m:
            instrs[m.group(1)] = (m.group(3), operand_names(m.group(4)), line)

    values = {}  # name -> (value, reason)

    def source_param(name):
        # The scalar parameter behind a chain of broadcast / reshape.
        while name in instrs and instrs[name][0] in ("broadcast", "reshape"):
            name = instrs[name][1][0]
        return name if name in params else None

    def set_value(name, value, reason):
        if name in params and name not in values:
            values[name] = (value, reason)

    for name, (op, ops, line) in instrs.items():
        if op in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad") and len(ops) > 1:
            set_value(ops[1], 1.0, "batch-norm scale")
            if op != "batch-norm-grad" and len(ops) > 2:
                set_value(ops[2], 0.0, "batch-norm offset")
            if op == "batch-norm-inference" and len(ops) > 4:
                set_value(ops[3], 0.0, "batch-norm mean")
                set_value(ops[4], 1.0, "batch-norm variance")
        elif op == "clamp" and len(ops) == 3:
            lo = ops[0]
            while lo in instrs and instrs[lo][0] == "broadcast":
                lo = instrs[lo][1][0]
            hi = source_param(ops[2])
            if hi and not params[hi] and lo in instrs and instrs[lo][0] == "constant" and \
                    instrs[lo][2].split("constant(")[1].startswith("0)"):
                set_value(hi, 6.0, "ReLU6 upper bound")
        elif op == "divide" and len(ops) == 2:
            p = source_param(ops[1])
            if not p or params[p]:
                continue
            divisor = instrs.get(ops[1])
            if "dropout" in line:
                set_value(p, 0.8, "dropout keep probability")
            elif divisor and divisor[0] == "broadcast" and \
                    re.search(r"= f32\[\d+,\d+,(\d+),(\d+)\]", divisor[2]):
                h, w = re.search(r"= f32\[\d+,\d+,(\d+),(\d+)\]", divisor[2]).groups()
                set_value(p, float(int(h) * int(w)), "average-pool divisor (H*W)")
            else:
                set_value(p, 1.0, "loss divisor")

    os.makedirs(args[1], exist_ok=True)
    counts = {}
    for name, (value, reason) in sorted(values.items()):
        dims = params[name]
        n = 1
        for d in dims:
            n *= d
        write_npy(os.path.join(args[1], name + ".npy"), dims, [value] * n, code)
        counts[reason] = counts.get(reason, 0) + 1
    for reason, n in sorted(counts.items()):
        print("%3d %s" % (n, reason), file=sys.stderr)


if __name__ == "__main__":
    main()
