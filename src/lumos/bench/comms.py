"""Recorded collectives and transfers issued through ``torch.distributed``, without blocking.

:class:`CommRunner` maps each :class:`~lumos.bench.plan.CommCall` to the ``torch.distributed``
call of its kind on its group, with the tensors the trace recorded (so the recorded sizes):

==================  ==========================================================================
kind                call (``async_op=True``; the executor waits when a later item needs it)
==================  ==========================================================================
all_reduce          ``all_reduce`` of each tensor
broadcast, reduce   ``broadcast`` / ``reduce`` from / to the recorded root
all_gather          ``all_gather_into_tensor`` (one output buffer) or ``all_gather`` (a list)
reduce_scatter      ``reduce_scatter_tensor`` or ``reduce_scatter``
all_to_all          ``all_to_all_single`` with the recorded splits, or ``all_to_all``
gather, scatter     ``gather`` / ``scatter`` at the recorded root
barrier             ``barrier``
send, recv          ``isend`` / ``irecv`` with the recorded peer
==================  ==========================================================================

Ranks: a trace names global ranks of its own job; the run's processes are those ranks in order
(``run_ranks[i]`` runs as process ``i``). A group is every process of the run when the trace
names none (gloo traces record no group), else a group made once for its ranks. Roots and peers
are recorded within their group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lumos.bench.plan import CommCall

__all__ = ["CommRunner"]


class CommRunner:
    """Issues :class:`CommCall` s for one process of the run (see the module docstring).

    ``groups`` maps a recorded group (global ranks) to its process group, made by every
    process in the same order before the run (:meth:`make_groups`)."""

    def __init__(self, dist: Any, run_ranks: Sequence[int], index: int) -> None:
        self.dist = dist
        self.run_ranks = tuple(run_ranks)
        self.index = index
        self.position = {r: i for i, r in enumerate(self.run_ranks)}
        self.groups: dict[tuple[int, ...], Any] = {}

    def make_groups(self, groups: Sequence[tuple[int, ...]]) -> None:
        """Create the process groups of ``groups`` (every process calls this with the same
        list, in the same order; the whole run's group is the default one)."""
        for g in groups:
            if g in self.groups or len(g) == len(self.run_ranks):
                continue
            self.groups[g] = self.dist.new_group([self.position[r] for r in g])

    def _group(self, call: CommCall) -> Any:
        if call.group is None or len(call.group) == len(self.run_ranks):
            return None
        return self.groups[call.group]

    def _global(self, call: CommCall, local: int) -> int:
        """The process index of the group-local rank ``local``."""
        ranks = call.group if call.group is not None else self.run_ranks
        return self.position[ranks[local]]

    def check(self, call: CommCall) -> str:
        """Why ``call`` cannot be issued in this run ("" when it can)."""
        if call.group is not None and len(call.group) != len(self.run_ranks):
            if call.group not in self.groups:
                return "its group was not created in this run"
            if self.run_ranks[self.index] not in call.group:
                return "this rank is not in its group"
        size = len(call.group) if call.group is not None else len(self.run_ranks)
        for local in (call.root, call.peer):
            if local >= size:
                return "its root or peer is outside its group"
        if call.kind in ("send", "recv") and call.peer < 0:
            return "a transfer with no recorded peer"
        if call.kind in ("all_reduce", "broadcast", "reduce", "send") and not call.inputs:
            return "no tensor recorded"
        return ""

    def issue(self, call: CommCall, ins: list[Any], outs: list[Any]) -> list[Any]:
        """Issue ``call`` on ``ins``/``outs``; the unfinished works (empty when done)."""
        d = self.dist
        g = self._group(call)
        kind = call.kind
        works: list[Any] = []
        if kind == "all_reduce":
            works = [d.all_reduce(t, group=g, async_op=True) for t in ins or outs]
        elif kind == "broadcast":
            src = self._global(call, max(call.root, 0))
            works = [d.broadcast(t, src=src, group=g, async_op=True) for t in ins or outs]
        elif kind == "reduce":
            dst = self._global(call, max(call.root, 0))
            works = [d.reduce(t, dst=dst, group=g, async_op=True) for t in ins or outs]
        elif kind == "all_gather":
            if len(outs) == 1 and len(ins) == 1:
                works = [d.all_gather_into_tensor(outs[0], ins[0], group=g, async_op=True)]
            else:
                works = [d.all_gather(outs, ins[0], group=g, async_op=True)]
        elif kind == "reduce_scatter":
            if len(outs) == 1 and len(ins) == 1:
                works = [d.reduce_scatter_tensor(outs[0], ins[0], group=g, async_op=True)]
            else:
                works = [d.reduce_scatter(outs[0], ins, group=g, async_op=True)]
        elif kind == "all_to_all":
            if len(outs) == 1 and len(ins) == 1:
                works = [d.all_to_all_single(outs[0], ins[0], list(call.out_splits) or None,
                                             list(call.in_splits) or None, group=g,
                                             async_op=True)]  # fmt: skip
            else:
                works = [d.all_to_all(outs, ins, group=g, async_op=True)]
        elif kind == "gather":
            dst = self._global(call, max(call.root, 0))
            mine = dst == self.index
            works = [d.gather(ins[0], outs if mine else None, dst=dst, group=g, async_op=True)]
        elif kind == "scatter":
            src = self._global(call, max(call.root, 0))
            mine = src == self.index
            works = [d.scatter(outs[0], ins if mine else None, src=src, group=g, async_op=True)]
        elif kind == "barrier":
            works = [d.barrier(group=g, async_op=True)]
        elif kind == "send":
            works = [d.isend(t, dst=self._global(call, call.peer), group=g) for t in ins]
        elif kind == "recv":
            works = [d.irecv(t, src=self._global(call, call.peer), group=g) for t in outs]
        return [w for w in works if w is not None]
