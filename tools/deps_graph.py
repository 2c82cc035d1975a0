#!/usr/bin/env python3
"""Prints the module dependency graph of src/ as read from the #include lines.

A module is a directory under src/ (src/partitioner/handlers belongs to
partitioner). Each line is `module: the modules it includes`, lower modules
first; a cycle, or an include of a module that the CMake DEPS do not allow,
shows up as an edge pointing the wrong way. With --dot, prints Graphviz.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def module_of(path, src):
    return path.relative_to(src).parts[0]


def read_graph(src):
    graph = {}
    for f in sorted(src.rglob("*")):
        if f.suffix not in (".h", ".cc") or not f.is_file():
            continue
        mod = module_of(f, src)
        deps = graph.setdefault(mod, set())
        for line in f.read_text(errors="replace").splitlines():
            m = INCLUDE.match(line)
            if m and m.group(1) != mod and (src / m.group(1)).is_dir():
                deps.add(m.group(1))
    return graph


def layered(graph):
    """Modules ordered so that each comes after what it includes (cycles last)."""
    order, placed = [], set()
    while len(placed) < len(graph):
        ready = sorted(m for m in graph if m not in placed and graph[m] <= placed)
        if not ready:  # a cycle: report the rest as is
            ready = sorted(m for m in graph if m not in placed)
            for m in ready:
                print(f"warning: {m} is in an include cycle", file=sys.stderr)
        order.extend(ready)
        placed.update(ready)
    return order


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=pathlib.Path(__file__).resolve().parent.parent / "src",
                    type=pathlib.Path, help="source root (default: the repository's src/)")
    ap.add_argument("--dot", action="store_true", help="print a Graphviz digraph")
    args = ap.parse_args()
    graph = read_graph(args.src)
    order = layered(graph)
    if args.dot:
        print("digraph meshsplit {")
        for m in order:
            for d in sorted(graph[m]):
                print(f"  {m} -> {d};")
        print("}")
        return
    for m in order:
        print(f"{m}: {' '.join(sorted(graph[m])) or '-'}")


if __name__ == "__main__":
    main()
