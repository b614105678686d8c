"""Writer-scaling study: the same checkpoint written by 8 ... 16,384 writers.

Each point spreads the job's checkpoint bytes evenly over N writers, packed ``gpus_per_host``
per host, and runs :func:`teton.storage.transfer.transfer`. Delivered bandwidth grows with the
client hosts (FUSE per-host ceiling, frontend NICs) until it meets the storage limit (server
NICs or flash), then stays flat; ``tail_s`` is how long the slowest writers keep writing after
the shared stage stops running flat out (or after half the writers finished, where the stage never
ran flat out: ``Transfer.tail_s``), so delivered = bytes / time sits below the peak rate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from teton.atomic import save_figure
from teton.errors import SpecError
from teton.spec.cluster import ClusterSpec
from teton.spec.storage import StorageSystem
from teton.storage.transfer import transfer

# 8, 12, 16, 24, ... 12,288, 16,384
DEFAULT_WRITERS = tuple(sorted({2**k for k in range(3, 15)} | {3 * 2**k for k in range(2, 13)}))


@dataclass(frozen=True)
class ScalingPoint:
    writers: int
    hosts: int
    bytes_per_writer: float
    time_s: float
    delivered_bw_bytes_s: float
    bottleneck: str
    aggregate_s: float
    slowest_writer_s: float
    median_writer_s: float
    peak_rate_bytes_s: float  # aggregate rate while every writer is active
    tail_s: float  # the straggler tail (``teton.storage.transfer.Transfer.tail_s``)
    rate_bottleneck: str = ""  # what caps the peak rate (``teton.storage.transfer.Transfer``)


def writer_scaling(system: StorageSystem, cluster: ClusterSpec, total_bytes: float,
                   writers: tuple[int, ...] = DEFAULT_WRITERS, seed: int = 0,
                   storage_share: float = 1.0) -> list[ScalingPoint]:
    """Delivered write bandwidth of ``total_bytes`` spread over each writer count, on the share
    ``storage_share`` of the storage servers other jobs leave (``teton.storage.transfer``)."""
    g = cluster.gpus_per_host
    out = []
    for n in writers:
        if n <= 0:
            raise SpecError("writer_counts", n, "must be > 0")
        if n > cluster.gpus:
            raise SpecError("writer_counts", n, f"cluster {cluster.name} has only {cluster.gpus} GPUs")
        hosts = np.arange(n) // g
        t = transfer(system, cluster, np.full(n, total_bytes / n), hosts, "write", extra_files=1, seed=seed,
                     storage_share=storage_share)
        out.append(ScalingPoint(n, t.hosts, total_bytes / n, t.time_s, t.delivered_bw_bytes_s, t.bottleneck,
                                t.aggregate_s, t.slowest_writer_s, t.median_writer_s, t.peak_rate_bytes_s,
                                t.tail_s, t.rate_bottleneck))
    return out


def scaling_rows(points: list[ScalingPoint]) -> list[dict]:
    return [asdict(p) for p in points]


def plot_scaling(points: list[ScalingPoint], storage_limit_bytes_s: float, path: str | Path, title: str) -> Path:
    """PNG (or SVG/PDF by suffix) of delivered bandwidth vs writers, with the storage limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    w = [p.writers for p in points]
    ax.plot(w, [p.peak_rate_bytes_s / 1e12 for p in points], "s-", label="aggregate rate, all writers active")
    ax.plot(w, [p.delivered_bw_bytes_s / 1e12 for p in points], "o-", label="delivered = bytes / time (with tail)")
    ax.axhline(storage_limit_bytes_s / 1e12, color="red", ls="--", label="storage peak write (model)")
    last = None
    for p in points:  # label where the bottleneck changes
        if p.rate_bottleneck != last:
            ax.annotate(p.rate_bottleneck, (p.writers, p.peak_rate_bytes_s / 1e12), fontsize=7,
                        textcoords="offset points", xytext=(-4, 8), ha="right")
            last = p.rate_bottleneck
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("writers (GPUs, 8 per host)")
    ax.set_ylabel("TB/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    try:
        save_figure(fig, path, dpi=120)
    except OSError as err:
        raise SpecError("figure_path", str(path), f"cannot write ({err.strerror})") from None
    finally:
        plt.close(fig)
    return path
