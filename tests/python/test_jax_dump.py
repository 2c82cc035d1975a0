"""A real JAX dump (MaxText's training step, XLA_FLAGS=--xla_dump_to, from
../shared/models): loaded with its own data-parallel shardings and
partitioned with no spec, then lifted onto data=8 x model=4 with the
Megatron spec of examples/maxtext; both programs equal the CLI's."""

import pytest

import meshsplit as ms
from conftest import SOURCE_DIR

DUMP = SOURCE_DIR.parent / "shared" / "models" / "hlo" / "maxtext_train_step_dp8.hlo"
SPEC = SOURCE_DIR / "examples" / "maxtext" / "megatron_dp8_mp4.json"

pytestmark = pytest.mark.skipif(not DUMP.exists(), reason=f"needs {DUMP}")


@pytest.fixture(scope="module")
def model():
    return ms.load(DUMP)


def test_own_shardings(cli, model):
    # The dump's header has no num_partitions; its shardings name 8 devices.
    assert model.num_partitions == 1
    p = ms.partition(model, num_partitions=8)
    assert p.num_partitions == 8
    assert p.text == cli("partition", DUMP, "--num-partitions", 8).stdout


def test_lifted_megatron_spec(cli, model):
    spec = ms.ShardSpec.load(SPEC)
    assert spec.existing_axes == ("data",)
    assert spec.rules["Arg_2.3"] == ms.P(None, None, "model")
    p = ms.partition(model, spec)
    assert p.num_partitions == 32
    assert p.text == cli("partition", DUMP, "--shard", SPEC).stdout
