"""One rank's plan run with torch: ops on the local device, collectives through torch.distributed.

:class:`Executor` runs a :class:`~lumos.bench.plan.RankPlan` pass after pass (warm-up passes,
then the measured one under the profiler), one step at a time, each item in order:

* a tensor an item reads that no earlier item of its step produced (a parameter, an input, an
  optimizer state, an output of a skipped op) is made once from its recorded spec
  (:func:`lumos.bench.tensors.make_tensor`), before any pass (:meth:`Executor.prefill`: making
  it is not the step's work), and kept for every pass; a tensor produced inside
  the pass is dropped after the last item that uses it, so memory stays what the recorded run
  held;
* an op's outputs take the slots the trace recorded; an output whose shape or dtype differs
  from the recording (data-dependent ops, made-up values) is replaced by a kept tensor of the
  recorded spec, decided the first time the op runs, so later ops see what they recorded;
* collectives are issued without blocking; an item that touches a storage an unfinished
  collective writes waits for it first (as DDP's bucket copies wait), and every step ends when
  its collectives have;
* an item that raises the first time it runs is skipped from then on, counted with its
  exception.

Nothing here reads a recorded time: each step's time is what it takes here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lumos.bench.comms import CommRunner
from lumos.bench.ops import BoundOp, CannotRun, bind
from lumos.bench.plan import CommCall, Item, OpCall, RankPlan, Skips, WorkCall, tensor_slots
from lumos.bench.tensors import dtype_of, make_tensor

__all__ = ["Executor"]


class Executor:
    """Runs one rank's plan (see the module docstring). ``device`` is a torch device string;
    ``comm`` issues the collectives (None: a run with no process group, collectives skipped);
    ``progress(n)`` is called with the number of items done since its last call; ``emulate``
    holds a :class:`WorkCall` with no recorded work for its recorded duration (else it is
    skipped)."""

    def __init__(
        self,
        plan: RankPlan,
        torch: Any,
        device: str,
        comm: CommRunner | None,
        progress: Callable[[int], None] | None = None,
        *,
        emulate: bool = True,
    ) -> None:
        self.plan = plan
        self.torch = torch
        self.device = torch.device(device)
        # a trace recorded without an accelerator computed on its host: on one, all goes there
        self.host = self.device if plan.host_only else torch.device("cpu")
        self.comm = comm
        self.progress = progress or (lambda _n: None)
        self.emulate = emulate
        self.emulated: set[int] = set()  # item positions held for their recorded time
        self.items: list[Item] = list(plan.items())
        self.skipped = Skips()
        self.skipped.merge(plan.skipped)
        self.comm_skipped = Skips()
        self.comm_skipped.merge(plan.comm_skipped)
        self.substituted: dict[str, str] = {}
        self.runners: list[Callable[[], None] | None] = []
        self.keep: dict[int, Any] = {}  # slot -> tensor kept across passes
        self.replace: dict[int, Any] = {}  # output slot -> kept tensor of the recorded spec
        self.live: dict[int, Any] = {}
        self.pending: dict[int, list[Any]] = {}  # storage id -> unfinished collectives
        self._gaps = [it.gap_ns if isinstance(it, WorkCall) and emulate else 0
                      for it in self.items]  # fmt: skip
        self._start_at = 0  # when the current item may start (an emulated one ends dur_ns after)
        self.ran = [False] * len(self.items)  # whether each item ran once (its first run checks)
        self._checking = False
        starts = [0]
        for step in plan.steps:
            starts.append(starts[-1] + len(step.items))
        self._starts = starts
        self._release = self._last_uses()
        self._touch = [self._storages(it) for it in self.items]
        self._buffers: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for i, it in enumerate(self.items):
            self.runners.append(self._prepare(it))
            if isinstance(it, WorkCall) and it.no_work and self.runners[-1] is not None:
                self.emulated.add(i)

    # -- preparation -------------------------------------------------------------------------

    def _slots_of(self, item: Item) -> list[int]:
        if isinstance(item, OpCall):
            return [s for a in (*item.args, *item.outputs) for s in tensor_slots(a)]
        if isinstance(item, CommCall):
            return [*item.inputs, *item.outputs]
        return []

    def _last_uses(self) -> list[list[int]]:
        last: dict[int, int] = {}
        for i, it in enumerate(self.items):
            for s in self._slots_of(it):
                last[s] = i
        out: list[list[int]] = [[] for _ in self.items]
        for s, i in last.items():
            out[i].append(s)
        return out

    def _storages(self, item: Item) -> frozenset[int]:
        specs = self.plan.tensors
        return frozenset(specs[s].storage for s in self._slots_of(item))

    def _prepare(self, item: Item) -> Callable[[], None] | None:
        if isinstance(item, OpCall):
            try:
                op = bind(item, self.torch, str(self.device), host=str(self.host))
            except CannotRun as exc:
                self.skipped.add(str(exc), item.name)
                return None
            if op.twin:
                self.substituted[item.name] = op.twin
            return lambda: self._run_op(op)
        if isinstance(item, CommCall):
            if self.comm is None:
                self.comm_skipped.add("no process group in this run", item.name)
                return None
            reason = self.comm.check(item)
            if reason:
                self.comm_skipped.add(reason, item.name)
                return None
            storages = self._comm_storages(item)
            return lambda: self._run_comm(item, storages)
        return self._work(item)

    # -- tensors ---------------------------------------------------------------------------

    def prefill(self) -> int:
        """Make every tensor an item reads before an earlier item of its step produced it
        (one that can run: a skipped op produces nothing), so that no pass times their
        making; returns how many were made. A collective's outputs count as read (its
        buffers exist before it runs)."""
        made = 0
        for k in range(len(self.plan.steps)):
            produced: set[int] = set()
            for i in range(self._starts[k], self._starts[k + 1]):
                it = self.items[i]
                if isinstance(it, OpCall):
                    reads = [s for a in it.args for s in tensor_slots(a)]
                    writes = [s for a in it.outputs for s in tensor_slots(a)]
                elif isinstance(it, CommCall):
                    reads, writes = [*it.inputs, *it.outputs], []
                else:
                    continue
                for s in reads:
                    if s not in produced and s not in self.keep:
                        self.keep[s] = make_tensor(self.plan.tensors[s], self.device, self.host)
                        made += 1
                if self.runners[i] is not None:
                    produced.update(writes)
        return made

    def tensor(self, slot: int) -> Any:
        """The live tensor of ``slot``, made (and kept) when no item produced it yet."""
        t = self.live.get(slot)
        if t is None:
            t = self.keep.get(slot)
            if t is None:
                t = make_tensor(self.plan.tensors[slot], self.device, self.host)
                self.keep[slot] = t
            self.live[slot] = t
        return t

    def _fill(self, op: BoundOp) -> tuple[list[Any], dict[str, Any]]:
        args, kwargs = list(op.args), dict(op.kwargs)
        for key, tag, payload in op.fills:
            if tag == "t":
                value: Any = self.tensor(payload)
            else:
                value = [self.tensor(s) if s >= 0 else None for s in payload]
            if isinstance(key, int):
                args[key] = value
            else:
                kwargs[key] = value
        return args, kwargs

    def _store(self, outputs: tuple[Any, ...], result: Any) -> None:
        parts = list(result) if isinstance(result, (tuple, list)) and len(outputs) > 1 else [result]
        for (tag, payload), part in zip(outputs, parts, strict=False):
            if tag == "t":
                self._put(payload, part)
            elif tag == "T":
                seq = part if isinstance(part, (list, tuple)) else [part]
                for s, p in zip(payload, seq, strict=False):
                    if s >= 0:
                        self._put(s, p)

    def _put(self, slot: int, value: Any) -> None:
        kept = self.replace.get(slot)
        if kept is not None:
            self.live[slot] = kept
            return
        if self._checking:
            spec = self.plan.tensors[slot]
            ok = (isinstance(value, self.torch.Tensor) and tuple(value.shape) == spec.shape
                  and value.dtype == dtype_of(spec.dtype))  # fmt: skip
            if not ok:
                kept = make_tensor(spec, self.device, self.host)
                self.replace[slot] = kept
                self.live[slot] = kept
                return
        self.live[slot] = value

    # -- running ---------------------------------------------------------------------------

    def _run_op(self, op: BoundOp) -> None:
        args, kwargs = self._fill(op)
        self._store(op.outputs, op.fn(*args, **kwargs))

    def _run_comm(self, call: CommCall, storages: set[int]) -> None:
        assert self.comm is not None
        ins = [self.tensor(s) for s in call.inputs]
        outs = [self.tensor(s) for s in call.outputs]
        works = self.comm.issue(call, ins, outs)
        for st in storages if works else ():
            self.pending.setdefault(st, []).extend(works)

    def _comm_storages(self, call: CommCall) -> set[int]:
        specs = self.plan.tensors
        return {specs[s].storage for s in (*call.inputs, *call.outputs)}

    def _work(self, item: WorkCall) -> Callable[[], None] | None:
        torch = self.torch
        where = self.device if item.on_gpu else self.host
        if item.no_work:
            if not self.emulate:
                from lumos.bench.chakra_plan import NO_WORK

                self.skipped.add(NO_WORK, item.name)
                return None
            span = torch.profiler.record_function
            return lambda: self._hold(item.dur_ns, span, item.name)
        if item.mkn is not None:
            b, m, k, n = item.mkn
            key: tuple[Any, ...] = ("mm", b, m, k, n, str(where))
            if key not in self._buffers:
                lead = (b,) if b > 1 else ()
                self._buffers[key] = (torch.rand((*lead, m, k), device=where),
                                      torch.rand((*lead, k, n), device=where),
                                      torch.empty((*lead, m, n), device=where))  # fmt: skip
            a, bb, c = self._buffers[key]
            return lambda: torch.matmul(a, bb, out=c)
        if not item.bytes:
            view = self._buffer(("one", str(where)), 1, where)[0]
            return lambda: view.view(-1)
        x, y, z = self._buffer(("add", item.bytes // 12, str(where)), max(item.bytes // 12, 1),
                               where)  # fmt: skip
        return lambda: torch.add(x, y, out=z)

    def _buffer(self, key: tuple[Any, ...], n: int, where: Any) -> tuple[Any, ...]:
        if key not in self._buffers:
            self._buffers[key] = tuple(self.torch.rand(n, device=where) for _ in range(3))
        return self._buffers[key]

    def _hold(self, dur_ns: int, span: Callable[[str], Any], name: str) -> None:
        """An op known only by its recorded time: it ends ``dur_ns`` after it could start (so
        this loop's own cost is inside it, not added), in a profiler span of its name."""
        with span(name):
            _wait_until(self._start_at + dur_ns)

    def wait_all(self) -> None:
        """Wait for every unfinished collective (and the device's queue)."""
        seen: set[int] = set()
        for works in self.pending.values():
            for w in works:
                if id(w) not in seen:
                    seen.add(id(w))
                    w.wait()
        self.pending.clear()
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _wait_for(self, storages: frozenset[int]) -> None:
        for st in storages & self.pending.keys():
            for w in self.pending.pop(st):
                w.wait()

    def run_pass(
        self,
        annotate: Callable[[str], Any] | None = None,
        steps: Sequence[int] | None = None,
        label: str | None = None,
    ) -> list[int]:
        """Run every step (or the ``steps`` given, by position) once; returns each one's wall
        time in ns. ``annotate(name)`` gives a context manager wrapped around each step (the
        profiler's step span), named ``label`` when given, else as the step."""
        times: list[int] = []
        done = 0
        for k in range(len(self.plan.steps)) if steps is None else steps:
            step = self.plan.steps[k]
            self.live = dict(self.keep)
            ctx = annotate(label or step.name) if annotate is not None else None
            t0 = time.perf_counter_ns()
            if ctx is not None:
                ctx.__enter__()
            try:
                last_end = time.perf_counter_ns()
                for i in range(self._starts[k], self._starts[k + 1]):
                    run = self.runners[i]
                    self._start_at = last_end + self._gaps[i]
                    if self._gaps[i]:
                        _wait_until(self._start_at)
                    if run is not None:
                        if self.pending:
                            self._wait_for(self._touch[i])
                        if self.ran[i]:
                            run()
                        else:
                            self._first_run(i, run)
                    last_end = time.perf_counter_ns()
                    for s in self._release[i]:
                        if s not in self.keep:
                            self.live.pop(s, None)
                    done += 1
                    if done % 64 == 0:
                        self.progress(64)
                self.wait_all()
            finally:
                if ctx is not None:
                    ctx.__exit__(None, None, None)
            times.append(time.perf_counter_ns() - t0)
        self.progress(done % 64)
        return times

    def _first_run(self, i: int, run: Callable[[], None]) -> None:
        self.ran[i] = True
        self._checking = True
        try:
            run()
        except Exception as exc:  # an op that fails here: skipped from now on, with its reason
            item = self.items[i]
            self.runners[i] = None
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            into = self.comm_skipped if isinstance(item, CommCall) else self.skipped
            into.add(f"raised {type(exc).__name__} here", item.name, 1, first)
        finally:
            self._checking = False

    def executed(self) -> tuple[int, int, int]:
        """``(compute ops, emulated ops, collectives)`` that ran in the last pass."""
        ops = comms = emulated = 0
        for i, (it, run) in enumerate(zip(self.items, self.runners, strict=True)):
            if run is None:
                continue
            if isinstance(it, CommCall):
                comms += 1
            elif i in self.emulated:
                emulated += 1
            else:
                ops += 1
        return ops, emulated, comms


def _wait_until(t_ns: int) -> None:
    """Return when ``perf_counter_ns`` reaches ``t_ns``: asleep for all but the last 200 us
    (the CPU stays free for the other ranks and gloo's threads, as it was while the recorded
    thread waited or was descheduled), then spinning, which ends on time."""
    left = t_ns - time.perf_counter_ns()
    if left > 400_000:
        time.sleep((left - 200_000) / 1e9)
    while time.perf_counter_ns() < t_ns:
        pass
