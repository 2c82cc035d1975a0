#!/usr/bin/env python3
"""Black-box robustness check: mutate HLO modules as text, run meshsplit
commands on each mutant, count crashes.

Each mutant is one real module (the XLA corpus under ../shared, the
examples, the golden tests) with one to three random textual edits: a number
changed (0, 1, -1, +-1, 65536, 2^40), a dims list of an attribute mangled, a
sharding's tile dims or device list changed, an opcode renamed, a line
deleted or duplicated, a token deleted. The commands must either accept it
or refuse it with an `error:` line; anything else is a crash:

  signal      killed by a signal (segmentation fault, abort, ...)
  internal    an `internal error` / `check failed` message (a broken invariant)
  timeout     still running after --timeout seconds
  no-error    a non-zero exit without any `error:` line on stderr (and, for
              verify, without a MISMATCH verdict)

A verify MISMATCH is counted apart ("mismatch": a wrong partitioning, not a
crash) and its mutant is kept in --out as the crashing ones are. Commands
that partition get `--num-partitions N` when the module
says `// num_partitions=N` (as the XLA partitioning corpus does).

Modules on which a command already fails this way unmutated are left out of
that command's count (listed as "baseline"). The table gives, per command,
the mutants run, accepted, refused and each crash kind; every crashing mutant
is written to --out with a .cmd file holding its command line.

Deterministic: mutant k of module M under --seed S depends only on (S, M, k).
With --max-seconds, mutants not started within T seconds of a command's
start are not run: the table's `run` column is the count actually done, so a
stopped run still reports mutants 0..run-1 (at --jobs 1) honestly.

Usage:
  tools/mutate_modules.py [--meshsplit PATH] [--seed S] [--count N]
      [--commands partition,propagate,verify,report] [--timeout SEC]
      [--jobs J] [--out DIR] [--max-bytes B] [--max-seconds T] [INPUT ...]
INPUT is a .hlo file or a directory (searched recursively); the default is
../shared/conformance/xla (when present), examples/ and tests/golden/.
"""
import argparse
import concurrent.futures
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Extra arguments per command: small and bounded, so a mutant's cost stays
# near its module's.
COMMAND_ARGS = {
    "partition": [],
    "propagate": [],
    "verify": ["--seed", "0"],
    "report": [],
    "fmt": [],
    "autoshard": ["--budget", "5"],
}

OPCODES = ["add", "multiply", "negate", "dot", "reshape", "transpose", "broadcast",
           "reduce", "slice", "concatenate", "gather", "scatter", "convert", "tuple",
           "get-tuple-element", "copy", "dynamic-slice", "pad", "select", "all-reduce"]

NUMBER = re.compile(r"(?<![\w.%#])-?\d+(?![\w.])")
DIMS_ATTR = re.compile(r"\b(\w+_dims|dimensions|offset_dims|collapsed_slice_dims|"
                       r"start_index_map|update_window_dims|inserted_window_dims|"
                       r"scatter_dims_to_operand_dims|slice_sizes)=\{([^}]*)\}")
TILE = re.compile(r"devices=\[([\d,]+)\]")
OPCODE = re.compile(r"= (\S+\[[^\]]*\](?:\{[^}]*\})?|\([^=]*?\)) ([a-z][a-z0-9-]*)\(")


def mutate_number(text, rng):
    spans = [m.span() for m in NUMBER.finditer(text)]
    if not spans:
        return None
    a, b = rng.choice(spans)
    old = int(text[a:b])
    new = rng.choice([0, 1, -1, old + 1, old - 1, old * 2, 65536, 1 << 40])
    return text[:a] + str(new) + text[b:]


def mutate_dims_attr(text, rng):
    ms = list(DIMS_ATTR.finditer(text))
    if not ms:
        return None
    m = rng.choice(ms)
    items = [x for x in m.group(2).split(",") if x.strip()]
    choice = rng.randrange(4)
    if choice == 0 and items:
        items.pop(rng.randrange(len(items)))
    elif choice == 1:
        items.insert(rng.randrange(len(items) + 1), str(rng.choice([0, 1, 2, 7, 65536])))
    elif choice == 2 and len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        items[i] = items[j]
    else:
        items = items[::-1] if items else ["0"]
    a, b = m.span(2)
    return text[:a] + ",".join(items) + text[b:]


