"""Dependencies of a :class:`ChakraTrace` as row indices: dangling ids, cycles, critical path.

Chakra nodes name their predecessors by id (``data_deps`` and ``ctrl_deps``, both enforced by
ASTRA-sim's feeder). :func:`resolve_deps` turns them into row indices once, marking ids that
name no node; the other functions work on the resulting :class:`DepGraph` (CSR, numpy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.chakra.trace import ChakraTrace, exact_sum
from lumos.errors import ChakraFormatError
from lumos.graph._order import longest_path, successor_csr
from lumos.graph.algorithms import kahn_order

__all__ = ["DepGraph", "critical_path", "resolve_deps", "topological_order"]


@dataclass(frozen=True)
class DepGraph:
    """Predecessor rows per node (data deps then ctrl deps, duplicates kept).

    ``pred_ptr``/``pred_idx``: CSR over node rows. ``dangling_*``: ``(node row, missing id)``
    pairs for deps that name no node. ``duplicate_ids``: ids held by more than one node (deps
    on them resolve to the first such row).
    """

    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    dangling_data: np.ndarray
    dangling_ctrl: np.ndarray
    duplicate_ids: np.ndarray

    @property
    def num_edges(self) -> int:
        """Resolved dependency edges."""
        return int(self.pred_idx.shape[0])


def _resolve(trace: ChakraTrace, ptr: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, ...]:
    owner = np.repeat(np.arange(trace.num_nodes, dtype=np.int64), np.diff(ptr))
    rows = trace.index_of(ids)
    ok = rows >= 0
    dangling = np.stack([owner[~ok], ids[~ok].astype(np.int64)], axis=1)
    return owner[ok], rows[ok], dangling


def resolve_deps(trace: ChakraTrace) -> DepGraph:
    """Resolve every dep id of ``trace`` to a row (self-dependencies are kept: they are cycles)."""
    d_own, d_rows, d_dang = _resolve(trace, trace.data_ptr, trace.data_deps)
    c_own, c_rows, c_dang = _resolve(trace, trace.ctrl_ptr, trace.ctrl_deps)
    owner = np.concatenate([d_own, c_own])
    preds = np.concatenate([d_rows, c_rows])
    order = np.argsort(owner, kind="stable")
    ptr = np.zeros(trace.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=trace.num_nodes), out=ptr[1:])
    uniq, counts = np.unique(trace.node_id, return_counts=True)
    return DepGraph(ptr, preds[order], d_dang, c_dang, uniq[counts > 1])


def topological_order(graph: DepGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(order, blocked)``: rows in dependency order, and rows that never become ready
    (on a cycle or downstream of one); ``blocked`` is empty for an acyclic trace."""
    n = graph.pred_ptr.shape[0] - 1
    succ_ptr, succ = successor_csr(
        n,
        np.ascontiguousarray(graph.pred_ptr, dtype=np.int64),
        np.ascontiguousarray(graph.pred_idx, dtype=np.int64),
    )
    # the graph package's Kahn (FIFO in row order: deterministic, close to the recorded order)
    no_processor_order = np.full(n, -1, dtype=np.int64)
    order = kahn_order(n, succ_ptr, np.arange(succ.size, dtype=np.int64), succ, no_processor_order)
    seen = np.zeros(n, dtype=bool)
    seen[order] = True
    return order, np.flatnonzero(~seen)


def find_cycle(graph: DepGraph, blocked: np.ndarray, limit: int = 12) -> list[int]:
    """Rows of one dependency cycle among ``blocked`` rows (from :func:`topological_order`),
    in dependency order, at most ``limit`` of them; empty when there is none. Walks from a
    blocked row to a blocked predecessor until a row repeats: every blocked row has one, since
    a row is blocked only by an unfinished predecessor."""
    if blocked.size == 0:
        return []
    is_blocked = np.zeros(graph.pred_ptr.shape[0] - 1, dtype=bool)
    is_blocked[blocked] = True
    seen: dict[int, int] = {}
    path: list[int] = []
    v = int(blocked[0])
    while v not in seen:
        seen[v] = len(path)
        path.append(v)
        preds = graph.pred_idx[graph.pred_ptr[v] : graph.pred_ptr[v + 1]]
        preds = preds[is_blocked[preds]]
        if preds.size == 0:
            return []
        v = int(preds[0])
    cycle = path[seen[v] :][::-1]
    return cycle[:limit]


def critical_path(trace: ChakraTrace, graph: DepGraph | None = None) -> tuple[int, np.ndarray]:
    """``(length in micros, rows on the path in order)``: the longest chain of dependent nodes
    weighted by ``duration_micros`` (nodes blocked by a cycle are left out)."""
    graph = graph or resolve_deps(trace)
    order, _ = topological_order(graph)
    if order.size == 0:
        return 0, np.zeros(0, dtype=np.int64)
    if exact_sum(trace.duration_micros) >= 2**63:  # each fits (the reader checks); their sum
        raise ChakraFormatError(  # might not, and int64 finish times would wrap
            trace.path, "durations add up to 2**63 us or more: no critical path in int64 micros"
        )
    dur = trace.duration_micros.astype(np.int64)
    finish, via = longest_path(
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(graph.pred_ptr, dtype=np.int64),
        np.ascontiguousarray(graph.pred_idx, dtype=np.int64),
        dur,
    )
    end = int(order[np.argmax(finish[order])])
    path = [end]
    while via[path[-1]] >= 0:
        path.append(int(via[path[-1]]))
    return int(finish[end]), np.array(path[::-1], dtype=np.int64)
