"""The sharding model: Mesh, PartitionSpec, NamedSharding, DTensor placements
both ways, the lossy cases, visualize_sharding, and NamedSharding's HLO text
against what the CLI produces for the same --shard rule."""

import re

import numpy as np
import pytest

import meshsplit as ms
from conftest import write_spec


@pytest.fixture
def mesh():
    return ms.Mesh({"data": 2, "model": 4})


def test_mesh_spellings(mesh):
    assert mesh.shape == {"data": 2, "model": 4}
    assert list(mesh.shape) == ["data", "model"]  # mesh order kept
    assert mesh.axis_names == ["data", "model"]
    assert mesh.size == 8
    assert ms.Mesh((2, 4), ("data", "model")) == mesh
    assert ms.Mesh("data=2,model=4") == mesh
    assert str(mesh) == "data=2,model=4"
    np.testing.assert_array_equal(mesh.devices, np.arange(8).reshape(2, 4))


def test_mesh_device_order():
    order = np.array([[0, 2, 4, 6], [1, 3, 5, 7]])
    m = ms.Mesh({"data": 2, "model": 4}, devices=order)
    np.testing.assert_array_equal(m.devices, order)
    assert m != ms.Mesh({"data": 2, "model": 4})
    assert ms.Mesh(str(m)) == m
    # An explicit iota order is the default mesh.
    assert ms.Mesh({"a": 4}, devices=[0, 1, 2, 3]) == ms.Mesh({"a": 4})


@pytest.mark.parametrize("axes, message", [
    ({"data": 0}, "bad size for mesh axis 'data'"),
    ({"1x": 2}, "bad mesh axis name '1x'"),
])
def test_mesh_errors(axes, message):
    with pytest.raises(ms.Error, match=re.escape("error: " + message)):
        ms.Mesh(axes)
    with pytest.raises(ms.Error, match="permutation"):
        ms.Mesh({"a": 2}, devices=[0, 0])


def test_partition_spec():
    assert ms.P("data", None) == ("data", None)
    assert repr(ms.P(("data", "model"), None)) == "P(('data', 'model'), None)"
    with pytest.raises(TypeError):
        ms.P(3)


@pytest.mark.parametrize("spec, placements", [
    (ms.P("data", None), (ms.Shard(0), ms.Replicate())),
    (ms.P(None, "data"), (ms.Shard(1), ms.Replicate())),
    (ms.P("model", "data"), (ms.Shard(1), ms.Shard(0))),
    (ms.P(("data", "model"), None), (ms.Shard(0), ms.Shard(0))),
    (ms.P(None, None), (ms.Replicate(), ms.Replicate())),
    (ms.P(), (ms.Replicate(), ms.Replicate())),
])
def test_placements_both_ways(mesh, spec, placements):
    s = ms.NamedSharding(mesh, spec)
    assert s.to_placements() == placements
    back = ms.from_placements(mesh, list(placements), 2)
    assert back == s
    assert back.hlo_sharding(2) == s.hlo_sharding(2)


def test_partial_placement(mesh):
    s = ms.from_placements(mesh, [ms.Shard(0), ms.Partial("sum")], 2)
    assert s.partial == ("model",)
    assert s.spec == ms.P("data", None)
    assert s.to_placements() == (ms.Shard(0), ms.Partial())
    assert s.hlo_sharding(2) == "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"
    assert s != ms.NamedSharding(mesh, ms.P("data", None))
    with pytest.raises(ms.Error, match="only sum partials"):
        ms.from_placements(mesh, [ms.Shard(0), ms.Partial("max")], 2)


def test_non_mesh_order_is_lossy(mesh):
    s = ms.NamedSharding(mesh, ms.P(("model", "data"), None))
    with pytest.raises(ms.ConversionError, match=r"dim 0 is split over mesh axes \[\(model,data\)\]"):
        s.to_placements()
    assert issubclass(ms.ConversionError, ms.Error)
    # It is still a valid sharding: only the placement form is missing.
    assert s.hlo_sharding(2) == "{devices=[8,1]<=[2,4]T(1,0)}"


def test_negative_shard_dim(mesh):
    assert ms.from_placements(mesh, [ms.Shard(-1), ms.Replicate()], 3) == \
        ms.NamedSharding(mesh, ms.P(None, None, "data"))


@pytest.mark.parametrize("make, message", [
    (lambda m: ms.NamedSharding(m, ms.P("x")), "unknown mesh axis 'x'"),
    (lambda m: ms.NamedSharding(m, ms.P("data", "data")), "mesh axis 'data' more than once"),
    (lambda m: ms.NamedSharding(m, ms.P("data"), partial=["data"]), "both in the partition spec and partial"),
    (lambda m: ms.from_placements(m, [ms.Shard(0)], 2), "1 placements for a mesh of 2 axes"),
    (lambda m: ms.from_placements(m, [ms.Shard(2), ms.Replicate()], 2), "out of range"),
    (lambda m: ms.NamedSharding(m, ms.P("data", None, None)).hlo_sharding(2), "has 3 dims but the tensor has rank 2"),
])
def test_sharding_errors(mesh, make, message):
    with pytest.raises(ms.Error, match=re.escape(message)):
        make(mesh)


def test_visualize(mesh):
    s = ms.NamedSharding(mesh, ms.P("data", None))
    grid = ms.visualize_sharding((8, 4), s)
    assert grid.splitlines()[1:] == [
        "+-----+",
        "| 0-3 |",
        "+-----+",
        "| 4-7 |",
        "+-----+",
    ]
    assert grid.splitlines()[0].startswith("shape (8, 4), tiles of (4, 4), {devices=")
    grid = ms.visualize_sharding((8, 8), ms.NamedSharding(mesh, ms.P("model", "data")))
    rows = [l for l in grid.splitlines()[1:] if l.startswith("|")]
    assert rows == ["| 0 | 4 |", "| 1 | 5 |", "| 2 | 6 |", "| 3 | 7 |"]
    assert "| 0,4 |" in ms.visualize_sharding((4,), ms.NamedSharding(mesh, ms.P("model")))
    with pytest.raises(ms.Error, match="rank-1 and rank-2"):
        ms.visualize_sharding((2, 2, 2), s)


HLO = """HloModule m, num_partitions=8

ENTRY main {
  x = f32[8,16] parameter(0)
  ROOT n = f32[8,16] negate(x)
}
"""


@pytest.mark.parametrize("spec", [
    ms.P("data", None), ms.P(None, "model"), ms.P("model", "data"),
    ms.P(("data", "model"), None), ms.P(("model", "data"), None), ms.P(None, None),
])
def test_hlo_text_matches_cli(tmp_path, cli, mesh, spec):
    """The CLI's partition output keeps the entry parameter's sharding as the
    --shard rule lowered it; NamedSharding must print the same text."""
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    dims = [None if d is None else d if isinstance(d, str) else list(d) for d in spec]
    shard = write_spec(tmp_path / "spec.json", "data=2,model=4", {"x": dims})
    out = cli("partition", hlo, "--shard", shard).stdout
    found = re.search(r"parameter\(0\), sharding=(\{.*?\})\s*$", out, re.M)
    assert found, out
    assert ms.NamedSharding(mesh, spec).hlo_sharding(2) == found.group(1)
