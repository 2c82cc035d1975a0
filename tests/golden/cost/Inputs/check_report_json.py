#!/usr/bin/env python3
"""Checks that the grouped views of `meshsplit report --json` add up to the
raw numbers beside them: memory at peak by kind sums to peak_memory_bytes,
the collective groups cover every collective once and sum to
wire_bytes_by_kind, and wire bytes by axis x kind sum to wire_bytes_by_axis.
Prints one line per check; exits 1 on the first mismatch."""
import json
import sys


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def main():
    r = json.load(open(sys.argv[1]))
    for side in ("per_device", "unpartitioned"):
        m = r["memory_at_peak"][side]
        if m is None:
            continue
        total = m["parameters"] + m["activations"] + m["outputs"]
        if total != r[side]["peak_memory_bytes"]:
            sys.exit(f"{side}: memory by kind sums to {total}, peak is {r[side]['peak_memory_bytes']}")
        print(f"{side}: memory by kind sums to the peak ({total} bytes)")
    names = sorted(g for grp in r["collective_groups"] for g in grp["instructions"])
    if names != sorted(c["instruction"] for c in r["collectives"]):
        sys.exit("collective groups do not cover every collective exactly once")
    by_kind = {}
    for g in r["collective_groups"]:
        by_kind[g["kind"]] = by_kind.get(g["kind"], 0) + g["wire_bytes"]
        if g["collectives"] != len(g["instructions"]):
            sys.exit(f"group {g['cause']}: count {g['collectives']} != {len(g['instructions'])}")
    for k, v in r["wire_bytes_by_kind"].items():
        if not close(by_kind.get(k, 0), v):
            sys.exit(f"groups of {k} sum to {by_kind.get(k, 0)}, wire_bytes_by_kind says {v}")
    print(f"{len(r['collective_groups'])} groups cover {len(names)} collectives, wire bytes agree")
    for axis, kinds in r["wire_bytes_by_axis_and_kind"].items():
        if not close(sum(kinds.values()), r["wire_bytes_by_axis"][axis]):
            sys.exit(f"axis {axis}: {sum(kinds.values())} != {r['wire_bytes_by_axis'][axis]}")
    if set(r["wire_bytes_by_axis_and_kind"]) != set(r["wire_bytes_by_axis"]):
        sys.exit("axis x kind and by-axis name different axes")
    print("wire bytes by axis x kind agree with by axis")


if __name__ == "__main__":
    main()
