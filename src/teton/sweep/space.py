"""The space a layout search covers (``teton search``, ``teton plan``): the degrees and memory
savers to try, the EP degrees of an MoE model, its expert TP degrees and rank orders, and each
candidate's pipeline schedule. ``teton.sweep.candidates`` enumerates it; ``teton.sweep.search``
simulates and ranks it."""

from __future__ import annotations

from dataclasses import dataclass

from teton.errors import SpecError
from teton.spec.layout import BASE_AXES, MOE_ORDER, with_ep
from teton.spec.schema import Spec

TP_CHOICES = (1, 2, 4, 8, 16)
CP_CHOICES = (1, 2, 4, 8, 16, 32)
PP_CHOICES = (1, 2, 4, 8, 16, 32, 64)
V_CHOICES = (1, 2, 4, 8)
MICRO_BATCH_CHOICES = (1, 2, 4)
# selective_layer at the job's recompute_interval (torchtitan's default N = 2 unless the job sets it);
# selective_op is skipped where the job rules refuse it (MoE, biases, fp8)
RECOMPUTE_CHOICES = ("none", "selective", "full", "selective_op", "selective_layer")
ZERO_CHOICES = (1, 2, 3)
EP_CHOICES = None  # every divisor of model.experts (ep 1 alone for a dense model)
ETP_CHOICES = None  # 1 and tp (MoE models; a dense model has no expert TP)
ORDER_CHOICES = (MOE_ORDER, with_ep(BASE_AXES))  # an MoE model's orders besides its own: Megatron-Core's, Llama 3's
REFINE_TOP = 32  # an MoE search's best layouts whose EP, then expert TP and rank order, are refined
# job.cp_algo: a CP layout's algorithms a search can try (a2a+p2p: its all-to-alls in the NVLink domain)
CP_ALGOS = ("all_gather", "ring", "a2a", "a2a+p2p")


@dataclass(frozen=True)
class SearchSpace:
    tp: tuple[int, ...] = TP_CHOICES
    cp: tuple[int, ...] = CP_CHOICES
    pp: tuple[int, ...] = PP_CHOICES
    virtual_stages: tuple[int, ...] = V_CHOICES
    micro_batch: tuple[int, ...] = MICRO_BATCH_CHOICES
    recompute: tuple[str, ...] = RECOMPUTE_CHOICES
    zero: tuple[int, ...] = ZERO_CHOICES
    ep: tuple[int, ...] | None = EP_CHOICES
    etp: tuple[int, ...] | None = ETP_CHOICES
    cp_algo: tuple[str, ...] | None = None  # a CP layout's algorithms (job.cp_algo); None: the job's own
    refine_top: int | None = REFINE_TOP  # MoE: staged search (teton.sweep.search); None: exhaustive
    prune: bool = True  # leave out dominated layouts (teton.sweep.candidates); False: exhaustive

    def __post_init__(self) -> None:
        """Every degree a tuple of positive integers, as ``search_space`` builds them: a string or
        a float there would fail deep in the search."""
        for name in ("tp", "cp", "pp", "virtual_stages", "micro_batch", "zero", "ep", "etp"):
            values = getattr(self, name)
            if values is None and name in ("ep", "etp"):
                continue
            if not (isinstance(values, (tuple, list)) and values
                    and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)):
                raise SpecError(name, values, "a non-empty tuple of positive integers (search_space() parses "
                                "'4,8' strings)")
            object.__setattr__(self, name, tuple(values))


def _degrees(text: str | None, field: str, default: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if text is None:
        return default
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or any(x <= 0 for x in values):
        raise SpecError(field, text, "expected a comma-separated list of positive integers")
    return values


def _cp_algos(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    values = tuple(dict.fromkeys(x.strip() for x in str(text).split(",") if x.strip()))
    if not values or any(v not in CP_ALGOS for v in values):
        raise SpecError("cp_algo", text, f"expected a comma-separated list of {', '.join(CP_ALGOS)}")
    return values


def search_space(tp: str | None = None, cp: str | None = None, pp: str | None = None,
                 virtual_stages: str | None = None, ep: str | None = None, etp: str | None = None,
                 exhaustive: bool = False, cp_algo: str | None = None) -> SearchSpace:
    """The space of ``--tp 4,8 --cp ... --pp ... --virtual-stages ... --ep ... --etp ... --cp-algo
    ring,a2a`` (None: every choice, the job's own CP algorithm; ``--exhaustive``: no staged MoE
    search, no dominance pruning)."""
    return SearchSpace(tp=_degrees(tp, "tp", TP_CHOICES), cp=_degrees(cp, "cp", CP_CHOICES),
                       pp=_degrees(pp, "pp", PP_CHOICES),
                       virtual_stages=_degrees(virtual_stages, "virtual_stages", V_CHOICES),
                       ep=_degrees(ep, "ep", None), etp=_degrees(etp, "etp", None), cp_algo=_cp_algos(cp_algo),
                       refine_top=None if exhaustive else REFINE_TOP, prune=not exhaustive)


def ep_degrees(spec: Spec, space: SearchSpace) -> tuple[int, ...]:
    """The EP degrees to search: ``space.ep``, or every divisor of the MoE model's experts.
    A dense model has ep 1 only; another degree, or any expert TP degree, asked of it is a
    SpecError."""
    experts = spec.model.experts
    if experts == 1 and space.etp is not None:
        raise SpecError("etp", ",".join(map(str, space.etp)),
                        f"expert tensor parallelism needs a MoE model (model.experts > 1); {spec.model.name} is dense")
    if space.ep is None:
        return tuple(d for d in range(1, experts + 1) if experts % d == 0)
    if experts == 1 and set(space.ep) != {1}:
        raise SpecError("ep", ",".join(map(str, space.ep)),
                        f"expert parallelism needs a MoE model (model.experts > 1); {spec.model.name} is dense")
    return space.ep


def expert_choices(spec: Spec, space: SearchSpace, tp: int, pp: int, dp: int,
                   eps: tuple[int, ...] | None = None) -> list[dict]:
    """The job updates of the expert TP degrees and rank orders to try at one tp, pp, dp: none for
    a dense model; for an MoE model ``space.etp`` (default 1 and tp; etp = tp is left unset) times
    the job's own order, Megatron-Core's and Llama 3's (one order where pp or dp is 1: they all
    give the same groups). ``eps``: each of these at every one of those EP degrees, the largest
    first (a staged search's first pass, ``teton.sweep.candidates``)."""
    if spec.model.experts == 1:
        choices = [{"etp": None}] if spec.job.etp is not None else [{}]  # a dense job's etp can only be its tp
    else:
        own = with_ep(spec.job.layout.order)
        orders = list(dict.fromkeys((own, *ORDER_CHOICES))) if pp > 1 and dp > 1 else [own]
        etps = dict.fromkeys(space.etp or (1, tp))
        choices = [{"etp": None if etp == tp else etp, "parallel_order": order} for etp in etps for order in orders]
    return choices if eps is None else [{"ep": ep, **c} for ep in sorted(eps, reverse=True) for c in choices]


def schedule_of(job, pp: int, v: int) -> str:
    """A candidate's pipeline schedule: interleaved with virtual stages; DualPipe for a pipelined
    layout without them when the spec's job runs DualPipe (layouts it cannot run, an odd ``pp``,
    ZeRO-3 or too few micro-batches, fail the job rules and drop out); else 1F1B."""
    if v > 1:
        return "interleaved"
    return "dualpipe" if job.pp_schedule == "dualpipe" and pp > 1 else "1f1b"
