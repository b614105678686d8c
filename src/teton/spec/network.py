"""The network part of a spec: which cost model prices the collectives, and its knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from teton.spec.fields import Section


class NetworkSpec(Section):
    model_config = ConfigDict(frozen=True, extra="forbid")

    fidelity: Literal["analytical", "flow"] = "analytical"
    routing: Literal["ecmp", "e-ecmp", "pinned", "adaptive"] = "e-ecmp"
    qps_per_connection: int = Field(default=16, gt=0, le=1024)
    nvls: bool = True  # use NVLink SHARP for intra-host all-reduce where the GPU has it
