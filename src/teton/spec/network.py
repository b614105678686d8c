"""The network part of a spec: which cost model prices the collectives, and its knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from teton.spec.fields import Section, read_when

FLOW_ONLY = read_when(fidelity=("flow",))  # the analytical model prices no paths and no QPs


class NetworkSpec(Section):
    """Which cost model prices the collectives, and its knobs. A field that the chosen fidelity
    does not read says so (``read_when``): given under another, the spec gets a note naming it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fidelity: Literal["analytical", "flow"] = "analytical"
    # None: the fabric's own (``cluster.routing``: e-ecmp on RoCE presets, adaptive on InfiniBand)
    routing: Literal["ecmp", "e-ecmp", "pinned", "adaptive"] | None = Field(default=None, json_schema_extra=FLOW_ONLY)
    qps_per_connection: int = Field(default=16, gt=0, le=1024, json_schema_extra=FLOW_ONLY)
    nvls: bool = True  # use NVLink SHARP for intra-host all-reduce where the GPU has it (both fidelities)
