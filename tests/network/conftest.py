import pytest

from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec


@pytest.fixture(scope="session")
def ib():
    return ClusterSpec(**CLUSTER_PRESETS["meta-ib-24k"])
