"""A dependency feeder for Python simulators, with the semantics of ASTRA-sim's ``ETFeeder``.

A node is *issuable* once every node it depends on has completed; both ``data_deps`` and
``ctrl_deps`` are enforced (either can be switched off, as the upstream feeder's flags allow).
Issuable nodes come out in ascending node id, like upstream's priority queue. A dependency on an
id that no node has is a :class:`~lumos.errors.GraphError` naming both ids, raised when the
feeder is built, not half-way through a simulation.

Loading is lazy: the feeder works on the columns of a :class:`ChakraTrace` (for a plain file,
a memory map) and hands out :class:`~lumos.chakra.view.NodeView` objects, views that read
those columns on access.

>>> from lumos.chakra import NodeType
>>> from lumos.chakra.builder import ChakraTraceBuilder
>>> b = ChakraTraceBuilder(version="0.0.4")
>>> b.add_node(1, "a", NodeType.COMP_NODE); b.add_node(2, "b", NodeType.COMP_NODE, data_deps=[1])
>>> f = ChakraFeeder(b.build())
>>> [n.id for n in f.issuable()]
[1]
>>> f.issue(1); _ = f.complete(1); [n.id for n in f.issuable()]
[2]
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator

import numpy as np

from lumos.chakra.io import read_chakra
from lumos.chakra.trace import ChakraTrace
from lumos.chakra.view import NodeView
from lumos.errors import GraphError, InputError

__all__ = ["ChakraFeeder"]

_PENDING, _READY, _ISSUED, _DONE = 0, 1, 2, 3


class ChakraFeeder:
    """Hands out dependency-free nodes of one rank's trace; see the module docstring."""

    def __init__(
        self,
        source: ChakraTrace | str | os.PathLike[str],
        *,
        use_data_deps: bool = True,
        use_ctrl_deps: bool = True,
    ) -> None:
        trace = source if isinstance(source, ChakraTrace) else read_chakra(source)
        if not isinstance(trace, ChakraTrace):
            raise InputError(str(source), "the feeder takes one rank's file, not a directory")
        self.trace = trace
        n = trace.num_nodes
        uniq, counts = np.unique(trace.node_id, return_counts=True)
        if (counts > 1).any():
            raise GraphError(
                f"{trace.path or 'trace'}: node id {int(uniq[counts > 1][0])} is used by several nodes"
            )
        owners, preds = [], []
        for use, ptr, deps, label in ((use_data_deps, trace.data_ptr, trace.data_deps, "data_deps"),
                                      (use_ctrl_deps, trace.ctrl_ptr, trace.ctrl_deps, "ctrl_deps")):  # fmt: skip
            if not use:
                continue
            owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
            rows = trace.index_of(deps)
            if (rows < 0).any():
                k = int(np.flatnonzero(rows < 0)[0])
                raise GraphError(
                    f"{trace.path or 'trace'}: node id {int(trace.node_id[owner[k]])} has {label} "
                    f"on id {int(deps[k])}, which no node has ({int((rows < 0).sum())} such deps; "
                    "`lumos chakra validate --fix` drops them)"
                )
            owners.append(owner)
            preds.append(rows)
        owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        pred = np.concatenate(preds) if preds else np.zeros(0, np.int64)
        self._indeg = np.bincount(owner, minlength=n).astype(np.int64)
        order = np.argsort(pred, kind="stable")
        self._succ = owner[order]
        self._succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(pred, minlength=n), out=self._succ_ptr[1:])
        self._state = np.zeros(n, dtype=np.int8)
        self._heap: list[tuple[int, int]] = []
        for row in np.flatnonzero(self._indeg == 0).tolist():
            self._push(row)
        self._done = 0

    def _push(self, row: int) -> None:
        self._state[row] = _READY
        heapq.heappush(self._heap, (int(self.trace.node_id[row]), row))

    def _row(self, node_id: int) -> int:
        row = int(self.trace.index_of([node_id])[0])
        if row < 0:
            raise GraphError(f"{self.trace.path or 'trace'}: no node with id {node_id}")
        return row

    # ---- the ASTRA-sim feeder surface -------------------------------------------------------
    def has_nodes_to_issue(self) -> bool:
        """True while some node is issuable."""
        return bool(self._heap)

    def next_issuable(self) -> NodeView | None:
        """The issuable node with the smallest id, now marked issued; None when none is ready."""
        if not self._heap:
            return None
        _, row = heapq.heappop(self._heap)
        self._state[row] = _ISSUED
        return self.trace.node(row)

    def issuable(self) -> list[NodeView]:
        """Every node issuable now, in id order, without issuing them."""
        return [self.trace.node(row) for _, row in sorted(self._heap)]

    def issue(self, node_id: int) -> None:
        """Mark an issuable node as issued (``next_issuable`` does this itself)."""
        row = self._row(node_id)
        if self._state[row] != _READY:
            raise GraphError(
                f"node id {node_id} is not issuable (its dependencies are not complete)"
            )
        self._heap.remove((int(node_id), row))
        heapq.heapify(self._heap)
        self._state[row] = _ISSUED

    def complete(self, node_id: int) -> list[int]:
        """Mark an issued node complete; returns the ids of the nodes this made issuable."""
        row = self._row(node_id)
        if self._state[row] != _ISSUED:
            raise GraphError(f"node id {node_id} completed without being issued")
        self._state[row] = _DONE
        self._done += 1
        freed = []
        for s in self._succ[self._succ_ptr[row] : self._succ_ptr[row + 1]].tolist():
            self._indeg[s] -= 1
            if self._indeg[s] == 0:
                self._push(s)
                freed.append(int(self.trace.node_id[s]))
        return freed

    def lookup(self, node_id: int) -> NodeView:
        """The node with ``node_id`` (materialized on request)."""
        return self.trace.node(self._row(node_id))

    @property
    def finished(self) -> bool:
        """True once every node has completed."""
        return self._done == self.trace.num_nodes

    @property
    def deadlocked(self) -> bool:
        """True when nothing is issuable or issued but nodes remain (a dependency cycle)."""
        return not self._heap and not (self._state == _ISSUED).any() and not self.finished

    def run_in_order(self) -> Iterator[NodeView]:
        """Issue and complete nodes one at a time in a valid order (a smoke test of a trace);
        raises :class:`GraphError` when a cycle blocks the rest."""
        while self._heap:
            node = self.next_issuable()
            assert node is not None
            yield node
            self.complete(node.id)
        if not self.finished:
            left = self.trace.num_nodes - self._done
            raise GraphError(
                f"{self.trace.path or 'trace'}: {left} nodes never become issuable (dependency cycle)"
            )
