"""Event-driven execution of a :class:`~.program.Program` on one GPU: the ground truth.

Semantics (true time, integer ns; the window opens at 0):

- A thread runs its nodes in order, one at a time. Threads advance in global time order
  (ties: thread index), so every enqueue, record and sync sees exactly the GPU work that
  calls starting earlier have enqueued.
- A stream runs its activities one at a time, in enqueue order. Its *tail* is the end of its
  last enqueued activity, or the latest event it was told to wait for if that is later.
- Enqueuing calls (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ``cudaMemsetAsync``): the call
  lasts ``cost_ns``; the activity starts at ``max(call start + latency_ns, stream tail)`` and
  lasts :func:`~.program.work_duration`.
- ``cudaEventRecord(ev, s)``: the event completes at the tail of ``s`` at the call's start;
  ``cudaStreamWaitEvent(s, ev)``: later work on ``s`` starts no earlier than the event (an
  event never recorded is complete). Both last ``cost_ns`` and never block.
- Blocking calls last ``max(cost_ns, wait end + reaction_ns - start)``: ``cudaStreamSynchronize``
  waits for the stream's tail, ``cudaDeviceSynchronize`` for every stream's tail (both as of
  the call's start), ``cudaMemcpy`` enqueues its copy like ``cudaMemcpyAsync`` and waits for it.
- :class:`~.program.Wait` / :class:`~.program.Poll` resume at ``max(now, t + reaction_ns)``
  where ``t`` is the signal's time or the tagged activity's end.
- Backlog activities (launched before the window) are ready at 0 on their streams.

Scales (``Scales``): ``kernel`` multiplies non-NCCL kernel durations (backlog included),
``nccl`` the transfer part of NCCL kernels, ``cpu`` the CPU cost of CPU-only ops: the
``pre_ns``/``post_ns`` of every :class:`~.program.Op` whose subtree has no call and no
hand-off, and the :class:`~.program.Cpu` nodes inside such an op. Nothing else changes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .program import (
    DEVICE_SYNC,
    ENQUEUING,
    EVENT_RECORD,
    MEMCPY,
    STREAM_SYNC,
    STREAM_WAIT_EVENT,
    Call,
    Cpu,
    Node,
    Op,
    Poll,
    Program,
    Signal,
    Wait,
    Work,
    is_cpu_only,
    scaled_cost,
    work_duration,
)

__all__ = ["CpuSpan", "Execution", "GpuSpan", "Scales", "execute"]


@dataclass(frozen=True, slots=True)
class Scales:
    """The change applied to a run (1.0 = baseline); see the module docstring."""

    kernel: float = 1.0
    cpu: float = 1.0
    nccl: float = 1.0


@dataclass(slots=True, eq=False)
class CpuSpan:
    """An executed :class:`~.program.Op` or :class:`~.program.Call` on thread ``tid``.

    ``ext_id``: an op's own External id, or for a call its innermost enclosing op's (-1 if
    none). ``corr``: a call's correlation id (-1 for ops). ``gpu``: what a call enqueued.
    """

    node: Op | Call
    tid: int
    start_ns: int
    end_ns: int
    ext_id: int
    corr: int = -1
    parent: CpuSpan | None = None
    gpu: GpuSpan | None = None


@dataclass(slots=True, eq=False)
class GpuSpan:
    """An executed GPU activity; ``launch`` is None for backlog work."""

    work: Work
    stream: int
    start_ns: int
    end_ns: int
    corr: int
    launch: CpuSpan | None = None


@dataclass(slots=True, eq=False)
class Execution:
    """The outcome of one run: CPU spans in start order, GPU spans in enqueue order."""

    program: Program
    scales: Scales
    cpu: list[CpuSpan] = field(default_factory=list)
    gpu: list[GpuSpan] = field(default_factory=list)

    def steps(self) -> list[tuple[str, int, int]]:
        """``(name, start_ns, end_ns)`` of every ``ProfilerStep#N`` span, in order."""
        main = self.program.threads[0].tid
        return [
            (s.node.name, s.start_ns, s.end_ns)
            for s in self.cpu
            if s.tid == main and isinstance(s.node, Op) and s.node.name.startswith("ProfilerStep#")
        ]


# flattened actions: (kind, payload)
_BEGIN, _END, _COST, _CALL, _SIGNAL, _WAIT, _POLL = range(7)


def _flatten(nodes: tuple[Node, ...], cpu_scale: float, scaled: bool, out: list) -> None:
    for n in nodes:
        if isinstance(n, Op):
            s = scaled or (cpu_scale != 1.0 and is_cpu_only(n))
            out.append((_BEGIN, n))
            out.append((_COST, scaled_cost(n.pre_ns, cpu_scale) if s else n.pre_ns))
            _flatten(n.children, cpu_scale, s, out)
            out.append((_COST, scaled_cost(n.post_ns, cpu_scale) if s else n.post_ns))
            out.append((_END, n))
        elif isinstance(n, Cpu):
            out.append((_COST, scaled_cost(n.ns, cpu_scale) if scaled else n.ns))
        elif isinstance(n, Call):
            out.append((_CALL, n))
        elif isinstance(n, Signal):
            out.append((_SIGNAL, n))
        elif isinstance(n, Wait):
            out.append((_WAIT, n))
        elif isinstance(n, Poll):
            out.append((_POLL, n))
        else:  # pragma: no cover - a program bug
            raise TypeError(f"unknown node {n!r}")


