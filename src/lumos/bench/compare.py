"""Where a step's time goes, by op class, in a Kineto trace: what source and executed runs share.

:func:`step_classes` reads one rank's trace and gives, per ``ProfilerStep``, its duration and
the time spent in each class of :data:`lumos.bench.classes.OP_CLASSES`:

* a trace with GPU activity: the GPU time of kernels, copies and sets by class (NCCL kernels
  are ``communication``);
* a CPU-only trace: the host time of ops by class, each op counted unless an op of the same
  class encloses it on its thread (``aten::linear`` holds ``aten::addmm``: counted once, as
  ``gemm``; an ``aten::copy_`` inside ``aten::mul`` counts as ``copy`` besides the ``mul``'s
  ``elementwise``); gloo's collective spans on its worker threads are ``communication``. An
  event of class ``other`` that holds others is a wrapper (``forward``, an autograd node, a
  module): not counted, its children are.

An event belongs to the step its start falls in. Each step also lists its ``transfers``: the
``(start, duration)`` of the spans that carry its collectives (a backend's ``gloo:``/``nccl:``
span, an NCCL kernel). A collective's span lasts until every rank of its group arrived: on the
first rank to arrive it holds the wait for the last. :func:`split_waiting` moves that wait,
from a rank's start of the collective to the last rank's (on the ranks' shared clock), from
``communication`` to ``comm_wait``, so that communication time compares transfers, and
waiting, which is the ranks' skew, is told apart.
:func:`compare_classes` and :func:`compare_steps` put a source and an executed run side by
side.

>>> compare_steps({"S#1": 100, "S#2": 120}, {"S#1": 110, "S#2": 130})["median"]
{'source_ns': 110, 'executed_ns': 120, 'change': 0.0909}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lumos.bench.classes import OP_CLASSES, op_class
from lumos.ingest.kineto_schema import Category
from lumos.ingest.kineto_trace import KinetoTrace

__all__ = ["change", "compare_classes", "compare_steps", "split_waiting", "step_classes"]

_GPU = (Category.KERNEL, Category.MEMCPY, Category.MEMSET)
_HOST = (Category.CPU_OP, Category.USER_ANNOTATION)
_BACKEND_SPAN = ("gloo:", "nccl:", "rccl:", "ucc:", "mpi:")


def change(source: float | None, executed: float | None) -> float | None:
    """``executed / source - 1`` rounded to 4 places; None when either is missing or 0."""
    if not source or executed is None:
        return None
    return round(executed / source - 1.0, 4)


def _class_of(trace: KinetoTrace, i: int, cat: int) -> str:
    if cat == Category.MEMCPY:
        return "copy"
    if cat == Category.MEMSET:
        return "memory"
    return op_class(trace.name_of(i))


def _has_child(ev: Any, order: Sequence[int], pos: int, proc: int, end: int) -> bool:
    """Whether the event after ``order[pos]`` on its thread starts inside it."""
    if pos + 1 >= len(order):
        return False
    j = order[pos + 1]
    return int(ev.processor_idx[j]) == proc and int(ev.ts_ns[j]) < end


def step_classes(trace: KinetoTrace) -> dict[str, dict[str, Any]]:
    """Per step name: ``dur_ns``, ``classes`` (class -> ns) and ``transfers`` (see the module
    docstring)."""
    ev = trace.events
    steps = trace.steps
    out: dict[str, dict[str, Any]] = {}
    if not len(steps):
        return out
    gpu = np.isin(ev.cat, [int(c) for c in _GPU])
    use = gpu if gpu.any() else np.isin(ev.cat, [int(c) for c in _HOST])
    step_names = set(steps.name)
    rows = [i for i in np.flatnonzero(use).tolist() if trace.name_of(i) not in step_names]
    starts = np.asarray(steps.ts_ns, dtype=np.int64)
    ends = starts + np.asarray(steps.dur_ns, dtype=np.int64)
    for k, name in enumerate(steps.name):
        out[name] = {"dur_ns": int(steps.dur_ns[k]), "classes": dict.fromkeys(OP_CLASSES, 0),
                     "transfers": []}  # fmt: skip
    order = sorted(rows, key=lambda i: (int(ev.processor_idx[i]), int(ev.ts_ns[i]),
                                        -int(ev.dur_ns[i])))  # fmt: skip
    stack: list[tuple[int, str]] = []  # (end, class) of the enclosing events on this thread
    proc = -1
    for pos, i in enumerate(order):
        p, t0 = int(ev.processor_idx[i]), int(ev.ts_ns[i])
        if p != proc:
            stack, proc = [], p
        while stack and stack[-1][0] <= t0:
            stack.pop()
        cls = _class_of(trace, i, int(ev.cat[i]))
        end = t0 + int(ev.dur_ns[i])
        enclosed = any(c == cls for _, c in stack)
        stack.append((end, cls))
        if enclosed or (cls == "other" and _has_child(ev, order, pos, p, end)):
            continue
        k = int(np.searchsorted(starts, t0, side="right")) - 1
        if k < 0 or t0 >= ends[k]:
            continue
        out[steps.name[k]]["classes"][cls] += int(ev.dur_ns[i])
        if cls == "communication" and (gpu[i] or trace.name_of(i).startswith(_BACKEND_SPAN)):
            out[steps.name[k]]["transfers"].append((t0, int(ev.dur_ns[i])))
    return out


def split_waiting(ranks: Sequence[Mapping[str, Mapping[str, Any]]]) -> None:
    """Move each collective's wait for its other ranks from ``communication`` to ``comm_wait``,
    in place, in ``ranks`` (one :func:`step_classes` result per rank of one run). The k-th
    transfer span of a step on every rank is one collective; a rank waited from its start of
    it to the latest start (the last rank's arrival), and the rest is its transfer. A step
    is left as it is when its ranks hold different numbers of transfers (its collectives cannot
    be paired) or when a span ends before the last arrival (the ranks' clocks disagree, or the
    op does not wait for all: a send); so is a run of one rank.

    >>> a = {"S": {"classes": {"communication": 50, "comm_wait": 0}, "transfers": [(0, 40)]}}
    >>> b = {"S": {"classes": {"communication": 15, "comm_wait": 0}, "transfers": [(30, 12)]}}
    >>> split_waiting([a, b]); a["S"]["classes"], b["S"]["classes"]
    ({'communication': 20, 'comm_wait': 30}, {'communication': 15, 'comm_wait': 0})
    """
    if len(ranks) < 2:
        return
    names = set.intersection(*(set(r) for r in ranks))
    for name in sorted(names):
        spans = [sorted(r[name].get("transfers", ())) for r in ranks]
        if len({len(s) for s in spans}) != 1:
            continue
        waits = [[0] * len(spans[0]) for _ in ranks]
        paired = True
        for k in range(len(spans[0])):
            last = max(s[k][0] for s in spans)
            if any(s[k][0] + s[k][1] < last for s in spans):
                paired = False
                break
            for w, s in zip(waits, spans, strict=True):
                w[k] = last - s[k][0]
        if not paired:
            continue
        for r, w in zip(ranks, waits, strict=True):
            classes = r[name]["classes"]
            classes["communication"] -= sum(w)
            classes["comm_wait"] += sum(w)


def compare_steps(source: Mapping[str, int | None], executed: Mapping[str, int]) -> dict[str, Any]:
    """Per step (executed order) and the medians of both sides over the steps both have.
    ``steps`` rows: ``name``, ``source_ns``, ``executed_ns``, ``change``."""
    rows = [{"name": n, "source_ns": source.get(n), "executed_ns": e,
             "change": change(source.get(n), e)} for n, e in executed.items()]  # fmt: skip
    both = [(r["source_ns"], r["executed_ns"]) for r in rows if r["source_ns"] is not None]
    med: dict[str, Any] = {"source_ns": None, "executed_ns": None, "change": None}
    if executed:
        med["executed_ns"] = int(np.median(list(executed.values())))
    if both:
        s = int(np.median([b[0] for b in both]))
        e = int(np.median([b[1] for b in both]))
        med = {"source_ns": s, "executed_ns": e, "change": change(s, e)}
    return {"steps": rows, "median": med}


def compare_classes(
    source: Sequence[Mapping[str, Mapping[str, Any]]] | None,
    executed: Sequence[Mapping[str, Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Per class: the mean time per step summed over ranks, source and executed, and the
    change (rows for the classes either side spent time in, in :data:`OP_CLASSES` order).
    ``source`` and ``executed`` hold one :func:`step_classes` result per rank; only the
    steps both sides have count when the source is given."""

    def per_step(
        ranks: Sequence[Mapping[str, Mapping[str, Any]]], names: set[str]
    ) -> dict[str, float]:
        tot = dict.fromkeys(OP_CLASSES, 0.0)
        for steps in ranks:
            picked = [s for n, s in steps.items() if n in names]
            for s in picked:
                for c, ns in s["classes"].items():
                    tot[c] += ns / len(picked)
        return tot

    names = {n for r in executed for n in r}
    if source is not None:
        names &= {n for r in source for n in r}
    ex = per_step(executed, names)
    src = per_step(source, names) if source is not None else None
    rows = []
    for c in OP_CLASSES:
        s = round(src[c]) if src is not None else None
        e = round(ex[c])
        if not e and not s:
            continue
        rows.append({"class": c, "source_ns": s, "executed_ns": e, "change": change(s, e)})
    return rows
