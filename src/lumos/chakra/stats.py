"""Summary numbers of a Chakra trace: node counts by type and collective, durations, edges,
critical path (``lumos chakra stats``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.chakra.deps import critical_path, resolve_deps
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import MISSING, ChakraTrace, exact_sum

__all__ = ["trace_stats"]


def trace_stats(trace: ChakraTrace) -> dict[str, Any]:
    """A JSON-ready dict of counts, durations (micros) and the critical-path length.

    The critical path is the longest chain of dependent nodes weighted by ``duration_micros``,
    over data and control deps; deps naming no node and nodes blocked by a cycle are left out.
    """
    types = trace.node_type.astype(np.int64)
    by_type: dict[str, int] = {}
    dur_by_type: dict[str, int] = {}
    for t in np.unique(types).tolist():
        label = NodeType(t).name if t in NodeType._value2member_map_ else f"UNKNOWN_{t}"
        mask = types == t
        by_type[label] = int(mask.sum())
        dur_by_type[label] = exact_sum(trace.duration_micros[mask])
    coll = types == NodeType.COMM_COLL_NODE
    kinds = trace.comm.comm_type[coll]
    by_coll: dict[str, int] = {}
    for k in np.unique(kinds).tolist():
        label = "none" if k == MISSING else (
            CollectiveCommType(k).name if k in CollectiveCommType._value2member_map_ else f"UNKNOWN_{k}")  # fmt: skip
        by_coll[label] = int((kinds == k).sum())
    g = resolve_deps(trace)
    cp_len, cp_rows = critical_path(trace, g)
    comm_size = trace.comm.comm_size
    return {
        "path": trace.path,
        "rank": trace.rank,
        "schema": trace.metadata.version or trace.metadata.get("schema"),
        "nodes": trace.num_nodes,
        "nodes_by_type": by_type,
        "collectives_by_comm_type": by_coll,
        "comm_bytes": exact_sum(comm_size[comm_size != MISSING]),
        "nodes_with_duration": int((trace.duration_micros > 0).sum()),
        "duration_micros_total": exact_sum(trace.duration_micros),
        "duration_micros_by_type": dur_by_type,
        "data_deps": int(trace.data_deps.shape[0]),
        "ctrl_deps": int(trace.ctrl_deps.shape[0]),
        "dangling_deps": int(g.dangling_data.shape[0] + g.dangling_ctrl.shape[0]),
        "critical_path_micros": cp_len,
        "critical_path_nodes": int(cp_rows.shape[0]),
        "distinct_names": len(trace.names),
        "attributes": int(trace.attr_off.shape[0]),
    }
