"""Units, byte sizes, and the counts a user types (``15.6T`` tokens, ``16M`` tokens per step).

Decimal units (GB, TB) for bandwidths and storage, as vendors quote them; binary ones (GiB, MiB)
for memory, as ``teton run`` prints it (an "80 GB" H100 holds 79.6 GiB)."""

from __future__ import annotations

import math
import re
from typing import Any

from teton.errors import SpecError

GB = 1e9
TB = 1e12
MIB = 2**20
GIB = 2**30
BF16_BYTES = 2
FP32_BYTES = 4
# Mixed-precision Adam state per parameter: fp32 master weights + first and second moments
ADAM_STATE_BYTES = 3 * FP32_BYTES

_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([KMBGT]?)\s*$")
_DECIMAL = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(value: Any, field: str) -> float:
    """A positive decimal count: 15.6e12, "15.6e12" (YAML 1.1 reads it as a string), "15.6T", "2B"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = float(value)
    else:
        m = _COUNT.match(str(value))
        if not m:
            raise SpecError(field, value, "expected a positive number like 15.6e12 or 15.6T")
        x = float(m.group(1)) * _DECIMAL[m.group(2).upper()]
    if not math.isfinite(x) or x <= 0:
        raise SpecError(field, value, "must be a positive, finite number")
    return x


def format_count(x: float) -> str:
    """A count as a user types it back (:func:`parse_count`'s suffixes): ``15.6T``, ``16.8M``,
    ``4.1K`` (three significant digits from a thousand up; the count itself below)."""
    scales = (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3))
    for i, (suffix, scale) in enumerate(scales):
        v = x / scale
        if abs(v) < 1:
            continue
        digits = max(0, 2 - math.floor(math.log10(abs(v))))
        if round(abs(v), digits) >= 1000 and i > 0:  # 999.96K reads 1M
            suffix, v, digits = scales[i - 1][0], v / 1000, 2
        text = f"{v:,.{digits}f}"
        return (text.rstrip("0").rstrip(".") if "." in text else text) + suffix
    return f"{x:,.0f}"


def format_gb_s(bytes_s: float) -> str:
    """A rate in GB/s with three significant digits below 100 (``39.6 GB/s``, ``0.0152 GB/s``) and
    whole numbers above (``1,067 GB/s``): a small rate never reads 0."""
    v = bytes_s / 1e9
    if v == 0 or abs(v) >= 100:
        return f"{v:,.0f} GB/s"
    return f"{v:,.{max(0, 2 - math.floor(math.log10(abs(v))))}f} GB/s"
