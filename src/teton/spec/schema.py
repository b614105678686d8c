"""The whole resolved spec: cluster, model, job, network and the optional sections."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from teton.spec.cluster import ClusterSpec
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.spec.network import NetworkSpec
from teton.spec.plan import PlanSpec
from teton.spec.reliability import ReliabilitySpec
from teton.spec.storage import StorageSection


class Spec(BaseModel):
    """A resolved spec: every preset expanded, every cross-field rule checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: ClusterSpec
    model: ModelSpec
    job: JobSpec
    network: NetworkSpec = NetworkSpec()
    # The storage and reliability sections, validated when the spec loads (``teton.spec.storage``,
    # ``teton.spec.reliability``); None where the spec gives none.
    storage: StorageSection | None = None
    reliability: ReliabilitySpec | None = None
    plan: PlanSpec | None = None  # what `teton plan` chooses between (teton.spec.plan)
    seed: int = 0
    notes: tuple[str, ...] = ()
    # the job fields the loaded file and its --set overrides did not give (``job.<field>``, schema
    # order): they took their defaults (``job.dp``: derived from gpus / (tp cp pp)). Set by
    # ``load_spec`` (``job_defaults``); a Spec built otherwise, or a search's candidate, keeps ()
    # or the loaded job's.
    job_defaults: tuple[str, ...] = ()

    @property
    def routing(self) -> str:
        """How the flow model routes: ``network.routing`` where given, else the fabric's own
        (``cluster.routing``)."""
        return self.network.routing or self.cluster.routing

    @property
    def software(self):
        """The software stack (``teton.spec.software.SoftwareSpec``), which the job carries."""
        return self.job.software
