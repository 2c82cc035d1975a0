#!/usr/bin/env python3
"""Every module meshsplit prints for the golden corpus parses under --xla-strict.

For each test file under tests/golden, the commands its RUN lines give that
print a module (fmt, opt, propagate, partition, shrink-batch, shrink-shapes,
import; up to the first pipe, without `not`), plus fmt / propagate / partition
of every .hlo with no options, and the examples: run them, then re-parse what
they printed with `meshsplit fmt --xla-strict -`, which refuses what XLA's
HLO parser refuses (docs/xla_output.md). Prints the counts; exit 1 when a
printed module is refused (the module and the error are shown) or when
nothing was checked.

A golden input that itself holds forms XLA's parser refuses keeps them in
what meshsplit prints (the printer does not drop the input's attributes);
EXPECTED_REFUSALS names those files and the refusal expected, so that they
are checked to be refused for that reason and no other.

  xla_strict_roundtrip.py MESHSPLIT SOURCE_DIR
"""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys

EMITTERS = {"fmt", "opt", "propagate", "partition", "shrink-batch", "shrink-shapes", "import"}
# Options after which a command prints something other than a module.
NOT_A_MODULE = {"--json", "--print-rules", "--explain", "--verify-diagnostics", "--list-passes",
                "--help", "-o", "--output", "--print-after-all", "--dump-dir"}


# Golden file -> the error its printed modules must be refused with.
EXPECTED_REFUSALS = {
    # Header fields of older XLA versions, which the parser read
    # (openxla/xla 02f6793e) no longer has; the file also writes
    # result_accuracy on an add and custom_call_schedule= for schedule=.
    "tests/golden/text/fmt_xla_forms.hlo": "unexpected module attribute 'spmd_output_sharding'",
    # Written to show the refusals: its mesh= header and one-value constant
    # are printed as XLA text, its unknown attribute is kept.
    "tests/golden/text/Inputs/not_xla.hlo": "attribute 'foo' is not an attribute of add",
}


def run_lines(path):
    """The RUN: commands of a lit test, continuation lines joined."""
    lines, pending = [], ""
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"RUN:\s?(.*)$", line)
            if not m:
                continue
            text = m.group(1).rstrip()
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            lines.append(pending + text)
            pending = ""
    return lines


def emitting_commands(path, meshsplit, src):
    """argv lists of the RUN lines of `path` that print a module."""
    out = []
    for line in run_lines(path):
        first = line.split("|")[0].strip()
        if "%t" in first or ">" in first or first.startswith("not "):
            continue
        try:
            words = shlex.split(first)
        except ValueError:
            continue
        if len(words) < 2 or words[0] != "%meshsplit" or words[1] not in EMITTERS:
            continue
        if any(w in NOT_A_MODULE or w.startswith("--output=") for w in words):
            continue
        argv = []
        for w in words:
            w = w.replace("%meshsplit", meshsplit).replace("%shared", os.path.join(src, "..", "shared"))
            w = w.replace("%s", path).replace("%S", os.path.dirname(path))
            argv.append(w)
        if "2>&1" in argv:
            argv.remove("2>&1")
        out.append(argv)
    return out


def check(argv, meshsplit, src):
    """(status, detail): 'refused', 'ok' or 'skipped' (the command itself failed)."""
    try:
        made = subprocess.run(argv, cwd=src, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "skipped", "timeout"
    if made.returncode != 0 or not made.stdout.startswith(b"HloModule"):
        return "skipped", ""
    strict = subprocess.run([meshsplit, "fmt", "--xla-strict", "-"], input=made.stdout,
                            capture_output=True, timeout=300)
    if strict.returncode != 0:
        return "refused", strict.stderr.decode(errors="replace")
    return "ok", ""


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    meshsplit, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    golden = os.path.join(src, "tests", "golden")
    jobs = []
    files = 0
    for root, _, names in sorted(os.walk(golden)):
        for name in sorted(names):
            path = os.path.join(root, name)
            if not name.endswith((".hlo", ".test")):
                continue
            files += 1
            jobs += emitting_commands(path, meshsplit, src)
            if name.endswith(".hlo"):
                jobs += [[meshsplit, cmd, path] for cmd in ("fmt", "propagate", "partition")]
    examples = os.path.join(src, "examples")
    for root, _, names in sorted(os.walk(examples)):
        for name in sorted(names):
            if name.endswith(".hlo"):
                jobs += [[meshsplit, "partition", os.path.join(root, name)]]
    gpt2 = os.path.join(examples, "gpt2")
    if os.path.isdir(gpt2):
        for spec in sorted(os.listdir(gpt2)):
            if spec.endswith(".json"):
                jobs.append([meshsplit, "partition", os.path.join(gpt2, "gpt2_train_step.onnx"),
                             "--shard", os.path.join(gpt2, spec)])
    counts = {"ok": 0, "refused": 0, "skipped": 0, "expected": 0}
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for argv, (status, detail) in zip(jobs, pool.map(lambda a: check(a, meshsplit, src), jobs)):
            shown = " ".join(os.path.relpath(a, src) if a.startswith(src) else a for a in argv)
            expected = next((why for f, why in EXPECTED_REFUSALS.items()
                             if os.path.join(src, f) in argv), None)
            if expected is not None and status != "skipped":
                if status == "refused" and expected in detail:
                    counts["expected"] += 1
                    continue
                failed += 1
                print(f"NOT REFUSED AS EXPECTED ({expected}): {shown}\n{detail}")
                continue
            counts[status] += 1
            if status == "refused":
                failed += 1
                print(f"REFUSED: {shown}\n{detail}")
    print(f"xla-strict round trip: {counts['ok']} printed modules parse, {counts['refused']} refused, "
          f"{counts['expected']} refused as expected ({len(jobs)} commands from {files} golden files "
          f"and the examples; {counts['skipped']} printed no module)")
    return 1 if failed or counts["ok"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
