"""The pipeline schedule of one DP replica as a Chrome trace (``teton run --timeline``).

Chrome's trace-event format (chrome://tracing, ui.perfetto.dev): one thread per pipeline rank,
named by metadata events ("ph": "M"), and one complete event ("ph": "X") per forward / backward
pass of a chunk and micro-batch, its start and duration in microseconds.
"""

from __future__ import annotations


def chrome_trace(events: list[dict]) -> dict:
    """The trace document for the step's timeline ``events`` (``rank``, ``pass``, ``chunk``,
    ``microbatch``, ``start_s``, ``end_s``), ready for ``json.dumps``."""
    trace = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "pipeline (one DP replica)"}}]
    for r in sorted({e["rank"] for e in events}):
        trace.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"pp rank {r}"}})
    for e in events:
        trace.append({"name": f"{e['pass']} c{e['chunk']} mb{e['microbatch']}", "cat": e["pass"], "ph": "X",
                      "pid": 0, "tid": e["rank"], "ts": e["start_s"] * 1e6, "dur": (e["end_s"] - e["start_s"]) * 1e6,
                      "args": {"chunk": e["chunk"], "microbatch": e["microbatch"]}})
    return {"traceEvents": trace, "displayTimeUnit": "ms"}
