import pytest

from teton.topology.cluster import CLUSTER_PRESETS, ClusterSpec


@pytest.fixture(scope="session")
def roce():
    return ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])


@pytest.fixture(scope="session")
def ib():
    return ClusterSpec(**CLUSTER_PRESETS["meta-ib-24k"])
