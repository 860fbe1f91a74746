"""``advise``: the verdict on a replayed run and the what-ifs that pay, as JSON and Markdown.

:func:`advise` replays the workload once (the baseline), judges it
(:func:`lumos.advise.verdict.verdict`), runs the standard what-ifs
(:func:`lumos.advise.opportunities.opportunities`) and returns an :class:`Advice`;
:func:`write_advice` writes ``DIR/advice.json`` and ``DIR/advice.md`` (atomically, as a set).

``advice.json``::

    {"format": "lumos.advice", "version": 1, "sources": [...],
     "bound": "host" | "compute" | "communication" | "straggler" | "other",
     "device": "gpu" | "cpu",               # where the job computes
     "step_ns": int,                        # replayed baseline: mean per step, slowest rank
     "slowest_rank": int,
     "shares": {"<rank>": {"host": f, "compute": f, "communication": f, "straggler": f,
                           "other": f}},    # of the rank's critical path in its step window
     "late_rank": null | {"rank", "times_last", "collectives", "late_ns",
                          "late_ns_per_step", "share"},
     "responsible": {"ops": [...], "kernels": [...]},   # top of the slowest rank's path
     "opportunities": [{"name", "step_ns", "gain_pct", "command"}],   # largest gain first
     "not_applicable": [{"name", "reason"}]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs
from lumos.advise.opportunities import Opportunity, opportunities
from lumos.advise.verdict import CAUSES, Verdict, verdict
from lumos.errors import ConfigError
from lumos.estimate.run import job_step_ns
from lumos.graph.model import Workload
from lumos.replay import replay

__all__ = ["Advice", "advice_markdown", "advise", "headline", "replay_headline", "write_advice"]

_WHY_CPU = {
    "host": "framework and Python overhead between ops, on a CPU-only job",
    "compute": "the step is spent computing, on the CPU",
}
_WHY = {
    "host": "the GPU waits for the CPU to launch work",
    "compute": "the step is spent computing",
    "communication": "the step waits for communication",
    "straggler": "ranks wait for another rank",
    "other": "the step waits on synchronization or between streams",
}


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` found (see the module docstring for the JSON)."""

    sources: tuple[str, ...]
    step_ns: int
    verdict: Verdict
    opportunities: tuple[Opportunity, ...]
    not_applicable: tuple[dict[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "format": "lumos.advice",
            "version": 1,
            "sources": list(self.sources),
            "bound": v.bound,
            "device": v.device,
            "step_ns": self.step_ns,
            "slowest_rank": v.slowest,
            "shares": {str(r): {k: round(s[k], 4) for k in CAUSES} for r, s in v.shares.items()},
            "late_rank": v.late,
            "responsible": {"ops": v.top_ops, "kernels": v.top_kernels},
            "opportunities": [o.to_dict() for o in self.opportunities],
            "not_applicable": list(self.not_applicable),
        }


def advise(
    workload: Workload,
    sources: Sequence[str],
    *,
    topology: str | None = None,
    comm_model: Callable[..., Any] | None = None,
    on_done: Callable[[], None] | None = None,
) -> Advice:
    """Judge ``workload`` and rank the standard what-ifs (``comm_model`` and ``topology``:
    the network for ``dp_2x``, as :func:`lumos.estimate.estimate` takes it)."""
    rep = replay(workload)
    step_ns = job_step_ns(rep.summaries)  # the replay's: no second simulation of the baseline
    v = verdict(rep.result, list(rep.summaries), workload, step_ns)
    if on_done:
        on_done()
    values: dict[str, Any] = {}
    try:
        from lumos.estimate.baseline import detect_baseline

        values = dict(detect_baseline(workload, None).values)
    except ConfigError:
        values = {}
    found, skipped = opportunities(workload, step_ns, sources, late=v.late,
                                   baseline_values=values, topology=topology,
                                   comm_model=comm_model, on_done=on_done)  # fmt: skip
    return Advice(tuple(sources), step_ns, v, tuple(found), tuple(skipped))


def replay_headline(result: Any, summaries: Sequence[dict[str, Any]], workload: Workload) -> str:
    """The verdict line of a replay (:func:`headline`, no what-if simulated), with the step
    ``lumos advise`` reports (:func:`lumos.estimate.run.job_step_ns`)."""
    step_ns = job_step_ns(summaries) if summaries else 0
    v = verdict(result, list(summaries), workload, step_ns)
    doc = {"bound": v.bound, "device": v.device, "slowest_rank": v.slowest, "step_ns": step_ns, "late_rank": v.late,
           "shares": {str(r): s for r, s in v.shares.items()}}  # fmt: skip
    return headline(doc)


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def headline(doc: dict[str, Any]) -> str:
    """The one-line verdict: ``bound: host (the GPU waits ...; 62 % of rank 1's step)``."""
    r = str(doc["slowest_rank"])
    share = doc["shares"][r][doc["bound"]]
    why = (_WHY_CPU if doc.get("device") == "cpu" else {}).get(doc["bound"], _WHY[doc["bound"]])
    line = (f"bound: {doc['bound']} ({why}; {_pct(share)} of the critical path "
            f"of rank {r}, the slowest, {doc['step_ns'] / 1e6:.3f} ms per step)")  # fmt: skip
    late = doc.get("late_rank")
    if late:
        line += (f"; rank {late['rank']} arrives last at {late['times_last']} of "
                 f"{late['collectives']} collectives, {late['late_ns_per_step'] / 1e6:.3f} ms "
                 "per step late")  # fmt: skip
    return line


def advice_markdown(doc: dict[str, Any]) -> str:
    """``advice.md``: the verdict, the shares, who is responsible, the opportunities."""
    out = ["# lumos advise", "", f"**{headline(doc)}**", "",
           "## Where the step goes (critical path, per rank)", "",
           "| rank | " + " | ".join(CAUSES) + " |", "|---" * (len(CAUSES) + 1) + "|"]  # fmt: skip
    for r, s in doc["shares"].items():
        out.append(f"| {r} | " + " | ".join(_pct(s[k]) for k in CAUSES) + " |")
    resp = doc["responsible"]
    if resp["ops"] or resp["kernels"]:
        out += ["", f"## Responsible (rank {doc['slowest_rank']}'s critical path)", ""]
        for o in resp["ops"]:
            out.append(f"- op `{o['op']}`: {_pct(o['share'])}")
        for k in resp["kernels"]:
            name = k.get("kernel", "")
            out.append(f"- kernel `{name[:100]}`: {_pct(k.get('share', 0.0))}")
    out += ["", "## Opportunities (simulated, largest gain first)", "",
            "| what-if | step ms | gain | reproduce |", "|---|---|---|---|"]  # fmt: skip
    for o in doc["opportunities"]:
        out.append(f"| {o['name']} | {o['step_ns'] / 1e6:.3f} | {o['gain_pct']:+.1f} % | "
                   f"`{o['command']}` |")  # fmt: skip
    if doc["not_applicable"]:
        out += ["", "Not applicable here:", ""]
        out += [f"- {x['name']}: {x['reason']}" for x in doc["not_applicable"]]
    return "\n".join(out) + "\n"


def write_advice(advice: Advice, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``advice.json`` and ``advice.md`` into ``out_dir``; returns their paths."""
    doc = advice.to_dict()
    with atomic_outputs(out_dir, "advice.json") as tmp:
        (tmp / "advice.json").write_text(json.dumps(doc, indent=1, sort_keys=True,
                                                    allow_nan=False) + "\n")  # fmt: skip
        (tmp / "advice.md").write_text(advice_markdown(doc))
    out = Path(out_dir)
    return {"json": out / "advice.json", "md": out / "advice.md"}
