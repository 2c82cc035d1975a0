#!/usr/bin/env python3
"""Reads the DOM headless chromium dumped of a `meshsplit report --html` page
(after its script ran) and the screenshot taken of it, and prints what the
browser test checks: the charts' drawn bars (the page measured them with
getBBox), the collective groups table, the sharding grids' labels, and that
the screenshot is a real, non-blank image of the requested size. Exits 1 when
something is missing, so the test fails even before FileCheck looks.

usage: check_report_dom.py DOM PNG WIDTH HEIGHT"""
import html.parser
import re
import struct
import sys
import zlib


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.body = {}
        self.stack = []          # open elements' (tag, attrs)
        self.groups = []         # rows of #collective-groups: cell texts
        self.grids = []          # (section id, name, label, label class)
        self._row = None
        self._cell = None
        self._grid = None
        self._grab = None

    def _inside(self, pred):
        return any(pred(t, a) for t, a in self.stack)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        self.stack.append((tag, a))
        in_groups = self._inside(lambda t, x: t == "table" and x.get("id") == "collective-groups")
        if tag == "tr" and in_groups and self._inside(lambda t, x: t == "tbody"):
            self._row = []
        elif tag == "td" and self._row is not None and not self._inside(
                lambda t, x: t == "details"):
            self._cell = ""
        cls = a.get("class", "")
        if tag == "div" and "grid-box" in cls.split():
            section = next((x.get("id") for t, x in reversed(self.stack) if x.get("id")), "")
            self._grid = {"section": section, "name": "", "label": "", "cls": ""}
        elif self._grid is not None and tag == "b":
            self._grab = "name"
        elif self._grid is not None and tag == "div" and cls in ("mesh-label", "raw-label"):
            self._grab = "label"
            self._grid["cls"] = cls

    def handle_endtag(self, tag):
        while self.stack:
            t, a = self.stack.pop()
            if t == tag:
                break
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.groups.append(self._row)
            self._row = None
        elif tag in ("b", "div") and self._grab:
            self._grab = None
            if tag == "div" and self._grid and self._grid["label"]:
                pass
        if tag == "svg" and self._grid is not None and self._grid["label"]:
            self.grids.append(self._grid)
            self._grid = None

    def handle_data(self, data):
        if self._cell is not None and not self._inside(lambda t, x: t == "details"):
            self._cell += data
        if self._grab and self._grid is not None:
            self._grid[self._grab] += data


def png_info(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    return width, height, len(set(raw))


def main():
    dom, png, want_w, want_h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    page = Page()
    page.feed(open(dom, encoding="utf-8").read())
    b = page.body
    failures = []

    def need(cond, what):
        if not cond:
            failures.append(what)

    need(b.get("data-chart-ok") == "yes", "memory chart drew no bars")
    need(int(b.get("data-memory-bars", 0)) >= 2, "memory chart: fewer than 2 drawn segments")
    need(int(b.get("data-wire-bars", 0)) >= 1, "wire chart: no drawn segments")
    need(b.get("data-sort-ok") == "yes", "sorting the groups by wire bytes failed")
    print(f"memory bars drawn: {b.get('data-memory-bars')}")
    print(f"wire bars drawn: {b.get('data-wire-bars')}")
    print(f"sort by wire bytes: {b.get('data-sort-ok')}")
    need(int(b.get("data-groups", 0)) == len(page.groups), "group rows disagree with the page")
    total = 0
    for row in page.groups:
        kind, count, executions, wire, share, axes, cause = row[:7]
        print(f"group: {kind} x{count} {wire} {axes} | {cause}")
        total += int(count)
    print(f"groups: {len(page.groups)} holding {total} collectives")
    need(page.groups, "no collective groups")
    labels = 0
    for g in page.grids:
        if g["cls"] == "mesh-label":
            labels += 1
            need(re.fullmatch(r"(\[[^\]]*\]|replicated)( (manual|unreduced)\([^)]*\))*", g["label"]),
                 f"grid {g['name']}: label {g['label']!r} is not mesh_split notation")
    print(f"grids: {len(page.grids)}, {labels} labelled in mesh_split notation")
    need(len(page.grids) == int(b.get("data-grids", -1)), "grid count disagrees with the page")
    for g in page.grids:
        if g["name"] in sys.argv[5:]:
            print(f"grid {g['section']} {g['name']}: {g['label']}")
    need(not any(re.search(r"\[\d+\]$", g["name"]) for g in page.grids if g["section"] == "output-grids"),
         "an output is named ROOT[k] although the model names its outputs")
    width, height, distinct = png_info(png)
    print(f"screenshot: {width}x{height}")
    need((width, height) == (want_w, want_h), f"screenshot is {width}x{height}")
    need(distinct > 32, "screenshot looks blank")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
