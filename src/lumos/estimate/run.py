"""Run scenarios: edit the graphs, pick the cost model, simulate, compare with the baseline.

The table (``estimate.json``, DESIGN §7) has one row per scenario, the baseline first:

============  ===================================================================
field         meaning
============  ===================================================================
``config``    the scenario's keys (``{}`` for the baseline) and ``label``
``step_ns``   predicted step time of the job: per step the slowest rank, averaged
``median_step_ns`` the same, the median over steps (what a measured median compares with:
              one slow step in the source moves the mean, not the median)
``ranks``     per rank: ``rank``, ``step_ns`` (its own steps, averaged)
``breakdown`` the four-way breakdown of the slowest rank, per step (its steps' window
              divided by their number: the parts add up to that rank's mean step, as
              ``step_ns`` is a mean step), predicted in every row
``model``     ``traced`` (durations as recorded) or the communication model used
``edits``     what the scenario changed: graph edits of model keys (``layers``...) with
              what each added, removed and re-timed, and the communication re-timed by
              ``dp`` or ``link`` (how many collectives, by what factors)
============  ===================================================================

The document's ``baseline`` holds the configuration found in the trace (each key's ``value``
and ``how`` it was found) when a scenario changes the model or the data-parallel degree.

The baseline row also has ``measured_step_ns`` (the recording). Scenarios that change
communication (``dp``, ``link``) re-time the recorded transfers by the network model's ratio,
new over recorded (:mod:`lumos.cost.comm_relative`), so ``dp`` at the recorded degree gives the
baseline row to the ns; the others replay communication as traced, so a straggler delays the
other ranks exactly through the collectives that wait for it.

Every scenario is checked before anything is simulated: a value it needs that the trace does
not state, or that the detection declined (the layers and the sizes read inside them, the
data-parallel degree), is a :class:`~lumos.errors.ConfigError` naming ``--baseline KEY=N``;
a model size asks only for the values its re-timing uses (:mod:`lumos.estimate.needs`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos._io import atomic_write
from lumos.cost.comm_relative import RelativeCommCost, dp_collectives
from lumos.errors import ConfigError, SimulationError
from lumos.estimate.baseline import Baseline, detect_baseline
from lumos.estimate.needs import require
from lumos.estimate.reshape import Edit, reshape_workload
from lumos.estimate.scenario import Scenario
from lumos.graph.edits import slow_down
from lumos.graph.model import Workload
from lumos.report.metrics import replay_summary
from lumos.sim import simulate
from lumos.sim.cost import CostModel, TracedCost

__all__ = ["Estimate", "EstimateRow", "estimate", "estimate_csv", "write_estimate"]

#: Builds the communication cost model for a scenario (``dp``, ``link``) from the workload, the
#: scenario and the recorded data-parallel degree; see :func:`lumos.cost.comm_model.comm_model_for`.
CommModelFactory = Callable[[Workload, Scenario, int], tuple[CostModel, str]]


@dataclass(frozen=True)
class EstimateRow:
    """One scenario's prediction (see the module docstring for the fields)."""

    scenario: Scenario
    step_ns: int
    rank_step_ns: tuple[tuple[int, int], ...]
    breakdown: dict[str, int]
    model: str
    measured_step_ns: int | None = None
    edits: tuple[dict[str, object], ...] = ()
    median_step_ns: int = 0
    #: The largest predicted allocated total over ranks and steps (None: no memory events).
    peak_memory_bytes: int | None = None
    #: The training device's capacity (``totalGlobalMem`` or ``--device-memory``), None unknown.
    capacity_bytes: int | None = None

    @property
    def fits(self) -> bool | None:
        """Whether the peak fits the device (None when either is unknown)."""
        if self.peak_memory_bytes is None or self.capacity_bytes is None:
            return None
        return self.peak_memory_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": {**self.scenario.to_dict(), "label": self.scenario.label},
            "step_ns": self.step_ns,
            "median_step_ns": self.median_step_ns,
            "ranks": [{"rank": r, "step_ns": s} for r, s in self.rank_step_ns],
            "breakdown": self.breakdown,
            "model": self.model,
            "edits": list(self.edits),
            "peak_memory_bytes": self.peak_memory_bytes,
            "fits": self.fits,
        }
        if self.capacity_bytes is not None:
            out["capacity_bytes"] = self.capacity_bytes
        if self.measured_step_ns is not None:
            out["measured_step_ns"] = self.measured_step_ns
        return out


@dataclass(frozen=True)
class Estimate:
    """Rows, baseline first (unless ``estimate(..., with_baseline=False)``), and where the
    traces came from."""

    rows: tuple[EstimateRow, ...]
    sources: tuple[str, ...] = field(default=())
    baseline: dict[str, object] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sources": list(self.sources),
            "rows": [r.to_dict() for r in self.rows],
        }
        if self.baseline is not None:
            out["baseline"] = self.baseline
        return out


