"""A Chrome/Perfetto trace of a simple dependency-respecting schedule of a Chakra trace.

This is a sketch, not the simulator (``lumos.sim``): nodes are list-scheduled in topological
order (ties in file order); a node starts when every node it depends on (data and ctrl deps
that resolve) has ended and its processor is free, and lasts ``duration_micros``. There is one
processor per kind of work: ``CPU`` (nodes with ``is_cpu_op`` true), ``GPU compute`` (other
COMP nodes), ``GPU comm`` (COMM_* nodes) and ``memory`` (MEM_* nodes); each becomes a track.
Nodes blocked by a dependency cycle are left out and counted in the trace's metadata.
"""

from __future__ import annotations

import json
from typing import IO

import numpy as np

from lumos.chakra.deps import resolve_deps, topological_order
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import ChakraTrace
from lumos.graph._order import list_schedule

__all__ = ["PROCESSORS", "schedule", "write_timeline"]

PROCESSORS = ("CPU", "GPU compute", "GPU comm", "memory")


def _processor(trace: ChakraTrace) -> np.ndarray:
    t = trace.node_type
    proc = np.full(trace.num_nodes, 1, dtype=np.int64)
    proc[(t >= NodeType.COMM_SEND_NODE) & (t <= NodeType.COMM_COLL_NODE)] = 2
    proc[(t == NodeType.MEM_LOAD_NODE) | (t == NodeType.MEM_STORE_NODE)] = 3
    proc[(trace.comm.is_cpu_op == 1) & (t == NodeType.COMP_NODE)] = 0
    return proc


def schedule(trace: ChakraTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(start_us, end_us, processor)`` per node row; start is -1 for blocked nodes."""
    g = resolve_deps(trace)
    order, _ = topological_order(g)
    proc = _processor(trace)
    dur = trace.duration_micros.astype(np.int64)
    start, end = list_schedule(
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(g.pred_ptr, dtype=np.int64),
        np.ascontiguousarray(g.pred_idx, dtype=np.int64),
        dur,
        proc,
        len(PROCESSORS),
    )
    return start, end, proc


def write_timeline(trace: ChakraTrace, f: IO[str]) -> int:
    """Chrome trace JSON (``traceEvents``, ``ph: X``, microseconds) of :func:`schedule`;
    returns how many nodes were left out (blocked by a dependency cycle)."""
    start, end, proc = schedule(trace)
    pid = trace.rank or 0
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"rank {pid}"}}
    ]
    for k, name in enumerate(PROCESSORS):
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": k, "args": {"name": name}}
        )
    f.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
    f.write(",\n".join(json.dumps(e) for e in events))
    for i in np.argsort(start, kind="stable").tolist():
        if start[i] < 0:
            continue
        ev = {"ph": "X", "name": trace.name_of(i), "pid": pid, "tid": int(proc[i]),
              "ts": int(start[i]), "dur": int(end[i] - start[i]),
              "args": {"node_id": int(trace.node_id[i])}}  # fmt: skip
        f.write(",\n" + json.dumps(ev))
    blocked = int((start < 0).sum())
    f.write(
        f'\n], "otherData": {{"blocked_nodes": {blocked}, "makespan_us": {int(end.max(initial=0))}}}}}\n'
    )
    return blocked
