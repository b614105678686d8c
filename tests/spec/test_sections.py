"""The storage and reliability sections are typed at load (``StorageSection``, ``ReliabilitySpec``):
an unknown key anywhere in them is a one-line error when the spec loads, not when (or whether)
a verb reads it, and consumers read attributes, not mappings."""

import pydantic
import pytest
from cli_checks import one_line_error

from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.reliability import ReliabilitySpec
from teton.spec.storage import StorageSection, spec_storage

EXAMPLE = "examples/llama3-405b-16k.yaml"
SECTIONS = ["storage.preset=tectonic-llama3", "storage.servers=100", "storage.checkpoint.mode=sync",
            "storage.data_loading.tokens_per_s=2e6", "storage.devx.nfs=local-nvme", "reliability.tokens=15.6T",
            "reliability.runs=8"]


@pytest.mark.parametrize("item, needle", [
    ("storage.data_loading.bogus=1", "storage.data_loading.bogus = 1: unknown field; allowed: tokens_per_s, "
                                     "bytes_per_token"),  # loaded before: only teton checkpoint read it
    ("storage.devx.bogus=1", "storage.devx.bogus = 1: unknown field; allowed: nfs"),
    ("storage.devx.nfs=nowhere", "storage.devx.nfs = 'nowhere': unknown"),
    ("storage.data_loading=[1]", "storage.data_loading = [1]: must be a mapping"),
    ("storage.checkpoint.bogus=1", "storage.checkpoint.bogus = 1: unknown field"),
    ("reliability.bogus=1", "reliability.bogus = 1: unknown"),
    ("reliability.infant_mortality.bogus=1", "reliability.infant_mortality.bogus = 1: unknown"),
])
def test_an_unknown_key_of_either_section_fails_at_load(item, needle):
    with pytest.raises(SpecError) as err:
        load_spec(EXAMPLE, [item])
    assert needle in str(err.value)


def test_every_verb_that_loads_a_spec_refuses_it(cli):
    for verb in ("run", "ops"):
        code, _, err = cli(verb, EXAMPLE, "--set", "storage.data_loading.bogus=1")
        one_line_error(code, err, "--set storage.data_loading.bogus=1")


def test_the_sections_are_frozen_models_read_by_attribute():
    spec = load_spec(EXAMPLE, SECTIONS)
    assert isinstance(spec.storage, StorageSection) and isinstance(spec.reliability, ReliabilitySpec)
    assert spec.storage.checkpoint.mode == "sync" and spec.storage.data_loading.tokens_per_s == 2e6
    assert spec.storage.devx.nfs == "local-nvme" and spec.reliability.tokens == 15.6e12
    assert spec_storage(spec).servers == 100 and spec_storage(spec).name == "tectonic-llama3"
    with pytest.raises(pydantic.ValidationError):
        spec.storage.preset = "local-nvme"
    assert load_spec(EXAMPLE).storage is None and load_spec(EXAMPLE).reliability is None


def test_a_section_moved_to_another_preset_keeps_what_it_sets():
    """What teton plan does: the user's storage section on the plan's preset and server count."""
    section = load_spec(EXAMPLE, SECTIONS).storage
    moved = section.on("hammerspace-pnfs", servers=40)
    assert moved.system().name == "hammerspace-pnfs" and moved.system().servers == 40
    assert moved.checkpoint == section.checkpoint and moved.data_loading == section.data_loading
    assert moved.given("preset") == "hammerspace-pnfs" and section.given("servers") == 100
    with pytest.raises(SpecError, match="storage.servers"):
        section.on("tectonic-llama3", servers=0)


def test_a_spec_without_a_preset_takes_the_clusters_storage():
    spec = load_spec(EXAMPLE, ["storage.servers=10"])
    assert spec.storage.preset is None and spec_storage(spec).name == spec.cluster.storage
