"""The ``plan:`` section of a spec: what ``teton plan`` chooses between.

``teton plan SPEC --tokens 15.6T`` asks how many GPUs, which layout and how much storage train the
spec's model on that many tokens, how long it takes and what it costs. The section names the
candidates; command-line options override it::

    plan:
      clusters: [meta-roce-24k, {base: meta-roce-24k, gpu: b200, name: roce-b200}]
      gpus: 8192:24576:4096        # or a list, or lo:hi (five sizes spaced geometrically)
      storage_servers: 60:7500
      tokens: 15.6T
      deadline_days: 90
      global_batch: fixed          # the spec's batch at every size | per_gpu | 16M (tokens)

Counts (``gpus``, ``storage_servers``) are a list (``8192,16384``), a linear range with a step
(``4096:24576:2048``), or ``lo:hi``: five counts spaced geometrically from lo to hi.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from teton.errors import SpecError
from teton.spec.fields import MAX_GPUS, Section
from teton.units import parse_count

GEOMETRIC_POINTS = 5
MAX_COUNTS = 1000  # counts one list or range may give (each is a plan or a sweep row to evaluate)
BATCH_RULES = ("fixed", "per_gpu")


def parse_counts(value: Any, field: str, geometric_multiple: int = 1) -> tuple[int, ...]:
    """Positive integer counts from ``8,16``, ``lo:hi:step``, ``lo:hi`` or a list; ``lo:hi`` gives
    :data:`GEOMETRIC_POINTS` counts spaced geometrically, rounded to ``geometric_multiple``."""
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        text = str(value).strip().replace("_", "")
        if ":" in text:
            return _range(text, field, geometric_multiple)
        items = [x for x in text.split(",") if x.strip()]
    try:
        counts = tuple(int(str(x).strip()) for x in items)
    except ValueError:
        counts = ()
    if not counts or any(c <= 0 for c in counts):
        raise SpecError(field, value, "expected positive integers: 8192,16384, lo:hi:step or lo:hi")
    _check_counts(field, value, max(counts), len(counts))
    return tuple(sorted(set(counts)))


def _check_counts(field: str, value: Any, largest: int, n: int) -> None:
    if largest > MAX_GPUS:
        raise SpecError(field, value, f"each count at most {MAX_GPUS:,}")
    if n > MAX_COUNTS:
        raise SpecError(field, value, f"at most {MAX_COUNTS:,} counts (gives {n:,})")


def _range(text: str, field: str, multiple: int) -> tuple[int, ...]:
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(re.fullmatch(r"\d+", p.strip()) for p in parts):
        raise SpecError(field, text, "expected lo:hi:step or lo:hi with positive integers")
    if any(len(p.strip()) > 12 for p in parts):  # past MAX_GPUS; and int() of 5,000 digits fails
        raise SpecError(field, text, f"each count at most {MAX_GPUS:,}")
    lo, hi = int(parts[0]), int(parts[1])
    if lo <= 0 or hi < lo:
        raise SpecError(field, text, "needs 0 < lo <= hi")
    if len(parts) == 3:
        step = int(parts[2])
        if step <= 0:
            raise SpecError(field, text, "the step must be positive")
        _check_counts(field, text, hi, (hi - lo) // step + 1)
        return tuple(range(lo, hi + 1, step))
    _check_counts(field, text, hi, 1)
    if lo == hi:
        return (lo,)
    ratio = (hi / lo) ** (1.0 / (GEOMETRIC_POINTS - 1))
    counts = {max(multiple, round(lo * ratio**i / multiple) * multiple) for i in range(GEOMETRIC_POINTS)}
    return tuple(sorted(counts | {lo, hi}))


class PlanSpec(Section):
    """Candidates and targets of a plan (every field optional; ``teton plan``'s options win)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # cluster presets, cluster files or cluster mappings (base: + overrides); default: the spec's
    clusters: tuple[str | dict[str, Any], ...] = ()
    gpus: str | int | tuple[int, ...] | None = None
    storage: str | None = None  # storage preset; default: the spec's, else the cluster's
    storage_servers: str | int | tuple[int, ...] | None = None  # default: the preset's server count
    tokens: float | str | None = None
    deadline_days: float | None = Field(default=None, gt=0)
    budget_usd: float | None = Field(default=None, gt=0)
    global_batch: str = "fixed"
    # Price of a GPU-hour by GPU name, for GPUs the spec's reliability section does not price.
    usd_per_gpu_hour: dict[str, float] = Field(default_factory=dict)
    # Assumption: the order of object-storage list prices (S3 Standard ~$23 per TB-month, AWS 2024),
    # per usable TB of the storage system; set your own.
    usd_per_tb_month: float = Field(default=20.0, ge=0)
    # How the run pays for storage (teton.storage.usage): share = the share of a shared system it
    # uses (capacity, flash write budget or bandwidth, whichever is largest: how Tectonic-style
    # storage is used); dedicated = a system of its own, sized to the run (or storage_servers), paid in full
    storage_pricing: Literal["share", "dedicated"] = "share"
    # what breaks a tie: plans within the best plan's band (p10-p90) on the figure the choice ranks
    # by (cost under a deadline, days under a budget) are a tie, and this preference picks among them
    prefer: Literal["fewer_gpus", "cheaper", "faster"] = "fewer_gpus"
    top_layouts: int = Field(default=3, ge=1, le=50)

    @field_validator("gpus", "storage_servers")
    @classmethod
    def _counts(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None:  # checked here, where the value is the file's (the CLI's options name their flag)
            parse_counts(v, f"plan.{info.field_name}")
        return v

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v: Any) -> Any:
        if v is not None:
            parse_count(v, "plan.tokens")
        return v

    @field_validator("global_batch", mode="before")
    @classmethod
    def _batch(cls, v: Any) -> Any:
        text = str(v).strip().replace("-", "_")
        if text in BATCH_RULES:
            return text
        tokens = parse_count(v, "plan.global_batch")
        if not math.isfinite(tokens) or tokens < 1:
            raise SpecError("plan.global_batch", v, "fixed, per_gpu or a token count like 16M")
        return str(int(tokens))

    @field_validator("usd_per_gpu_hour")
    @classmethod
    def _prices(cls, v: dict[str, float]) -> dict[str, float]:
        for name, price in v.items():
            if not (isinstance(price, (int, float)) and math.isfinite(price) and price >= 0):
                raise SpecError(f"plan.usd_per_gpu_hour.{name}", price, "must be a non-negative number")
        return v
