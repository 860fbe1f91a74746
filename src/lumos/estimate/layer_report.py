"""What ``lumos layers`` shows: the layers found, their time per phase, what lies outside them.

:func:`layer_summary` returns a JSON-ready dict (``--json`` prints it):

==================  ==========================================================================
field               meaning
==================  ==========================================================================
``baseline``        every configuration key with its ``value`` and ``how`` it was found
``ranks[]``         per rank: ``layers``, ``microbatches``, ``steps`` and ``phases``
``phases``          per phase (``forward``, ``backward``, ``optimizer``): ``layers`` (blocks
                    per step), ``ops_per_layer``, ``layer_ns`` (recorded span of one layer,
                    mean over blocks and steps), ``total_ns`` (all layers of the phase per step)
``outside_ns``      per step, the recorded step time not spent inside any layer block
                    (embedding, head, loss, data loading, collectives issued between layers)
==================  ==========================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.estimate.baseline import Baseline
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import Workload

__all__ = ["format_layers", "layer_summary"]


def layer_summary(workload: Workload, base: Baseline) -> dict[str, Any]:
    """See the module docstring."""
    ranks = []
    for g, lm in zip(workload.graphs, base.layer_maps, strict=True):
        ts, end = g.tasks.ts_ns, g.tasks.ts_ns + g.tasks.dur_ns
        steps = max((x.step for x in lm.groups), default=0) + 1
        phases: dict[str, dict[str, Any]] = {}
        inside = 0
        for x in lm.layer_groups():
            spans = [int(end[b].max() - ts[b].min()) for b in x.blocks]
            inside += sum(spans)
            ph = phases.setdefault(x.phase, {"spans": [], "counts": [], "ops": []})
            ph["spans"] += spans
            ph["counts"].append(x.count)
            ph["ops"].append(x.period)
        out_phases = {}
        for name, ph in phases.items():
            n_groups_per_step = len(ph["counts"]) / steps
            out_phases[name] = {
                "layers": int(np.median(ph["counts"])),
                "ops_per_layer": int(np.median(ph["ops"])),
                "layer_ns": int(np.mean(ph["spans"])),
                "total_ns": int(np.sum(ph["spans"]) / steps),
                "groups_per_step": round(n_groups_per_step, 2),
            }
        a = g.annotations
        st = a.kind == int(AnnotationKind.STEP)
        step_ns = int(a.dur_ns[st].sum() / max(int(st.sum()), 1)) if st.any() else 0
        ranks.append({
            "rank": g.rank,
            "layers": lm.num_layers,
            "microbatches": lm.num_microbatches,
            "steps": steps,
            "step_ns": step_ns,
            "phases": out_phases,
            "outside_ns": max(step_ns - inside // steps, 0) if step_ns else None,
            "how": lm.how,
        })  # fmt: skip
    return {"baseline": base.to_dict(), "ranks": ranks}


def format_layers(doc: dict[str, Any]) -> str:
    """The summary as text: the configuration, then per rank a table of phases."""
    lines = ["baseline configuration found in the trace:"]
    for key, v in doc["baseline"].items():
        value = v["value"] if v["value"] > 0 else "not found"
        lines.append(f"  {key:<16}{value!s:<8}{v['how']}")
    for r in doc["ranks"]:
        lines.append("")
        lines.append(f"rank {r['rank']}: {r['layers']} layers, {r['microbatches']} micro-batch(es), "
                     f"{r['steps']} step(s) of {r['step_ns'] / 1e6:.3f} ms ({r['how']})")  # fmt: skip
        lines.append(f"  {'phase':<11}{'layers':>7}{'ops/layer':>11}{'ms/layer':>10}"
                     f"{'ms/step':>10}")  # fmt: skip
        for name, ph in r["phases"].items():
            lines.append(f"  {name:<11}{ph['layers']:>7}{ph['ops_per_layer']:>11}"
                         f"{ph['layer_ns'] / 1e6:>10.3f}{ph['total_ns'] / 1e6:>10.3f}")  # fmt: skip
        if r["outside_ns"] is not None:
            lines.append(f"  outside the layers: {r['outside_ns'] / 1e6:.3f} ms per step "
                         "(embedding, head, loss, data, collectives between layers)")  # fmt: skip
    return "\n".join(lines)
