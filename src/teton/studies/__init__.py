"""Studies: computations that re-enact published experiments on the model (network placement and
path pinning, :mod:`teton.studies.network`), used by ``teton validate`` and the CLI; their
figures are drawn by :mod:`teton.report`."""
