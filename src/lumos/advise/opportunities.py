"""Which change pays: a standard set of what-ifs, each simulated against the replayed baseline.

=======================  ====================================================================
name                     the what-if (and the command that reproduces it)
=======================  ====================================================================
``compute_kernels_2x``   compute twice as fast (``lumos replay --scale @compute=0.5``)
``host_overhead_half``   what CUDA graphs or torch.compile would buy: CPU ops, runtime calls,
                         CPU gaps and launch latency halved (``--scale @host=0.5``)
``communication_2x``     transfers twice as fast (``--scale @comm=0.5``)
``comm_overlap``         communication off the critical path: transfers take no time, so the
                         step is what it would be with communication hidden entirely behind
                         compute (``--scale @comm=0``; an upper bound on overlap's gain)
``no_straggler``         the late rank at the others' pace (``lumos estimate --set
                         straggler=RANK:FACTOR``, FACTOR its compute and CPU time per step
                         relative to the median of the other ranks', below 1)
``microbatches_2x``      twice the micro-batches of a pipeline (``--set microbatches=2N``)
``dp_2x``                twice the data-parallel degree (``--set dp=2N --topology T``)
=======================  ====================================================================

Each one's ``step_ns`` is the job's replayed step (mean over steps of the slowest rank's,
:func:`lumos.estimate.estimate`'s ``step_ns``) under the what-if; ``gain_pct`` = (baseline -
what-if) / baseline x 100. A what-if the trace cannot support (no communication, one rank, no
pipeline, a model value not found, no ``--topology`` for dp) is listed under ``not_applicable``
with the reason instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.graph.model import DepKind, TaskKind, Workload
from lumos.replay import apply_edits

__all__ = ["Opportunity", "opportunities", "straggler_factor"]

_SCALES: tuple[tuple[str, str, float], ...] = (
    ("compute_kernels_2x", "@compute", 0.5),
    ("host_overhead_half", "@host", 0.5),
    ("communication_2x", "@comm", 0.5),
    ("comm_overlap", "@comm", 0.0),
)


@dataclass(frozen=True)
class Opportunity:
    """One what-if's answer: ``name``, ``step_ns``, ``gain_pct``, ``command``."""

    name: str
    step_ns: int
    gain_pct: float
    command: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "step_ns": self.step_ns,
                "gain_pct": round(self.gain_pct, 2), "command": self.command}  # fmt: skip


def _step_ns(workload: Workload, sets: Sequence[str] = (), comm_model: Any = None) -> int:
    """The step of ``workload`` (already edited) replayed, or with ``sets`` its what-if: one
    simulation either way (the baseline was replayed by the caller)."""
    if not sets:
        rows = estimate(workload, []).rows
    else:
        scenario = parse_scenario(list(sets))
        rows = estimate(workload, [scenario], comm_model=comm_model, with_baseline=False).rows
    return int(rows[-1].step_ns)


def straggler_factor(workload: Workload, rank: int) -> float:
    """The late rank's pace relative to the others: the median over the other ranks of their
    compute and CPU time (every task but communication, plus the CPU time between tasks: what
    :func:`lumos.graph.edits.slow_down` scales), over the late rank's; at most 1."""
    busy = {}
    for g in workload.graphs:
        t, e = g.tasks, g.edges
        work = ~np.isin(t.kind, (int(TaskKind.COMM), int(TaskKind.CPU_COMM)))
        intra = e.kind == int(DepKind.INTRA_THREAD)
        busy[g.rank] = float(t.dur_ns[work].sum()) + float(np.maximum(e.delay_ns[intra], 0).sum())
    others = [v for r, v in busy.items() if r != rank]
    if not others or busy.get(rank, 0.0) <= 0:
        return 1.0
    return min(1.0, float(np.median(others)) / busy[rank])


