"""Network study figures: the placement study (:func:`teton.studies.network.placement_study`) as
a strip plot on Meta's 0-100 normalised-bandwidth scale."""

from __future__ import annotations

import numpy as np

from teton.atomic import save_figure


def plot_placement_study(result: dict, path: str) -> None:
    """Strip plot of normalised bus bandwidth per series (0-100 scale, as Meta's figure); PNG/SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["normalized_busbw"])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rng = np.random.default_rng(0)
    for i, name in enumerate(names):
        v = 100 * np.asarray(result["normalized_busbw"][name])
        ax.scatter(i + rng.uniform(-0.15, 0.15, v.size), v, s=18, alpha=0.7)
        ax.hlines(np.median(v), i - 0.3, i + 0.3, color="k", lw=1)
    ax.axhline(90, color="grey", ls="--", lw=0.8)
    ax.set_xticks(range(len(names)), [n.replace(", ", "\n") for n in names], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("normalised AllGather bus bandwidth (0-100)")
    ax.set_title(f"{result['op']} on {result['cluster']}: {len(result['job_gpus'])} random jobs "
                 f"({min(result['job_gpus'])}-{max(result['job_gpus'])} GPUs)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
