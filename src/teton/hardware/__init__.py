"""Hardware catalogs: GPUs, NICs, hosts, and kernel/collective efficiency constants."""

from teton.hardware.efficiency import Efficiency, cluster_efficiency, efficiency_for
from teton.hardware.gpus import GPU, GPUS
from teton.hardware.hosts import HOSTS, NIC, NICS, Host

__all__ = ["Efficiency", "cluster_efficiency", "efficiency_for", "GPUS", "GPU", "HOSTS", "NICS", "NIC", "Host"]
