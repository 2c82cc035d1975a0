"""load / parse / partition / run / verify from Python: parameters, NumPy
round trips by name and position with their dtypes (bf16 as uint16),
errors with the CLI's text, and results equal to the CLI's."""

import json
import re

import numpy as np
import pytest

import meshsplit as ms
from conftest import SOURCE_DIR, write_spec

MLP = SOURCE_DIR / "examples" / "mlp.hlo"


@pytest.fixture
def mlp():
    return ms.load(MLP)


@pytest.fixture
def mlp_spec():
    mesh = ms.Mesh({"data": 2, "model": 2})
    return ms.ShardSpec(mesh, {"x": ms.P("data", None), "w1": ms.P(None, "model"),
                               "b1": ms.P("model"), "w2": ms.P("model", None)})


def mlp_inputs(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"x": (4, 8), "w1": (8, 16), "b1": (16,), "w2": (16, 3), "b2": (3,)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def test_parameters(mlp):
    assert mlp.parameters == [("x", (4, 8), "f32"), ("w1", (8, 16), "f32"), ("b1", (16,), "f32"),
                              ("w2", (16, 3), "f32"), ("b2", (3,), "f32")]
    assert mlp.outputs == [("out0", (4, 3), "f32"), ("out1", (4,), "f32")]


def test_run_by_name_and_position(mlp, mlp_spec):
    x = mlp_inputs()
    logits = np.maximum(x["x"] @ x["w1"] + x["b1"], 0) @ x["w2"] + x["b2"]
    one = ms.run(mlp, x)
    assert [o.dtype for o in one] == [np.float32, np.float32]
    np.testing.assert_allclose(one[0], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(one[1], logits.max(axis=1), rtol=1e-5, atol=1e-5)
    by_position = ms.run(mlp, [x[p[0]] for p in mlp.parameters])
    assert all(np.array_equal(a, b) for a, b in zip(one, by_position))
    four = ms.run(mlp, x, spec=mlp_spec)
    np.testing.assert_allclose(four[0], logits, rtol=1e-5, atol=1e-5)


def test_run_matches_cli(tmp_path, cli, mlp, mlp_spec):
    x = mlp_inputs(1)
    (tmp_path / "in").mkdir()
    for k, v in x.items():
        np.save(tmp_path / "in" / f"{k}.npy", v)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(mlp_spec.to_json())
    cli("run", MLP, "--shard", spec_file, "--inputs", tmp_path / "in", "--outputs", tmp_path / "out")
    outs = ms.run(mlp, x, spec=mlp_spec)
    for i, o in enumerate(outs):
        ref = np.load(tmp_path / "out" / f"out{i}.npy")
        assert ref.dtype == o.dtype and ref.shape == o.shape
        assert ref.tobytes() == o.tobytes()


DTYPES = """HloModule dtypes

ENTRY main {
  b = bf16[3] parameter(0)
  i = s32[2,2] parameter(1)
  p = pred[2] parameter(2)
  u = u8[2] parameter(3)
  d = f64[] parameter(4)
  bb = bf16[3] add(b, b)
  ii = s32[2,2] multiply(i, i)
  np = pred[2] not(p)
  uu = u8[2] add(u, u)
  dd = f64[] negate(d)
  ROOT t = (bf16[3], s32[2,2], pred[2], u8[2], f64[]) tuple(bb, ii, np, uu, dd)
}
"""


def test_dtypes_round_trip():
    m = ms.parse(DTYPES, "dtypes.hlo")
    assert [p[2] for p in m.parameters] == ["bf16", "s32", "pred", "u8", "f64"]
    bf16_1_5 = np.array([0x3FC0, 0x3FC0, 0xBF80], dtype=np.uint16)  # 1.5, 1.5, -1
    outs = ms.run(m, [bf16_1_5, np.array([[1, -2], [3, 4]], np.int32), np.array([True, False]),
                      np.array([7, 200], np.uint8), np.float64(2.5)])
    assert outs[0].dtype == np.uint16
    assert outs[0].tolist() == [0x4040, 0x4040, 0xC000]  # 3, 3, -2 in bf16
    assert outs[1].dtype == np.int32 and outs[1].tolist() == [[1, 4], [9, 16]]
    assert outs[2].dtype == np.bool_ and outs[2].tolist() == [False, True]
    assert outs[3].dtype == np.uint8 and outs[3].tolist() == [14, 144]  # wraps
    assert outs[4].dtype == np.float64 and outs[4].shape == () and outs[4] == -2.5


def test_input_errors(mlp):
    x = mlp_inputs()
    with pytest.raises(ms.Error, match=r"input 'w1' \(parameter 1\) expects f32\[8,16\] but got f64\[8,16\]"):
        ms.run(mlp, {**x, "w1": x["w1"].astype(np.float64)})
    with pytest.raises(ms.Error, match=r"expects f32\[4,8\] but got f32\[8,4\]"):
        ms.run(mlp, {**x, "x": x["x"].T.copy()})
    with pytest.raises(ms.Error, match="no input for parameter 'b2'"):
        ms.run(mlp, {k: v for k, v in x.items() if k != "b2"})
    with pytest.raises(ms.Error, match="input 'w3' names no entry parameter"):
        ms.run(mlp, {**x, "w3": x["w1"]})
    with pytest.raises(ms.Error, match="4 inputs for 5 entry parameters"):
        ms.run(mlp, list(x.values())[:4])


def test_errors_carry_cli_text(tmp_path, cli):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] frobnicate(x)\n}\n")
    with pytest.raises(ms.Error) as e:
        ms.load(bad)
    expected = cli("fmt", bad, check=False).stderr.rstrip("\n")
    assert expected.startswith(f"{bad}:5:")
    assert str(e.value) == expected
    with pytest.raises(ms.Error, match=r"^<string>:1:9: error: expected '\{' to begin computation"):
        ms.parse("nonsense")
    with pytest.raises(ms.Error, match="cannot open|No such file|does not exist"):
        ms.load(tmp_path / "missing.hlo")


