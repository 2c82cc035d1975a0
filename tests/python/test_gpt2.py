"""The GPT-2 training step (examples/gpt2) on the 2 x 4 data x model mesh,
partitioned and run from Python: the SPMD program and every output must be
the CLI's, bit for bit, and verify must agree with one device."""

import json

import numpy as np
import pytest

import meshsplit as ms
from conftest import SOURCE_DIR

GPT2 = SOURCE_DIR / "examples" / "gpt2"
MODEL = GPT2 / "gpt2_train_step.onnx"


@pytest.fixture(scope="module")
def model():
    return ms.load(MODEL)


@pytest.fixture(scope="module")
def spec():
    """dp2_mp4.json written in Python."""
    mesh = ms.Mesh({"data": 2, "model": 4})
    col, row = ms.P("model", None), ms.P(None, "model")
    return ms.ShardSpec(mesh, {
        "idx": ms.P("data", None), "tgt": ms.P("data", None),
        "h.*.attn.c_attn.weight": col, "h.*.attn.c_attn.bias": ms.P("model"),
        "h.*.attn.c_proj.weight": row,
        "h.*.mlp.c_fc.weight": col, "h.*.mlp.c_fc.bias": ms.P("model"),
        "h.*.mlp.c_proj.weight": row,
    })


def inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in model.parameters:
        if dtype == "s64":
            out[name] = rng.integers(0, 512, size=shape, dtype=np.int64)
        else:
            out[name] = (0.02 * rng.standard_normal(shape)).astype(np.float32)
    return out


def test_parameters(model):
    names = [p[0] for p in model.parameters]
    assert names[:2] == ["idx", "tgt"] and len(names) == 30
    assert model.parameters[0][1:] == ((4, 64), "s64")
    assert len(model.outputs) == 29  # loss, then the 28 updated parameters
    assert model.outputs[0] == ("loss", (), "f32")
    assert [o[0] for o in model.outputs[1:]] == ["new." + p[0] for p in model.parameters[2:]]


def test_spec_is_the_example_file(spec):
    assert ms.ShardSpec.load(GPT2 / "dp2_mp4.json").rules == spec.rules


def test_partition_matches_cli(cli, model, spec):
    p = ms.partition(model, spec)
    assert p.num_partitions == 8
    assert p.text == cli("partition", MODEL, "--shard", GPT2 / "dp2_mp4.json").stdout
    assert p.collectives.get("all-reduce", 0) > 0


def test_run_matches_cli_bit_for_bit(tmp_path, cli, model, spec):
    x = inputs(model)
    (tmp_path / "in").mkdir()
    for name, value in x.items():
        np.save(tmp_path / "in" / f"{name}.npy", value)
    cli("run", MODEL, "--shard", GPT2 / "dp2_mp4.json", "--inputs", tmp_path / "in",
        "--outputs", tmp_path / "out")
    outs = ms.run(model, x, spec=spec)
    assert len(outs) == 29
    for i, o in enumerate(outs):
        ref = np.load(tmp_path / "out" / f"{model.outputs[i][0]}.npy")  # run names them so
        assert (o.dtype, o.shape) == (ref.dtype, ref.shape), i
        assert o.tobytes() == ref.tobytes(), f"out{i} differs from the CLI's"
    assert np.isfinite(outs[0]).all() and outs[0].shape == ()
    # The same step on one device agrees to rounding (a different program).
    one = ms.run(model, x)
    np.testing.assert_allclose(outs[0], one[0], rtol=1e-4)


def test_report_is_the_cli_json(cli, model, spec):
    rep = ms.report(model, spec)
    assert rep == json.loads(cli("report", MODEL, "--shard", GPT2 / "dp2_mp4.json", "--json").stdout)
    assert rep["num_partitions"] == 8 and rep["mesh"] == "data=2,model=4"
    assert rep["collectives"] and rep["per_device"]["flops"] < rep["unpartitioned"]["flops"]


def test_autoshard_is_the_cli_plan(tmp_path, cli, model):
    """Under a 2 MiB per-device memory cap replication is infeasible, so the
    plan shards; with no time limit it must be the plan the CLI writes."""
    mesh = ms.Mesh({"data": 2, "model": 4})
    plan = ms.autoshard(model, mesh, budget=60, time_limit=0, memory_limit=2 << 20)
    assert plan.spec.rules and plan.evaluations == 60
    cli("autoshard", MODEL, "--mesh", "data=2,model=4", "--budget", 60, "--time-limit", 0,
        "--memory-limit", "2MiB", "--quiet", "-o", tmp_path / "plan.json")
    assert plan.spec.rules == ms.ShardSpec.load(tmp_path / "plan.json").rules
    assert ms.verify(model, plan.spec, seed=0).ok


def test_verify(model, spec):
    r = ms.verify(model, spec, seed=0)
    assert r.ok, r.message
    assert r.num_partitions == 8
