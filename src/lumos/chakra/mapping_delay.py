"""Edge delays as explicit Chakra nodes, for consumers that honour only ``data_deps``.

lumos edges carry a delay (CPU overhead between two ops on a thread, launch latency, ...):
the destination starts no earlier than ``source end + delay``. Chakra has no field for it, so
ASTRA-sim and other Chakra tools, which start a node as soon as its ``data_deps`` are done,
would replay every delay as 0 and under-predict step times. With ``to_chakra(graph,
delay_nodes=True)`` each dependency ``src -> dst`` whose delay is positive becomes
``src -> D -> dst``, where ``D`` is a synthetic COMP node:

==================  ==========================================================================
field               value
==================  ==========================================================================
id                  after every task (and the METADATA node), in dependency-pair order
name                ``delay:<kind>``, the edge kind (``delay:intra_thread``, ``delay:launch``)
duration_micros     the delay rounded to whole microseconds (like task durations)
data_deps           ``[src]``; ``dst`` lists ``D`` instead of ``src``
is_cpu_op           the destination's side (a CPU gap runs on the CPU, a stream gap on the GPU)
lumos_delay_ns      the exact delay (int64); its presence marks the node synthetic
lumos_synthetic     true
==================  ==========================================================================

Several edges between the same two tasks become one dependency whose delay is the largest
(the binding one). Negative delays (a successor recorded as starting inside its source) have
no node: a Chakra consumer waits for the whole source. :func:`lumos.chakra.mapping.from_chakra`
drops the delay nodes and reads the exact delays from the lumos edge table, so the round trip
is exact either way. When a tool edited the ``data_deps`` (they no longer match the edge
table), the edges are rebuilt from them with each delay node folded into its dependency and its
exact delay (``lumos_delay_ns``); the delay nodes' own dependencies are no task's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import DepKind, ExecGraph

__all__ = [
    "DELAY_ATTR",
    "delay_rows",
    "pair_delays",
    "resolve_delay_deps",
]

#: The attribute that marks a synthetic delay node (its value is the exact delay in ns).
DELAY_ATTR = "lumos_delay_ns"


def pair_delays(
    graph: ExecGraph, src: NDArray[np.int64], dst: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(delay_ns, kind)`` of each dependency pair: the largest delay among the graph's edges
    ``src -> dst`` and that edge's kind; 0 and -1 for pairs that are no edge (resolved waits)."""
    n = max(graph.num_tasks, 1)
    e = graph.edges
    delay = np.zeros(src.size, dtype=np.int64)
    kind = np.full(src.size, -1, dtype=np.int64)
    if not len(e) or not src.size:
        return delay, kind
    e_key = e.dst.astype(np.int64) * n + e.src.astype(np.int64)
    order = np.lexsort((e.delay_ns, e_key))  # per key, the largest delay last
    e_key, e_delay, e_kind = e_key[order], e.delay_ns[order], e.kind[order]
    last = np.r_[e_key[1:] != e_key[:-1], True]
    e_key, e_delay, e_kind = e_key[last], e_delay[last], e_kind[last]
    key = dst * n + src
    pos = np.minimum(np.searchsorted(e_key, key), e_key.size - 1)
    hit = e_key[pos] == key
    delay[hit] = e_delay[pos[hit]]
    kind[hit] = e_kind[pos[hit]]
    return delay, kind


def kind_names(kind: NDArray[np.int64]) -> list[str]:
    """``delay:<kind>`` node name of each edge kind."""
    return [f"delay:{DepKind(int(k)).name.lower()}" for k in kind]


def delay_rows(trace: Any) -> NDArray[np.bool_]:
    """Which nodes of a Chakra trace are synthetic delay nodes."""
    out = np.zeros(trace.num_nodes, dtype=bool)
    if DELAY_ATTR in trace.attr_names:
        rows = np.flatnonzero(trace.attr_name_idx == trace.attr_names.index(DELAY_ATTR))
        out[np.searchsorted(trace.attr_ptr, rows, side="right") - 1] = True
    return out


def resolve_delay_deps(
    trace: Any, is_delay: NDArray[np.bool_]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """``data_deps`` with every delay node id replaced by the id its delay node depends on
    (what the dependency was before :func:`to_chakra` inserted the node), and per entry the
    exact delay (``DELAY_ATTR``, ns) of the delay node it named: 0 where it named none or one
    that did not resolve (a delay node left with other than one dependency stays as it is)."""
    deps = trace.data_deps
    delay = np.zeros(deps.size, dtype=np.int64)
    if not is_delay.any() or not deps.size:  # no dependency: none names a delay node
        return deps, delay
    ids = trace.node_id[is_delay]
    first = trace.data_ptr[:-1][is_delay]
    has_one = np.diff(trace.data_ptr)[is_delay] == 1
    src = np.where(has_one, deps[np.minimum(first, deps.size - 1)], ids)
    ns = np.where(has_one, _delay_ns(trace)[is_delay], 0)
    order = np.argsort(ids)
    ids, src, ns = ids[order], src[order], ns[order]
    pos = np.minimum(np.searchsorted(ids, deps), ids.size - 1)
    hit = ids[pos] == deps
    return np.where(hit, src[pos], deps).astype(np.uint64), np.where(hit, ns[pos], delay)


def _delay_ns(trace: Any) -> NDArray[np.int64]:
    """``DELAY_ATTR`` of each node (0 where absent)."""
    out = np.zeros(trace.num_nodes, dtype=np.int64)
    if DELAY_ATTR in trace.attr_names:
        rows = np.flatnonzero(trace.attr_name_idx == trace.attr_names.index(DELAY_ATTR))
        out[np.searchsorted(trace.attr_ptr, rows, side="right") - 1] = trace.attr_int[rows]
    return out
