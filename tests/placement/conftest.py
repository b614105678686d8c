import pytest
from layouts import LLAMA3_405B_16K

from teton.spec.cluster import ClusterSpec


@pytest.fixture(scope="session")
def llama3_405b_16k():
    return LLAMA3_405B_16K


@pytest.fixture(scope="session")
def small_cluster():
    """16 hosts x 8 GPUs: racks of 2 hosts, pods of 8 hosts (4 racks), 1:4 between pods."""
    return ClusterSpec(name="small", host="grand-teton", hosts=16, layers=[
        dict(name="rack", switch="rtsw", span_gpus=16),
        dict(name="pod", switch="ctsw", span_gpus=64, oversubscription=4.0),
        dict(name="cluster", switch="atsw", span_gpus=128)])