def _edit(workload: Workload, s: Scenario) -> Workload:
    slow = dict(s.straggler)
    missing = sorted(set(slow) - set(workload.ranks))
    if missing:
        raise ConfigError(f"straggler rank {missing[0]} is not in the workload "
                          f"(ranks {', '.join(map(str, workload.ranks))})")  # fmt: skip
    return workload.replace_graphs(
        slow_down(g, slow[g.rank]) if g.rank in slow else g for g in workload.graphs
    )


def _mean_ns(values: Sequence[int] | np.ndarray) -> int:
    return round(float(np.mean(values))) if len(values) else 0


def _capacity(workload: Workload, device_memory: int | None) -> int | None:
    """``device_memory`` when given, else the smallest recorded capacity of the ranks'
    training GPUs (``deviceProperties`` ``totalGlobalMem``); host memory only when given."""
    if device_memory is not None:
        return device_memory
    caps = [g.memory.capacity_bytes for g in workload.graphs if g.memory is not None]
    return min(caps) if caps and all(c > 0 for c in caps) else None


def step_times(summaries: Sequence[Mapping[str, Any]], side: str) -> list[list[int]]:
    """Per rank, its ``side`` (``measured``/``predicted``) step times from
    :func:`~lumos.report.metrics.replay_summary`; when a rank has no ProfilerStep, every rank's
    whole window instead (whole runs compared)."""
    times = [[int(st[f"{side}_ns"]) for st in sm["steps"]] for sm in summaries]
    if not all(times):
        times = [[int(sm["window_ns"][side][1] - sm["window_ns"][side][0])] for sm in summaries]
    return times


def job_steps(per_rank: Sequence[Sequence[int]]) -> NDArray[np.int64]:
    """The job's step times: per step, the slowest rank's (steps all ranks have)."""
    n = min(len(p) for p in per_rank)
    return np.max([list(p[:n]) for p in per_rank], axis=0).astype(np.int64)


def job_step_ns(summaries: Sequence[Mapping[str, Any]]) -> int:
    """The job's mean predicted step (what estimate rows' ``step_ns`` and advice's are)."""
    return _mean_ns(job_steps(step_times(summaries, "predicted")))


def _row(
    workload: Workload,
    s: Scenario,
    cost: CostModel,
    model: str,
    edits: Sequence[Edit] = (),
    device_memory: int | None = None,
) -> EstimateRow:
    result = simulate(workload, cost)
    summaries = [replay_summary(result, gi) for gi in range(len(workload.graphs))]
    predicted = step_times(summaries, "predicted")
    job = job_steps(predicted)
    job_measured = job_steps(step_times(summaries, "measured"))
    slowest = int(np.argmax([np.mean(p) for p in predicted]))
    per_step = max(len(predicted[slowest]), 1)
    window = summaries[slowest]["breakdown"]["predicted"]
    peaks = [st["predicted_peak_memory_bytes"] for sm in summaries for st in sm["steps"]]
    peaks = [p for p in peaks if p is not None]
    return EstimateRow(
        scenario=s,
        peak_memory_bytes=max(peaks) if peaks else None,
        capacity_bytes=_capacity(workload, device_memory) if peaks else None,
        step_ns=_mean_ns(job),
        median_step_ns=round(float(np.median(job))),
        rank_step_ns=tuple(
            (sm["rank"], _mean_ns(p)) for sm, p in zip(summaries, predicted, strict=True)
        ),
        breakdown={k: round(v / per_step) for k, v in window.items()},
        model=model,
        measured_step_ns=_mean_ns(job_measured) if s.is_baseline else None,
        edits=tuple(e.to_dict() for e in edits),
    )


def _check(
    workload: Workload, s: Scenario, base: Baseline | None, comm_model: CommModelFactory | None
) -> None:
    """Refuse ``s`` before any simulation when it cannot be answered (see the module
    docstring)."""
    if s.needs_comm_model and comm_model is None:
        raise ConfigError(f"{s.label}: re-timing communication needs a network: "
                          "give --topology (a preset name or a TOML file)")  # fmt: skip
    if base is None:
        return
    try:
        model = dict(s.model)
        if "layers" in model and model["layers"] != base.values.get("layers"):
            base.need("layers")
        require(workload, base, model)
        if s.dp is not None:
            base.need("dp")
    except ConfigError as exc:
        raise ConfigError(f"{s.label}: {exc}") from None
    dp = base.values.get("dp", 0)
    if s.dp is None or s.dp == dp:
        return
    known, unknown = dp_collectives(workload, dp)
    if not known:
        what = (f"its {unknown} collectives of the data-parallel group ({dp} ranks) have no "
                "recorded size, which the network model needs" if unknown else
                f"the trace shows no collective of its data-parallel group ({dp} "
                f"rank{'s' if dp > 1 else ''}) to re-time: a run without data-parallel "
                f"communication does not say what {s.dp} ranks would exchange")  # fmt: skip
        raise ConfigError(f"{s.label}: {what}")


