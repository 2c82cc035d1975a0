#!/usr/bin/env python3
"""Prints what a ctest run skipped, from its JUnit file (ctest --output-junit).

tools/test.sh calls this after ctest, so a run in a clone without ../shared
ends by saying how many tests did not run and why (one line each: the
"skipped: ..." line the test printed), and how many lit tests were
UNSUPPORTED. Exit status 0 always: ctest's own status is the verdict.

Usage: test_summary.py CTEST_JUNIT.xml
"""
import re
import sys
import xml.etree.ElementTree as ET


def reason(output):
    """The test's own "skipped: ..." line, else its last non-empty line."""
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for line in lines:
        if line.lower().startswith("skipped:"):
            return line
    # GoogleTest prints "file:line: Skipped" and then the GTEST_SKIP message.
    for i, line in enumerate(lines[:-1]):
        if line.endswith(": Skipped") and not lines[i + 1].startswith("["):
            return "skipped: " + lines[i + 1]
    return lines[-1] if lines else "(no output)"


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test_summary: cannot read {path}: {e}", file=sys.stderr)
        return 0
    cases = root.iter("testcase")
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    skipped = []
    lit_unsupported = []
    lit_notes = []
    for case in cases:
        name = case.get("name", "?")
        out = case.findtext("system-out") or ""
        status = case.get("status", "run")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            counts["skipped"] += 1
            skipped.append((name, reason(out)))
        elif case.find("failure") is not None or status == "fail":
            counts["failed"] += 1
        else:
            counts["passed"] += 1
        if name == "lit":
            # lit 14 lists them under "Unsupported Tests (N):" as "  suite :: path".
            block = re.search(r"^Unsupported Tests \(\d+\):\n((?:  \S+ :: \S+\n)+)", out, re.M)
            lit_unsupported = re.findall(r":: (\S+)", block.group(1)) if block else []
            lit_notes = re.findall(r"note: (skipped: .*)", out)
    print()
    print(f"ctest: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    for name, why in skipped:
        print(f"  skipped {name}: {why}")
    if lit_unsupported:
        print(f"lit: {len(lit_unsupported)} unsupported (their REQUIRES: feature is absent): "
              + " ".join(lit_unsupported))
        for note in lit_notes:
            print(f"  {note}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