def mutate_tile(text, rng):
    ms = list(TILE.finditer(text))
    if not ms:
        return None
    m = rng.choice(ms)
    dims = m.group(1).split(",")
    choice = rng.randrange(3)
    if choice == 0:
        dims.append(str(rng.choice([1, 2])))
    elif choice == 1 and len(dims) > 1:
        dims.pop(rng.randrange(len(dims)))
    else:
        i = rng.randrange(len(dims))
        dims[i] = str(rng.choice([1, 2, 3, 4, 8]))
    a, b = m.span(1)
    return text[:a] + ",".join(dims) + text[b:]


def mutate_sharding_keyword(text, rng):
    spots = [m.start() for m in re.finditer(r"sharding=\{", text)]
    if not spots:
        return None
    a = rng.choice(spots) + len("sharding={")
    b = text.find("}", a)
    if b < 0:
        return None
    new = rng.choice(["replicated", "manual", "maximal device=3", "devices=[2]0,1",
                      "devices=[2]0,1 last_tile_dim_replicate", "devices=[2,1]<=[2]",
                      "devices=[1,2,2]<=[4] last_tile_dims={manual}",
                      "devices=[4,1]<=[2,2]T(1,0)"])
    return text[:a] + new + text[b:]


def mutate_opcode(text, rng):
    ms = list(OPCODE.finditer(text))
    if not ms:
        return None
    m = rng.choice(ms)
    a, b = m.span(2)
    return text[:a] + rng.choice(OPCODES) + text[b:]


def mutate_line(text, rng):
    lines = text.split("\n")
    body = [i for i, l in enumerate(lines) if " = " in l]
    if not body:
        return None
    i = rng.choice(body)
    if rng.randrange(2):
        del lines[i]
    else:
        lines.insert(rng.choice(body), lines[i])
    return "\n".join(lines)


def mutate_token(text, rng):
    ms = list(re.finditer(r"[\w.%\-]+|[{}()\[\],=]", text))
    if not ms:
        return None
    a, b = rng.choice(ms).span()
    return text[:a] + text[b:]


MUTATORS = [mutate_number, mutate_number, mutate_dims_attr, mutate_dims_attr, mutate_tile,
            mutate_sharding_keyword, mutate_opcode, mutate_line, mutate_token]


def make_mutant(text, rng):
    for _ in range(rng.randint(1, 3)):
        for _attempt in range(10):
            out = rng.choice(MUTATORS)(text, rng)
            if out is not None and out != text:
                text = out
                break
    return text


def classify(rc, out, err):
    low = err.lower()
    if "internal error" in low or "check failed" in low or "terminate called" in low:
        return "internal"
    if rc < 0 or rc >= 128:
        return "signal"
    if rc == 0:
        return "accepted"
    if "error:" in err:
        return "refused"
    if out.startswith("MISMATCH"):
        return "mismatch"
    return "no-error"


PARTITIONS = re.compile(r"^// num_partitions=(\d+)", re.M)
TAKES_PARTITIONS = {"partition", "verify", "report", "autoshard"}


def run(meshsplit, command, path, timeout, text):
    args = [meshsplit, command, path] + COMMAND_ARGS.get(command, [])
    m = PARTITIONS.search(text)
    if m and command in TAKES_PARTITIONS:
        args += ["--num-partitions", m.group(1)]
    # A session of its own, so a timeout ends the whole process group
    # (verify may fork workers).
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "timeout", args, ""
    err = err.decode(errors="replace")
    out = out[:4096].decode(errors="replace")
    return classify(p.returncode, out, err), args, err


def gather_inputs(paths, max_bytes):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, names in os.walk(p):
                files += [os.path.join(d, n) for n in names if n.endswith(".hlo")]
        elif os.path.isfile(p):
            files.append(p)
    files = sorted(set(f for f in files if os.path.getsize(f) <= max_bytes))
    return files


def seed_of(*parts):
    h = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little")


