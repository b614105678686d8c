"""Order statistics of the normal distribution: the expected maximum of N standard normals.

Two mechanisms wait for the largest of N random quantities: a synchronous training step for its
slowest rank (``engine.scale``, stragglers) and an MoE all-to-all for its most loaded expert-parallel
rank (``workload.moe``, router imbalance).
"""

from __future__ import annotations

import math

import numpy as np

from teton.memo import cached

# the density of the max, N phi(x) Phi(x)^(N-1), integrated by the trapezoid rule over [-8, 12] (the
# max of 10^7 draws sits near 5.3; its tails beyond are below 1e-15). 1 - Phi and log Phi from erfc
# keep Phi^(N-1) exact near 1.
_X = np.linspace(-8.0, 12.0, 8001)
_PDF = np.exp(-0.5 * _X**2) / math.sqrt(2 * math.pi)
_LOG_CDF = np.log1p(-np.array([0.5 * math.erfc(x / math.sqrt(2)) for x in _X]))


@cached(4096)
def expected_max_std_normal(n: int) -> float:
    """E[max of ``n`` independent standard normals] = integral of ``x n phi(x) Phi(x)^(n-1)``
    (David & Nagaraja 2003, "Order Statistics", Sec. 2.1): 0 for n = 1, 1/sqrt(pi) = 0.5642 for 2,
    1.5388 for 10, 2.5076 for 100, 3.2414 for 1,000 (Harter 1961's tables); grows like sqrt(2 ln n)."""
    if n <= 1:
        return 0.0
    density = n * _PDF * np.exp((n - 1) * _LOG_CDF)
    return float(np.trapezoid(_X * density, _X))
