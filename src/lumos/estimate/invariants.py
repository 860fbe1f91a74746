"""Invariants that need no ground truth: what any trace's layers and what-ifs must satisfy.

:func:`check_invariants` runs them on one job (a :class:`~lumos.graph.model.Workload`, or the
paths of its traces) and returns one :class:`Check` per invariant, in this order:

================================  ==========================================================
name                              holds when
================================  ==========================================================
``layers_ranks_agree``            every rank reports the same layer count, or every rank
                                  declines with a reason (data-parallel replicas run one
                                  model)
``layers_forward_backward``       on every rank with layers and a backward, the backward
                                  runs as many layer blocks as the forward
``layers_fit_in_step``            on every rank with layers, its layers' time per step
                                  (layers x time per layer, over the phases) is at most the
                                  step
``identity_edit``                 ``--set KEY=<detected>`` for every detected model value
                                  (``layers``, ``hidden``... ``microbatches``, ``pp``) gives the
                                  baseline's ``step_ns`` and breakdown to the ns; with the
                                  layers declined, ``--set layers=N`` refuses naming
                                  ``--baseline layers=N``
``dp_recorded_is_baseline``       ``dp`` at the recorded degree gives the baseline row to the ns
                                  (step, breakdown, every rank); a trace that states no degree
                                  refuses naming ``--baseline dp=N``
``dp_sweep_monotonic``            ``dp`` at 1, 2, 4 and 8 times the recorded degree: each
                                  re-timed collective's factor and the exposed communication
                                  never decrease (or the what-if refuses, saying why)
================================  ==========================================================

A refusal that names its reason counts as holding: declining is the right answer where the
trace does not say. ``detail`` says what was compared, or what failed and why. One baseline
replay and at most six what-ifs per job: seconds on the realdata traces.

>>> from lumos.examples_data import example_run_dir
>>> [(c.name, c.ok) for c in check_invariants([example_run_dir()])][:2]
[('layers_ranks_agree', True), ('layers_forward_backward', True)]
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from lumos.cost.comm_model import comm_model_for
from lumos.cost.comm_relative import RelativeCommCost, dp_collectives
from lumos.cost.topology import resolve_topology
from lumos.errors import ConfigError, LumosError
from lumos.estimate.baseline import IN_LAYERS, Baseline, detect_baseline
from lumos.estimate.layer_report import layer_summary
from lumos.estimate.layers import BACKWARD_PATTERN, marked
from lumos.estimate.run import EstimateRow, estimate
from lumos.estimate.scenario import Scenario
from lumos.graph.model import Workload

__all__ = ["CHECKS", "SWEEP", "Check", "check_invariants"]

#: The dp sweep, as multiples of the recorded degree.
SWEEP = (1, 2, 4, 8)
_IDENTITY_KEYS = ("layers", *IN_LAYERS, "microbatches", "pp")
WHAT_IF_CHECKS = ("identity_edit", "dp_recorded_is_baseline", "dp_sweep_monotonic")
#: The invariants' names, in the order :func:`check_invariants` returns them.
CHECKS = ("layers_ranks_agree", "layers_forward_backward", "layers_fit_in_step", *WHAT_IF_CHECKS)


class Check(NamedTuple):
    """One invariant on one job: ``name``, whether it holds (``ok``) and what was compared."""

    name: str
    ok: bool
    detail: str


def check_invariants(
    job: Workload | Sequence[str | os.PathLike[str]], *, topology: str = "dgx-a100"
) -> list[Check]:
    """Every invariant of the module docstring on ``job`` (a workload, or its traces' paths,
    built with one worker); ``topology`` is the network the dp what-ifs use."""
    if isinstance(job, Workload):
        workload = job
    else:
        from lumos.replay import build_workload

        workload, _ = build_workload([str(p) for p in job], workers=1)
    base = detect_baseline(workload)
    doc = layer_summary(workload, base)
    checks = [_ranks_agree(doc), _forward_backward(workload, doc), _fit_in_step(doc)]
    try:
        return checks + _what_ifs(workload, base, topology)
    except LumosError as exc:  # the replay itself fails: no what-if can be checked
        why = f"the replay fails: {type(exc).__name__}: {exc}"
        return checks + [Check(n, False, why) for n in WHAT_IF_CHECKS]


# -- the layers ------------------------------------------------------------------------------


def _ranks_agree(doc: dict) -> Check:
    name = "layers_ranks_agree"
    ranks = doc["ranks"]
    counts = {r["layers"] for r in ranks}
    if counts == {None}:
        ok = all(r["reason"] for r in ranks)
        return Check(name, ok, f"{len(ranks)} rank(s) decline: {doc['verdict']['reason']}")
    if len(counts) == 1:
        return Check(name, True, f"{len(ranks)} rank(s) with {counts.pop()} layers each")
    found = ", ".join(f"{r['rank']}: {r['layers']}" for r in ranks)
    return Check(name, False, f"ranks report different layer counts ({found})")


def _forward_backward(workload: Workload, doc: dict) -> Check:
    name = "layers_forward_backward"
    bad, seen = [], []
    for g, r in zip(workload.graphs, doc["ranks"], strict=True):
        if r["layers"] is None:
            continue
        indptr, perm = g.processor_order()
        has_backward = bool(marked(g, BACKWARD_PATTERN, indptr, perm).any())
        fwd = r["phases"].get("forward", {}).get("layers")
        bwd = r["phases"].get("backward", {}).get("layers")
        back = f"{bwd} backward" if bwd is not None else "no backward in the trace"
        seen.append(f"rank {r['rank']}: {fwd} forward, {back}")
        if fwd is None or (has_backward and bwd != fwd) or (bwd is not None and bwd != fwd):
            bad.append(seen[-1])
    if not seen:
        return Check(name, True, "no rank has layers (declined)")
    if bad:
        return Check(name, False, "; ".join(bad))
    return Check(name, True, "; ".join(dict.fromkeys(s.split(": ", 1)[1] for s in seen)))


def _fit_in_step(doc: dict) -> Check:
    name = "layers_fit_in_step"
    bad, seen = [], []
    for r in doc["ranks"]:
        if r["layers"] is None or not r["step_ns"]:
            continue
        inside = sum(p["total_ns"] for p in r["phases"].values())
        seen.append(f"rank {r['rank']}: {inside / 1e6:.3f} of {r['step_ns'] / 1e6:.3f} ms")
        if inside > r["step_ns"]:
            bad.append(seen[-1])
    if not seen:
        return Check(name, True, "no rank has layers and steps")
    return Check(name, not bad, "; ".join(bad or seen[:4]) + (" ..." if len(seen) > 4 else ""))


# -- the what-ifs ----------------------------------------------------------------------------


def _same(a: EstimateRow, b: EstimateRow) -> str:
    """What differs between two rows (empty when they agree to the ns)."""
    diff = [f"{k}: {x} != {y}" for k, x, y in (
        ("step_ns", a.step_ns, b.step_ns),
        ("breakdown", a.breakdown, b.breakdown),
        ("ranks", a.rank_step_ns, b.rank_step_ns),
    ) if x != y]  # fmt: skip
    return "; ".join(diff)


def _refusal(workload: Workload, s: Scenario, topology: str, names: str) -> tuple[bool, str]:
    """Whether ``s`` refuses with a message naming ``names``, and the message."""
    try:
        estimate(workload, [s], comm_model=comm_model_for(topology))
    except ConfigError as exc:
        return names in str(exc), f"refused: {exc}"
    return False, f"{s.label} did not refuse"


def _what_ifs(workload: Workload, base: Baseline, topology: str) -> list[Check]:
    detected = {k: base.values[k] for k in _IDENTITY_KEYS if base.values.get(k, -1) > 0}
    identity = Scenario(model=tuple(detected.items())) if detected else None
    dp = base.values.get("dp", -1)
    sweep = [Scenario(dp=dp * m) for m in SWEEP] if dp > 0 else []
    sweep_check = None
    if dp > 0 and not dp_collectives(workload, dp)[0]:
        # no data-parallel communication to re-time: past the recorded degree it must refuse
        ok, why = _refusal(workload, sweep[1], topology, "data-parallel group")
        sweep_check, sweep = Check("dp_sweep_monotonic", ok, why), sweep[:1]
    runnable = [s for s in (identity, *sweep) if s is not None]
    rows = estimate(workload, runnable, comm_model=comm_model_for(topology)).rows
    base_row, by_label = rows[0], {r.scenario.label: r for r in rows[1:]}
    out = [_identity(workload, base, identity, base_row, by_label, topology)]
    if dp <= 0:
        ok, why = _refusal(workload, Scenario(dp=2), topology, "--baseline dp=")
        out += [Check("dp_recorded_is_baseline", ok, why), Check("dp_sweep_monotonic", ok, why)]
        return out
    same = _same(by_label[f"dp={dp}"], base_row)
    out.append(Check("dp_recorded_is_baseline", not same,
                     same or f"dp={dp}: step {base_row.step_ns} ns, breakdown and every rank "
                     "as the baseline"))  # fmt: skip
    out.append(sweep_check or _monotonic(workload, dp, rows, topology))
    return out


def _identity(
    workload: Workload,
    base: Baseline,
    identity: Scenario | None,
    base_row: EstimateRow,
    by_label: dict[str, EstimateRow],
    topology: str,
) -> Check:
    name = "identity_edit"
    notes = []
    if identity is not None:
        same = _same(by_label[identity.label], base_row)
        if same:
            return Check(name, False, f"{identity.label}: {same}")
        notes.append(f"{identity.label}: the baseline to the ns")
    if "layers" not in base.values:
        ok, why = _refusal(workload, Scenario(model=(("layers", 2),)), topology,
                           "--baseline layers=")  # fmt: skip
        if not ok:
            return Check(name, False, f"layers=2 with the layers declined: {why}")
        notes.append("layers=2 " + why)
    return Check(name, True, "; ".join(notes) or "no detected value to set")


def _monotonic(workload: Workload, dp: int, rows: tuple[EstimateRow, ...], topology: str) -> Check:
    """Exposed communication and each collective's factor over the sweep never decrease."""
    name = "dp_sweep_monotonic"
    sweep = [r for r in rows[1:] if r.scenario.dp is not None]
    exposed = [r.breakdown.get("exposed_comm_ns", 0) for r in sweep]
    degrees = [r.scenario.dp or 0 for r in sweep]
    network = resolve_topology(topology)
    factors = [
        np.concatenate(
            [RelativeCommCost(network, dp=(dp, d)).factors(g)[0] for g in workload.graphs]
        )
        for d in degrees
    ]
    falls = int((np.diff(np.stack(factors), axis=0) < 0).sum()) if len(factors) > 1 else 0
    detail = (f"dp {', '.join(map(str, degrees))}: exposed comm "
              f"{', '.join(f'{e / 1e6:.3f}' for e in exposed)} ms")  # fmt: skip
    if falls:
        return Check(name, False, f"{falls} collective factor(s) fall as dp grows; {detail}")
    if any(b < a for a, b in itertools.pairwise(exposed)):
        return Check(name, False, f"exposed communication falls as dp grows; {detail}")
    return Check(name, True, detail)
