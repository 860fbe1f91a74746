"""Per-rank summaries of a replay, computed once for ranks that share structure and times.

:func:`rank_summaries` is ``[replay_summary(result, gi, recorded=...) for gi ...]``
(:func:`lumos.report.metrics.replay_summary`), with the work shared: a rank's summary but its
critical path depends on its graph's tables, its recorded tables, its simulated times and its
diagnostics, so ranks whose graphs hold the *same* table objects (re-stamped builds of one
trace, :mod:`lumos.shared_builds`) and were simulated to equal times get a copy of the first
one's, with their own rank and critical path (which may cross into other ranks, so it is
walked for each).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from lumos.graph.model import ExecGraph
from lumos.report.metrics import critical_path_summary, replay_summary
from lumos.sim.result import SimResult

__all__ = ["rank_summaries"]


def _key(result: SimResult, gi: int, recorded: ExecGraph) -> tuple[Any, ...]:
    """What a summary but its rank and critical path depends on: table identities (the build
    shares them only between re-stamped copies), the simulated times, the diagnostics."""
    g = result.graphs[gi]
    h = hashlib.sha256()
    # edges by content: aligning ranks to one clock gives each its own (equal) delays
    for col in (result.starts(gi), result.ends(gi),
                *(getattr(g.edges, c) for c in type(g.edges)._COLUMNS)):  # fmt: skip
        h.update(np.ascontiguousarray(col).data)
    tables = (g.names, g.tasks, g.processors, g.waits, g.annotations, recorded.tasks,
              recorded.annotations, recorded.processors)  # fmt: skip
    return (
        *(id(x) for x in tables),
        id(g.memory),
        id(recorded.memory),
        h.digest(),
        tuple(sorted(g.calibration.items())),
        repr(g.diagnostics.to_dict()),
    )


def rank_summaries(result: SimResult, recorded: Sequence[ExecGraph]) -> tuple[dict[str, Any], ...]:
    """One :func:`~lumos.report.metrics.replay_summary` per graph of ``result``;
    ``recorded[gi]`` is graph ``gi`` as built from its trace."""
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for gi, rec in enumerate(recorded):
        key = _key(result, gi, rec)
        done = first.get(key)
        if done is None:
            first[key] = summary = replay_summary(result, gi, recorded=rec)
        else:
            summary = pickle.loads(pickle.dumps(done))  # a deep copy, at C speed
            summary.update(rank=result.graphs[gi].rank, **critical_path_summary(result, gi))
        out.append(summary)
    return tuple(out)
