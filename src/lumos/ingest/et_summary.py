"""A JSON-ready summary of a :class:`~lumos.ingest.pytorch_et.HostTrace` (used by ``lumos info``)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from lumos.ingest.et_comm import comm_kind
from lumos.ingest.pytorch_et import HostTrace

__all__ = ["process_groups", "summarize_et"]

_PG_INIT = "## process_group:init ##"


def process_groups(trace: HostTrace) -> list[dict[str, Any]]:
    """Process-group configs recorded by the ``## process_group:init ##`` node (newer ETs).

    Each entry is the observer's dict (``pg_name``, ``pg_desc``, ``backend_config``, ``ranks``,
    ``group_size``, ...); an empty list when the trace has no such node or it does not decode.
    """
    if _PG_INIT not in trace.names:
        return []
    idx = trace.names.index(_PG_INIT)
    out: list[dict[str, Any]] = []
    for i in np.flatnonzero(trace.name_idx == idx).tolist():
        for v in trace.inputs(i).values:
            if not isinstance(v, str):
                continue
            try:
                got = json.loads(v)
            except ValueError:
                continue
            out.extend(g for g in (got if isinstance(got, list) else [got]) if isinstance(g, dict))
    return out


def summarize_et(trace: HostTrace, top: int = 10) -> dict[str, Any]:
    """Facts about one ET, as plain JSON types (deterministic key and list order).

    Keys: ``kind`` ("pytorch_et"), ``path``, ``schema``, ``pid``, ``time``, ``num_nodes``,
    ``top_ops`` (the ``top`` most frequent op names, ``[{name, count}]``, ties by name),
    ``comm_nodes`` (node counts by name for record_param_comms / c10d / nccl / gloo nodes),
    ``collectives`` (per collective name: ``count`` and total ``in_size_bytes`` where known,
    ``wait`` excluded), ``pg_names``, ``process_groups``, ``threads`` (``[{tid, num_nodes}]``),
    ``rank`` / ``world_size`` (from ``distributedInfo``, else -1), ``diagnostics``. A linked
    host+device ET (``lumos link -o``, ``chakra_trace_link``) adds ``linked``: ``timed_nodes``
    (ops with Kineto timing) and ``gpu_nodes`` (its GPU nodes by category, not in ``num_nodes``).
    """
    counts = np.bincount(trace.name_idx, minlength=len(trace.names))
    order = sorted(range(len(trace.names)), key=lambda i: (-int(counts[i]), trace.names[i]))
    top_ops = [{"name": trace.names[i], "count": int(counts[i])} for i in order[:top]]
    comm_nodes = {
        trace.names[i]: int(counts[i])
        for i in sorted(range(len(trace.names)), key=lambda i: trace.names[i])
        if counts[i] and comm_kind(trace.names[i]) is not None
    }
    comm = trace.comm
    sizes = comm.in_size_bytes
    collectives: dict[str, dict[str, int]] = {}
    for row in range(len(comm)):
        name = comm.collective(row)
        if name == "wait":
            continue
        c = collectives.setdefault(name, {"count": 0, "in_size_bytes": 0})
        c["count"] += 1
        c["in_size_bytes"] += max(int(sizes[row]), 0)
    pg_names = sorted({comm.pg_name(r) for r in range(len(comm))} - {""})
    tids, per_tid = np.unique(trace.tid, return_counts=True)
    dist = trace.distributed_info or {}
    return {
        "kind": "pytorch_et",
        "path": trace.path,
        "schema": trace.schema,
        "pid": trace.pid,
        "time": trace.time,
        "rank": int(dist.get("rank", -1)),
        "world_size": int(dist.get("world_size", -1)),
        "num_nodes": trace.num_nodes,
        "top_ops": top_ops,
        "comm_nodes": comm_nodes,
        "collectives": dict(sorted(collectives.items())),
        "pg_names": pg_names,
        "process_groups": process_groups(trace),
        "threads": [
            {"tid": int(t), "num_nodes": int(c)} for t, c in zip(tids, per_tid, strict=True)
        ],
        "diagnostics": trace.diagnostics.to_dict(),
    } | _linked(trace)


def _linked(trace: HostTrace) -> dict[str, Any]:
    if not trace.device_nodes:
        return {}
    return {"linked": {"timed_nodes": trace.timed_nodes, "gpu_nodes": dict(trace.device_nodes)}}
