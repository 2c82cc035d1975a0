"""Shared helpers of the pytest files: the meshsplit CLI (MESHSPLIT_CLI, set
by CTest) to compare the Python package against, and the source tree."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("MESHSPLIT_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def cli():
    """Runs the meshsplit command; returns its stdout, fails on a non-zero status."""
    exe = os.environ.get("MESHSPLIT_CLI")
    if not exe:
        pytest.fail("MESHSPLIT_CLI is not set (run these tests through ctest -L python)")

    def run(*args, check=True):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"meshsplit {' '.join(map(str, args))} failed:\n{p.stderr}")
        return p
    return run


def write_spec(path, mesh_text, rules):
    """A --shard spec file: rules is {glob: dims-list or "replicated"}."""
    out = []
    for match, dims in rules.items():
        out.append({"match": match, "replicated": True} if dims == "replicated"
                   else {"match": match, "dims": dims})
    path.write_text(json.dumps({"mesh": mesh_text, "rules": out}))
    return path
