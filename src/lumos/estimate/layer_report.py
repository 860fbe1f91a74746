"""What ``lumos layers`` shows: the layers found, their time per phase, what lies outside them.

:func:`layer_summary` returns a JSON-ready dict (``--json`` prints it):

==================  ==========================================================================
field               meaning
==================  ==========================================================================
``baseline``        every configuration key with its ``value`` and ``how`` it was found
``verdict``         the job's answer on the layers: ``layers`` (per rank; null when declined)
                    and ``reason`` (null when accepted; :mod:`lumos.estimate.layer_verdict`)
``ranks[]``         per rank: ``rank``, ``layers`` (null when declined), ``reason`` (why it was
                    declined, null when accepted), ``share`` (of the step its layers cover,
                    or the best rejected repeats), ``microbatches``, ``steps``, ``step_ns``,
                    ``phases``, ``repeats``, ``outside_ns``, ``how``
``phases``          the accepted layers, per phase (``forward``, ``backward``, ``optimizer``:
                    its per-layer updates): ``layers`` (blocks per step, or per micro-batch),
                    ``ops_per_layer``, ``layer_ns`` (recorded span of one layer, mean over
                    blocks and steps), ``total_ns`` (all layers of the phase per step),
                    ``groups_per_step``; empty when declined
``repeats``         the other repeats found (all of them when declined), not counted as
                    layers: ``phase``, ``blocks``, ``ops_per_block``, ``groups_per_step``,
                    ``total_ns`` per step
``outside_ns``      per step, the recorded step time not spent inside any layer block
                    (embedding, head, loss, data loading, collectives issued between layers)
==================  ==========================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.estimate.baseline import Baseline
from lumos.estimate.layer_verdict import RankLayers
from lumos.estimate.layers import LayerMap
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import ExecGraph, Workload

__all__ = ["format_layers", "layer_summary"]


def layer_summary(workload: Workload, base: Baseline) -> dict[str, Any]:
    """See the module docstring."""
    verdicts = base.verdict.ranks if base.verdict is not None else (None,) * len(base.layer_maps)
    given = base.how.get("layers") == "given (--baseline)"
    ranks = [_rank(g, lm, v, given)
             for g, lm, v in zip(workload.graphs, base.layer_maps, verdicts, strict=True)]  # fmt: skip
    verdict = {
        "layers": base.verdict.layers if base.verdict is not None else None,
        "reason": (base.verdict.reason or None) if base.verdict is not None else None,
    }
    return {"baseline": base.to_dict(), "verdict": verdict, "ranks": ranks}


def _rank(g: ExecGraph, lm: LayerMap, v: RankLayers | None, given: bool) -> dict[str, Any]:
    ts, end = g.tasks.ts_ns, g.tasks.ts_ns + g.tasks.dur_ns
    steps = max((x.step for x in lm.groups), default=0) + 1
    layers = v.layers if v is not None else lm.num_layers or None
    # with --baseline layers=N accepting declined blocks, they are used as they are found
    every = given and layers is None
    count = layers if layers is not None else (lm.num_layers if every else None)
    phases: dict[str, dict[str, Any]] = {}
    repeats: dict[tuple[str, int, int], dict[str, Any]] = {}
    inside = 0
    for x in lm.layer_groups():
        spans = [int(end[b].max() - ts[b].min()) for b in x.blocks]
        if count is not None and (every or x.count == count):
            inside += sum(spans)
            ph = phases.setdefault(x.phase, {"spans": [], "counts": [], "ops": []})
            ph["spans"] += spans
            ph["counts"].append(x.count)
            ph["ops"].append(x.period)
        else:
            r = repeats.setdefault((x.phase, x.count, x.period), {"groups": 0, "ns": 0})
            r["groups"] += 1
            r["ns"] += sum(spans)
    a = g.annotations
    st = a.kind == int(AnnotationKind.STEP)
    step_ns = int(a.dur_ns[st].sum() / max(int(st.sum()), 1)) if st.any() else 0
    return {
        "rank": g.rank,
        "layers": layers,
        "reason": (v.reason or None) if v is not None else None,
        "share": round(v.share, 4) if v is not None else None,
        "microbatches": lm.num_microbatches,
        "steps": steps,
        "step_ns": step_ns,
        "phases": {name: _phase(ph, steps) for name, ph in phases.items()},
        "repeats": [_repeat(key, r, steps) for key, r in sorted(repeats.items())],
        "outside_ns": max(step_ns - inside // steps, 0) if step_ns else None,
        "how": lm.how,
    }


def _repeat(key: tuple[str, int, int], r: dict[str, Any], steps: int) -> dict[str, Any]:
    phase, blocks, ops = key
    return {"phase": phase, "blocks": blocks, "ops_per_block": ops,
            "groups_per_step": round(r["groups"] / steps, 2), "total_ns": int(r["ns"] / steps)}  # fmt: skip


def _phase(ph: dict[str, Any], steps: int) -> dict[str, Any]:
    return {
        "layers": int(np.median(ph["counts"])),
        "ops_per_layer": int(np.median(ph["ops"])),
        "layer_ns": int(np.mean(ph["spans"])),
        "total_ns": int(np.sum(ph["spans"]) / steps),
        "groups_per_step": round(len(ph["counts"]) / steps, 2),
    }


def format_layers(doc: dict[str, Any]) -> str:
    """The summary as text: the configuration, then per rank a table of phases and the other
    repeats."""
    lines = ["baseline configuration found in the trace:"]
    for key, v in doc["baseline"].items():
        value = v["value"] if v["value"] > 0 else "not found"
        lines.append(f"  {key:<16}{value!s:<10}{v['how']}")
    for r in doc["ranks"]:
        lines.append("")
        head = (f"{r['layers']} layers" if r["layers"] is not None
                else f"layers not detected ({r['reason']})")  # fmt: skip
        lines.append(f"rank {r['rank']}: {head}, {r['microbatches']} micro-batch(es), "
                     f"{r['steps']} step(s) of {r['step_ns'] / 1e6:.3f} ms ({r['how']})")  # fmt: skip
        if r["phases"]:
            lines.append(f"  {'phase':<11}{'layers':>7}{'ops/layer':>11}{'ms/layer':>10}"
                         f"{'ms/step':>10}")  # fmt: skip
        for name, ph in r["phases"].items():
            lines.append(f"  {name:<11}{ph['layers']:>7}{ph['ops_per_layer']:>11}"
                         f"{ph['layer_ns'] / 1e6:>10.3f}{ph['total_ns'] / 1e6:>10.3f}")  # fmt: skip
        if r["repeats"]:
            lines.append("  other repeats (not layers): " + "; ".join(
                f"{x['phase']} {x['blocks']} x {x['ops_per_block']} ops "
                f"({x['total_ns'] / 1e6:.3f} ms/step)" for x in r["repeats"]))  # fmt: skip
        if r["outside_ns"] is not None and r["phases"]:
            lines.append(f"  outside the layers: {r['outside_ns'] / 1e6:.3f} ms per step "
                         "(embedding, head, loss, data, collectives between layers)")  # fmt: skip
    return "\n".join(lines)