CRASHES = ["signal", "internal", "timeout", "no-error"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="*")
    ap.add_argument("--meshsplit", default=os.path.join(ROOT, "build/release/src/cli/meshsplit"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200, help="mutants per command")
    ap.add_argument("--commands", default="partition,propagate,verify,report")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default="mutate-modules-out")
    ap.add_argument("--max-bytes", type=int, default=20000,
                    help="skip input modules larger than this (keeps each run short)")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="per command (baseline runs included): start no mutant after this many "
                    "seconds (0: no limit)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    inputs = a.inputs
    if not inputs:
        shared = os.path.normpath(os.path.join(ROOT, "..", "shared", "conformance", "xla"))
        inputs = ([shared] if os.path.isdir(shared) else []) + \
            [os.path.join(ROOT, "examples"), os.path.join(ROOT, "tests", "golden")]
    files = gather_inputs(inputs, a.max_bytes)
    if not files:
        print("error: no .hlo inputs found", file=sys.stderr)
        return 2
    if not os.access(a.meshsplit, os.X_OK):
        print(f"error: {a.meshsplit} is not an executable (build first)", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    texts = {f: open(f, errors="replace").read() for f in files}
    commands = [c for c in a.commands.split(",") if c]
    table = {}
    tmp = tempfile.mkdtemp(prefix="mutate-")
    for command in commands:
        counts = {k: 0 for k in ["run", "accepted", "refused", "mismatch", "not-run"] + CRASHES}
        baseline_bad = set()
        jobs = []
        # Mutant k picks its module and edits from (seed, command-free k), so
        # every command sees the same mutants.
        for k in range(a.count):
            rng = random.Random(seed_of(a.seed, k))
            src = files[rng.randrange(len(files))]
            jobs.append((k, src, make_mutant(texts[src], rng)))

        def baseline(src):
            kind, _, _ = run(a.meshsplit, command, src, a.timeout, texts[src])
            return kind

        # The clock covers the baseline runs too: --max-seconds bounds the
        # whole command.
        started = time.monotonic()
        needed = sorted(set(src for _, src, _ in jobs))
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            for src, kind in zip(needed, pool.map(baseline, needed)):
                if kind in CRASHES or kind == "mismatch":
                    baseline_bad.add(src)

        def one(job):
            k, src, text = job
            if a.max_seconds and time.monotonic() - started > a.max_seconds:
                return k, src, None, "not-run", None, ""
            path = os.path.join(tmp, f"{command}.{k}.hlo")
            with open(path, "w") as f:
                f.write(text)
            kind, args, err = run(a.meshsplit, command, path, a.timeout, text)
            return k, src, path, kind, args, err

        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            todo = [j for j in jobs if j[1] not in baseline_bad]
            for k, src, path, kind, args, err in pool.map(one, todo):
                if kind == "not-run":
                    counts["not-run"] += 1
                    continue
                counts["run"] += 1
                counts[kind] += 1
                if kind in CRASHES or kind == "mismatch":
                    name = f"{command}.s{a.seed}.m{k}.{os.path.basename(src)}"
                    keep = os.path.join(a.out, name)
                    os.replace(path, keep)
                    with open(keep + ".cmd", "w") as f:
                        f.write(" ".join([args[0], args[1], keep] + args[3:]) + "\n")
                        f.write(f"# {kind}; mutant {k} of {src}\n")
                        f.write("".join("# " + l + "\n" for l in err.splitlines()[-5:]))
                    if a.verbose:
                        last = err.strip().splitlines()[-1:] or [""]
                        print(f"{kind:9} {keep}: {last[0][:160]}", file=sys.stderr)
                else:
                    os.unlink(path)
        counts["baseline"] = len(baseline_bad)
        counts["seconds"] = time.monotonic() - started
        table[command] = counts
        if baseline_bad and a.verbose:
            for b in sorted(baseline_bad):
                print(f"baseline  {command} {b}", file=sys.stderr)
    cols = ["run", "accepted", "refused", "mismatch"] + CRASHES + ["baseline"]
    print(f"seed {a.seed}, {a.count} mutants per command, {len(files)} input modules, "
          f"timeout {a.timeout:g} s")
    print(f"{'command':10}" + "".join(f"{c:>10}" for c in cols) + f"{'crashes':>10}")
    total = 0
    for command in commands:
        c = table[command]
        crashes = sum(c[k] for k in CRASHES)
        total += crashes
        print(f"{command:10}" + "".join(f"{c[k]:>10}" for k in cols) + f"{crashes:>10}")
    for command in commands:
        c = table[command]
        stopped = f", {c['not-run']} not run (--max-seconds)" if c["not-run"] else ""
        print(f"{command}: {c['seconds']:.0f} s with the baseline runs{stopped}")
    if total or any(table[c]["mismatch"] for c in commands):
        print(f"crashing and mismatching mutants and their commands: {a.out}/")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