def _comm_edit(workload: Workload, s: Scenario, cost: CostModel, name: str, dp: int) -> Edit:
    """What the communication model re-times in ``workload``, as an edit."""
    what = [f"dp {dp} -> {s.dp}"] if s.dp is not None else []
    if s.link:
        what.append("link " + ", ".join(f"{r}:{f:g}" for r, f in s.link))
    edit = Edit(name="communication re-timed (" + ", ".join(what) + ")", model=name)
    if not isinstance(cost, RelativeCommCost):
        return edit
    summary = cost.summary(workload)
    return replace(edit, tasks_retimed=summary.count,
                   detail=summary.describe() + "; transfer = recorded transfer x t(new) / "
                   "t(recorded) of the network model, waiting for peers as recorded")  # fmt: skip


def estimate(
    workload: Workload,
    scenarios: Sequence[Scenario],
    *,
    comm_model: CommModelFactory | None = None,
    baseline: Mapping[str, int] | None = None,
    device_memory: int | None = None,
    on_edited: Callable[[Scenario, Workload], None] | None = None,
    with_baseline: bool = True,
) -> Estimate:
    """The baseline (replayed as traced) and every scenario, simulated; see the module docstring.
    ``with_baseline=False`` leaves the baseline's row out (and its simulation): for a caller
    that has replayed it already.

    ``comm_model(workload, scenario, recorded_dp)`` returns the cost model and its name for
    scenarios that re-time communication; without one, such a scenario is a
    :class:`ConfigError`, as is any scenario :func:`_check` refuses (before simulating).
    ``on_edited(scenario, workload)`` receives each scenario's edited workload (what
    ``lumos estimate --chakra`` writes as Chakra ETs).
    """
    base: Baseline | None = None
    if any(s.model or s.schedule or s.dp is not None for s in scenarios) or baseline:
        base = detect_baseline(workload, baseline)
    for s in scenarios:
        _check(workload, s, base, comm_model)
    dp = base.values.get("dp", 0) if base is not None else 0
    rows = []
    if with_baseline:
        rows.append(_row(workload, Scenario(), TracedCost(), "traced", device_memory=device_memory))
    for s in scenarios:
        if s.is_baseline:
            continue
        edits: list[Edit] = []
        edited = workload
        if s.model or s.schedule:
            assert base is not None
            edited, edits = reshape_workload(workload, base, dict(s.model), s.schedule, s.chunks)
        edited = _edit(edited, s)
        if on_edited is not None:
            on_edited(s, edited)
        if s.needs_comm_model:
            assert comm_model is not None
            cost, name = comm_model(edited, s, dp)
            edits.append(_comm_edit(edited, s, cost, name, dp))
        else:
            cost, name = TracedCost(), "traced"
        try:
            rows.append(_row(edited, s, cost, name, edits, device_memory))
        except SimulationError as exc:
            if s.schedule is None:
                raise
            raise SimulationError(
                f"{s.label}: the re-ordered pipeline deadlocks: a stage waits for a send or "
                "receive its neighbour never reaches (lumos issues a send together with the "
                "receive right after it, as batch_isend_irecv does, in 1f1b orders, and every "
                "send without blocking in interleaved ones). "
                f"({exc})"
            ) from None
    return Estimate(tuple(rows), baseline=None if base is None else base.to_dict())


def write_estimate(est: Estimate, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``DIR/estimate.json`` (atomically); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "estimate.json"
    with atomic_write(path) as f:
        json.dump(est.to_dict(), f, indent=1, sort_keys=True, allow_nan=False)
        f.write("\n")
    with atomic_write(out / "estimate.csv") as f:
        f.write(estimate_csv(est.to_dict()))
    return path


_CSV_PARTS = ("exposed_compute_ns", "overlapped_ns", "exposed_comm_ns", "other_ns")


def estimate_csv(doc: Mapping[str, Any]) -> str:
    """``estimate.json``'s rows as CSV: label, step_ns, change_pct, the breakdown, model."""
    rows = doc["rows"]
    base = rows[0]["step_ns"] or 1
    lines = [",".join(("config", "step_ns", "change_pct", *_CSV_PARTS, "model"))]
    for r in rows:
        label = str(r["config"]["label"]).replace(",", ";")
        parts = [str(r["breakdown"].get(p, 0)) for p in _CSV_PARTS]
        change = f"{(r['step_ns'] / base - 1) * 100:.2f}"
        lines.append(",".join((label, str(r["step_ns"]), change, *parts, str(r["model"]))))
    return "\n".join(lines) + "\n"