class _ThreadState:
    __slots__ = ("actions", "now", "pc", "stack", "tid")

    def __init__(self, tid: int, actions: list, start_ns: int) -> None:
        self.tid = tid
        self.actions = actions
        self.pc = 0
        self.now = start_ns
        self.stack: list[CpuSpan] = []


class _Runner:
    def __init__(self, program: Program, scales: Scales) -> None:
        self.ex = Execution(program, scales)
        self.scales = scales
        self.last_end: dict[int, int] = {}
        self.floor: dict[int, int] = {}
        self.events: dict[str, int] = {}
        self.signals: dict[str, int] = {}
        self.tag_end: dict[str, int] = {}
        self.parked: dict[str, list[tuple[int, int]]] = {}  # name or tag -> (thread, reaction)
        self.heap: list[tuple[int, int]] = []
        self.next_corr = 1
        self.next_ext = 1
        self.threads = []
        for i, th in enumerate(program.threads):
            actions: list = []
            _flatten(th.body, scales.cpu, False, actions)
            self.threads.append(_ThreadState(th.tid, actions, th.start_ns))
            heapq.heappush(self.heap, (th.start_ns, i))
        for stream, work in program.backlog:
            self._enqueue(work, stream, 0, None)

    def tail(self, stream: int) -> int:
        return max(self.last_end.get(stream, 0), self.floor.get(stream, 0))

    def _enqueue(self, work: Work, stream: int, ready: int, launch: CpuSpan | None) -> GpuSpan:
        start = max(ready, self.tail(stream))
        end = start + work_duration(work, self.scales.kernel, self.scales.nccl)
        g = GpuSpan(work, stream, start, end, self.next_corr if launch is None else launch.corr)
        if launch is None:
            self.next_corr += 1
        g.launch = launch
        self.last_end[stream] = end
        self.ex.gpu.append(g)
        if work.tag:
            self.tag_end[work.tag] = end
            self._wake(work.tag, end)
        return g

    def _wake(self, key: str, t: int) -> None:
        for ti, reaction in self.parked.pop(key, []):
            st = self.threads[ti]
            st.now = max(st.now, t + reaction)
            heapq.heappush(self.heap, (st.now, ti))

    def _call(self, st: _ThreadState, call: Call) -> int:
        start = st.now
        parent = st.stack[-1] if st.stack else None
        span = CpuSpan(call, st.tid, start, -1, parent.ext_id if parent else -1, self.next_corr)
        span.parent = parent
        self.next_corr += 1
        self.ex.cpu.append(span)
        end = start + call.cost_ns
        if call.api in ENQUEUING:
            assert call.work is not None
            span.gpu = self._enqueue(call.work, call.stream, start + call.latency_ns, span)
            if call.api == MEMCPY:
                end = max(end, span.gpu.end_ns + call.reaction_ns)
        elif call.api == EVENT_RECORD:
            self.events[call.event] = self.tail(call.stream)
        elif call.api == STREAM_WAIT_EVENT:
            ev = self.events.get(call.event, 0)
            self.floor[call.stream] = max(self.floor.get(call.stream, 0), ev)
        elif call.api == STREAM_SYNC:
            end = max(end, self.tail(call.stream) + call.reaction_ns)
        elif call.api == DEVICE_SYNC:
            streams = sorted(set(self.last_end) | set(self.floor))
            drain = max([self.tail(s) for s in streams], default=0)
            end = max(end, drain + call.reaction_ns)
        else:  # pragma: no cover - a program bug
            raise ValueError(f"unknown runtime call {call.api}")
        span.end_ns = end
        return end

    def _step(self, ti: int) -> None:
        """Run thread ``ti`` from its current time until it advances time or blocks."""
        st = self.threads[ti]
        while st.pc < len(st.actions):
            kind, x = st.actions[st.pc]
            st.pc += 1
            if kind == _BEGIN:
                parent = st.stack[-1] if st.stack else None
                span = CpuSpan(x, st.tid, st.now, -1, self.next_ext, parent=parent)
                self.next_ext += 1
                self.ex.cpu.append(span)
                st.stack.append(span)
            elif kind == _END:
                st.stack.pop().end_ns = st.now
            elif kind == _COST:
                if x:
                    st.now += x
                    heapq.heappush(self.heap, (st.now, ti))
                    return
            elif kind == _CALL:
                st.now = self._call(st, x)
                heapq.heappush(self.heap, (st.now, ti))
                return
            elif kind == _SIGNAL:
                if x.name in self.signals:
                    raise ValueError(f"signal {x.name!r} set twice")
                self.signals[x.name] = st.now
                self._wake(x.name, st.now)
            else:  # _WAIT or _POLL
                key = x.name if kind == _WAIT else x.tag
                t = self.signals.get(key) if kind == _WAIT else self.tag_end.get(key)
                if t is None:
                    self.parked.setdefault(key, []).append((ti, x.reaction_ns))
                    return
                if t + x.reaction_ns > st.now:
                    st.now = t + x.reaction_ns
                    heapq.heappush(self.heap, (st.now, ti))
                    return

    def run(self) -> Execution:
        while self.heap:
            t, ti = heapq.heappop(self.heap)
            assert t == self.threads[ti].now
            self._step(ti)
        stuck = [k for k, v in self.parked.items() if v]
        if stuck:
            raise RuntimeError(f"{self.ex.program.name}: threads never released: {stuck}")
        self.ex.cpu.sort(key=lambda s: (s.start_ns, -(s.end_ns - s.start_ns)))
        return self.ex


def execute(program: Program, scales: Scales | None = None) -> Execution:
    """Run ``program`` under ``scales`` (baseline when None); see the module docstring."""
    return _Runner(program, scales or Scales()).run()