def test_spec_errors(tmp_path, cli, mlp):
    spec = ms.ShardSpec(ms.Mesh({"data": 2}), {"x": ms.P("model", None)})
    with pytest.raises(ms.Error, match="unknown mesh axis 'model'"):
        ms.partition(mlp, spec)
    with pytest.raises(ms.Error, match=re.escape("rule 'b1' has 2 dims but 'b1' is f32[16]")):
        ms.partition(mlp, ms.ShardSpec(ms.Mesh({"data": 2}), {"b1": ms.P("data", None)}))


def test_spec_json_round_trip(tmp_path, mlp_spec):
    back = ms.ShardSpec.from_json(mlp_spec.to_json())
    assert back.mesh == mlp_spec.mesh
    assert back.rules == mlp_spec.rules
    f = write_spec(tmp_path / "s.json", "a=2,b=2", {"x": [["a", "b"], None], "w*": "replicated"})
    loaded = ms.ShardSpec.load(f)
    assert loaded.rules == {"x": ms.P(("a", "b"), None), "w*": ms.REPLICATED}
    with pytest.raises(ms.Error, match="s2.json"):
        (tmp_path / "s2.json").write_text("{")
        ms.ShardSpec.load(tmp_path / "s2.json")


def test_partition_matches_cli(tmp_path, cli, mlp, mlp_spec):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(mlp_spec.to_json())
    p = ms.partition(mlp, mlp_spec)
    assert p.num_partitions == 4
    assert p.text == cli("partition", MLP, "--shard", spec_file).stdout
    assert p.collectives and all(k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                       "collective-permute") for k in p.collectives)
    assert sum(p.collectives.values()) == sum(p.text.count(f" {k}(") for k in p.collectives)
    # The module itself is left as loaded.
    assert mlp.num_partitions == 1
    assert ms.partition(mlp, mlp_spec).text == p.text


def test_verify(mlp, mlp_spec):
    r = ms.verify(mlp, mlp_spec, seed=3)
    assert r.ok and r.status == "ok" and r.num_partitions == 4
    assert 0 <= r.max_abs_error < 1e-4
    assert r.first_diverging == ""
    with pytest.raises(ms.Error, match="two or more partitions"):
        ms.verify(mlp)


def test_verify_module_shardings():
    """No spec: the module's own shardings (a reversed device order that the
    partitioner must reshard) and its num_partitions."""
    text = """HloModule m, num_partitions=2

ENTRY main {
  x = f32[4] parameter(0), sharding={devices=[2]1,0}
  y = f32[4] negate(x), sharding={devices=[2]0,1}
  ROOT z = f32[4] add(y, y), sharding={replicated}
}
"""
    m = ms.parse(text)
    r = ms.verify(m, seed=1, propagate=False)
    assert r.ok, r.message
    assert r.num_partitions == 2
    assert "collective-permute" in ms.partition(m, propagate=False).collectives
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(ms.run(m, [x])[0], -2 * x)


def test_report(tmp_path, cli, mlp, mlp_spec):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(mlp_spec.to_json())
    rep = ms.report(mlp, mlp_spec)
    assert rep == json.loads(cli("report", MLP, "--shard", spec_file, "--json").stdout)
    assert rep["file"] == str(MLP) and rep["mesh"] == "data=2,model=2"
    # No spec: one partition, the mesh is one axis.
    alone = ms.report(mlp)
    assert alone == json.loads(cli("report", MLP, "--json").stdout)
    assert alone["num_partitions"] == 1 and alone["collectives"] == []


def test_version(cli):
    assert re.fullmatch(r"\d+\.\d+\.\d+", ms.__version__)
    assert cli("--version").stdout.strip() == "meshsplit " + ms.__version__


def test_autoshard_arguments(mlp):
    """The small MLP's best plan is replication (an empty spec); test_gpt2.py
    compares a sharded plan with the CLI's."""
    mesh = ms.Mesh({"data": 2, "model": 2})
    plan = ms.autoshard(mlp, mesh, budget=40, time_limit=0, seed=1)
    assert plan.evaluations > 0 and plan.cost > 0
    assert plan.spec.mesh == mesh and plan.spec.rules == {}
    with pytest.raises(ms.Error, match="budget must be at least 1"):
        ms.autoshard(mlp, mesh, budget=0)


def test_parse_reads_shardy_shardings(cli):
    # What jax.jit(f).lower(x).as_text(dialect="hlo") gives with Shardy on:
    # ms.parse lowers it as loading a file does (docs/inputs.md).
    text = SOURCE_DIR / "tests" / "golden" / "shardy" / "mlp.hlo"
    m = ms.parse(text.read_text(), "mlp.hlo")
    assert m.num_partitions == 4
    assert "xla.sdy" not in m.text and 'meshsplit.mesh="data=2,model=2"' in m.text
    r = ms.verify(m, seed=2)
    assert r.ok, r.message
    assert ms.partition(m).text == cli("partition", text).stdout