def opportunities(
    workload: Workload,
    baseline_ns: int,
    sources: Sequence[str],
    *,
    late: dict[str, Any] | None = None,
    baseline_values: dict[str, Any] | None = None,
    topology: str | None = None,
    comm_model: Callable[..., Any] | None = None,
    on_done: Callable[[], None] | None = None,
) -> tuple[list[Opportunity], list[dict[str, str]]]:
    """The standard what-ifs (module docstring), ranked by gain (largest first), and the ones
    not applicable with why. ``baseline_values``: the configuration found in the trace
    (:func:`lumos.estimate.baseline.detect_baseline`'s ``values``)."""
    src = " ".join(shlex.quote(s) for s in sources)
    found: list[Opportunity] = []
    skipped: list[dict[str, str]] = []
    has_comm = any(np.isin(g.tasks.kind, (int(TaskKind.COMM), int(TaskKind.CPU_COMM))).any()
                   for g in workload.graphs)  # fmt: skip

    def add(name: str, step: int, command: str) -> None:
        gain = (baseline_ns - step) / baseline_ns * 100 if baseline_ns else 0.0
        found.append(Opportunity(name, step, gain, command))

    for name, selector, factor in _SCALES:
        if selector == "@comm" and not has_comm:
            skipped.append({"name": name, "reason": "the trace has no communication"})
        else:
            edited = workload.replace_graphs(
                apply_edits(g, (), [(selector, factor)]) for g in workload.graphs
            )
            add(name, _step_ns(edited),
                f"lumos replay {src} --scale {selector}={factor:g} -o {name}")  # fmt: skip
        if on_done:
            on_done()
    if late is None:
        skipped.append({"name": "no_straggler", "reason": "no rank makes the others wait "
                        "(one rank, or lateness under 2 % of a step)"})  # fmt: skip
    else:
        f = straggler_factor(workload, late["rank"])
        if f >= 0.999:
            skipped.append({"name": "no_straggler", "reason": f"rank {late['rank']} arrives "
                            "late without more compute or CPU time than the others (its wait "
                            "comes from elsewhere)"})  # fmt: skip
        else:
            sets = [f"straggler={late['rank']}:{f:.3f}"]
            add("no_straggler", _step_ns(workload, sets),
                f"lumos estimate {src} --set {sets[0]} -o no_straggler")  # fmt: skip
    if on_done:
        on_done()
    values = baseline_values or {}
    _model_what_ifs(workload, src, values, topology, comm_model, add, skipped)
    if on_done:
        on_done()
    found.sort(key=lambda o: (-o.gain_pct, o.name))
    return found, skipped


def _model_what_ifs(workload, src, values, topology, comm_model, add, skipped) -> None:
    """``microbatches_2x`` and ``dp_2x`` where the trace supports them."""
    mb, pp, dp = values.get("microbatches"), values.get("pp"), values.get("dp")
    if not (isinstance(pp, int) and pp > 1 and isinstance(mb, int) and mb >= 1):
        skipped.append({"name": "microbatches_2x", "reason": "not a pipeline with micro-batches "
                        f"found in the trace (pp {pp}, micro-batches {mb})"})  # fmt: skip
    else:
        _try(add, skipped, "microbatches_2x", workload, [f"microbatches={2 * mb}"], src)
    if not isinstance(dp, int) or dp < 1:
        skipped.append({"name": "dp_2x", "reason": "the data-parallel degree is not stated by "
                        "the trace"})  # fmt: skip
    elif comm_model is None:
        skipped.append({"name": "dp_2x", "reason": "re-timing communication needs a network: "
                        "give --topology"})  # fmt: skip
    else:
        _try(add, skipped, "dp_2x", workload, [f"dp={2 * dp}"], src, comm_model,
             f" --topology {shlex.quote(str(topology))}")  # fmt: skip


def _try(add, skipped, name, workload, sets, src, comm_model=None, extra="") -> None:
    try:
        step = _step_ns(workload, sets, comm_model)
    except ConfigError as exc:
        skipped.append({"name": name, "reason": str(exc)})
        return
    add(name, step, f"lumos estimate {src} --set {sets[0]}{extra} -o {name}")
