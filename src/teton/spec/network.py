"""The network part of a spec: which cost model prices the collectives, and its knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from teton.spec.fields import no_bool


class NetworkSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    fidelity: Literal["analytical", "flow"] = "analytical"
    routing: Literal["ecmp", "e-ecmp", "pinned", "adaptive"] = "e-ecmp"
    qps_per_connection: int = Field(default=16, gt=0)
    nvls: bool = True  # use NVLink SHARP for intra-host all-reduce where the GPU has it

    _ints_not_bools = field_validator("qps_per_connection", mode="before")(no_bool)
