"""The NICs a data-parallel stream shares with an expert all-to-all that leaves the NVLink domain.

An MoE job whose EP groups span NVLink domains sends its dispatch and combine all-to-alls through
the same NICs as its gradient reduce-scatters and parameter all-gathers. The DP stream runs under
the compute (``job.overlap_dp_comm``), but while an all-to-all holds a NIC the stream gets only
what is left of it: NCCL collectives on different communicators share the link, and Megatron-Core
runs the all-to-all on a high-priority stream (``high_priority_a2a_comm_stream``), which sits on
the critical path while the DP stream does not. Taken as priority service, work-conserving: on a
rank whose all-to-alls hold its NIC a fraction rho of its busy time, the DP stream moves at
(1 - rho) of its rate, so each DP collective takes 1 / (1 - rho) of its alone time (rho capped at
:data:`MAX_A2A_SHARE`). The all-to-all keeps its own time. Without a cross-domain EP group, or
with DP groups inside one NVLink domain (NVLink, not NICs), nothing changes: dense jobs and MoE
jobs whose experts stay inside an NVLink domain price as before.

ASSUMPTION: the all-to-all's whole time is NIC time (a cross-domain all-to-all is bound by what
leaves the domain, ``network.analytical``); a pipeline's sends, far smaller, are not counted.
"""

from __future__ import annotations

import numpy as np

from teton.placement import Placement

MAX_A2A_SHARE = 0.9  # the DP stream keeps at least a tenth of the NIC


def crosses_domains(groups: np.ndarray, domain_gpus: int) -> bool:
    """Whether any group of ``groups`` (rows of GPU ids) spans more than one NVLink domain."""
    if groups.size == 0 or groups.shape[1] < 2:
        return False
    domains = np.asarray(groups) // domain_gpus
    return bool((domains != domains[:, :1]).any())


def a2a_nic_share(fwd_parts: dict, bwd_parts: dict) -> np.ndarray:
    """(p,) the share of each pipeline rank's busy time its all-to-alls take (category ``ep``:
    the dispatch and combine, hidden or not, over every category's time)."""
    a2a = (fwd_parts["ep"] + bwd_parts["ep"]).sum(axis=1)
    busy = sum((fwd_parts[k] + bwd_parts[k]).sum(axis=1) for k in fwd_parts)
    return np.clip(np.divide(a2a, busy, out=np.zeros_like(a2a), where=busy > 0), 0.0, MAX_A2A_SHARE)


def shared_dp_streams(ag_s: np.ndarray, rs_s: np.ndarray, fwd_parts: dict, bwd_parts: dict,
                      placement: Placement, domain_gpus: int, has_edp: bool) -> tuple[np.ndarray, np.ndarray]:
    """(all-gather, reduce) (p, v) DP stream seconds with the NIC the all-to-all leaves them
    (module docstring): each rank's times over (1 - rho) where its EP groups and its DP groups
    (dense ``dp_cp`` or the experts' ``edp_cp``) both cross NVLink domains; else unchanged."""
    if not (ag_s.any() or rs_s.any()) or not crosses_domains(placement.groups("ep"), domain_gpus):
        return ag_s, rs_s
    dp_groups = [placement.groups("dp_cp"), *([placement.groups("edp_cp")] if has_edp else [])]
    if not any(crosses_domains(g, domain_gpus) for g in dp_groups):
        return ag_s, rs_s
    stretch = 1.0 / (1.0 - a2a_nic_share(fwd_parts, bwd_parts))
    return ag_s * stretch[:, None], rs_s * stretch[:, None]
