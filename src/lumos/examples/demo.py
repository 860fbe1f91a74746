"""``lumos demo``: collect the bundled GPT workload on 2 CPU ranks, replay it, report.

:func:`run_demo` is the whole demo, one stage after another, each calling the public API:

1. **collect**: ``python -m torch.distributed.run --nproc-per-node 2 -m lumos.examples.gpt``
   under :func:`lumos.collect.run_collect` (gloo, Kineto + Execution Trace of 3 steps per rank).
   Without torch there is nothing to collect with: the demo copies the bundled recording of the
   same workload (:func:`lumos.examples_data.example_run_dir`, made by ``lumos collect``) into
   the output directory and replays that instead, and says so
   (:attr:`DemoResult.bundled_because`);
2. **replay**: build the execution graph and simulate it; compare with the measured steps;
3. **what-if**: the replayed run with communication, then compute, 2x faster (each with its
   step time and, where the run recorded memory, its peak allocated bytes);
4. **report**: ``report.html`` (and the figures as SVG) in the output directory.

Stages 2-4 need the replay API (:mod:`lumos.graph`, :mod:`lumos.sim`); until it is present the
demo stops after collection and says so (:attr:`DemoResult.stopped_because`).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos._io import atomic_write
from lumos.collect import CollectConfig, read_manifest, run_collect, torchrun_command
from lumos.collect._torch import torch_available
from lumos.collect.launch import clear_run_dir
from lumos.collect.manifest import MANIFEST_NAME
from lumos.errors import LumosError
from lumos.report.figures import write_figures
from lumos.report.html import write_report

__all__ = ["DEMO_STEPS", "DemoResult", "run_demo"]

DEMO_STEPS = 3
# Generous: a 2-rank run takes 5-40 s here, but a cold first import of torch can take a minute.
COLLECT_TIMEOUT_S = 240.0

Progress = Callable[[str], None]


@dataclass(kw_only=True)
class DemoResult:
    """What the demo produced; paths are absolute."""

    out_dir: Path
    run_dir: Path
    manifest: Path
    replay: Path | None = None
    report: Path | None = None
    figures: list[Path] = field(default_factory=list)
    stopped_because: str | None = None
    #: Set when the demo replayed the bundled recording instead of collecting a new run.
    bundled_because: str | None = None


def _quiet(_: str) -> None:
    return None


def _collect(out_dir: Path, progress: Progress) -> Path:
    run_dir = out_dir / "run"
    log = out_dir / "collect.log"
    progress("collecting the bundled GPT workload on 2 CPU ranks")
    config = CollectConfig(
        run_dir=run_dir, steps=DEMO_STEPS, warmup=1, wait=1, execution_trace=True
    )
    command = torchrun_command(
        "lumos.examples.gpt", ["--mode", "ddp", "--steps", str(config.total_steps)], nproc=2
    )
    env = dict(os.environ)
    # Two ranks share this machine's cores: one intra-op thread each keeps them from fighting.
    env.setdefault("OMP_NUM_THREADS", "1")
    result = run_collect(config, command, env=env, log=log, timeout_s=COLLECT_TIMEOUT_S)
    if result.exit_code != 0 or result.manifest is None:
        tail = _last_line(log)
        raise LumosError(
            f"the bundled workload failed with exit status {result.exit_code}; "
            f"its output is in {log}" + (f" (last line: {tail})" if tail else "")
        )
    manifest = read_manifest(run_dir)
    if not manifest.complete:
        raise LumosError(f"{result.manifest}: not every rank left its traces; see {log}")
    return result.manifest


BUNDLED_BECAUSE = (
    "torch is not installed, so nothing can be collected: replaying the bundled recording of "
    "the same workload (made by lumos collect) instead; pip install 'lumos[torch]' to collect "
    "a fresh run"
)


def _bundled(out_dir: Path, progress: Progress) -> Path:
    """Copy the bundled run (``run.json`` and its traces) to ``out_dir/run``; its manifest."""
    from lumos.examples_data import example_run_dir

    progress("torch is not installed: replaying the bundled recording instead of collecting")
    src = example_run_dir()
    run_dir = out_dir / "run"
    clear_run_dir(run_dir)  # a previous demo's collected files
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(src)
    for p in [src / MANIFEST_NAME, *(r.kineto for r in manifest.ranks)]:
        with atomic_write(run_dir / p.name, "wb") as f:
            f.write(p.read_bytes())
    return run_dir / MANIFEST_NAME


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def _replay_api() -> dict[str, Any] | None:
    """The replay entry points, or None while they are not in this install."""
    api: dict[str, Any] = {}
    wanted = (
        ("lumos.ingest.kineto", "read_kineto"),
        ("lumos.graph", "build_graph"),
        ("lumos.graph.model", "Workload"),
        ("lumos.sim", "simulate"),
        ("lumos.sim", "TracedCost"),
        ("lumos.report.metrics", "replay_summary"),
        ("lumos.report.perfetto", "write_chrome_trace"),
    )
    for module, name in wanted:
        # Prefer the public name; fall back to the defining module while exports settle.
        for mod in (module, f"{module}.build") if name == "build_graph" else (module,):
            try:
                api[name] = getattr(importlib.import_module(mod), name)
                break
            except (ImportError, AttributeError):
                continue
        else:
            return None
    return api


class _Faster:
    """What-if cost model: tasks of some kinds ``factor`` times faster than traced.

    Wraps a base cost model (the traced one): tasks whose :class:`~lumos.graph.model.TaskKind`
    is in ``kinds`` are divided by ``factor``; with ``comm``, so is every collective's transfer
    time. Delays between tasks (framework overhead) are left as traced.
    """

    def __init__(self, base: Any, kinds: tuple[int, ...], factor: float, *, comm: bool) -> None:
        self.base = base
        self.kinds = kinds
        self.factor = factor
        self.comm = comm

    def durations(self, graph: Any) -> Any:
        import numpy as np

        d = np.array(self.base.durations(graph), dtype=np.int64)
        sel = np.isin(graph.tasks.kind, self.kinds)
        d[sel] = np.rint(d[sel] / self.factor).astype(np.int64)
        return d

    def transfer_ns(self, workload: Any, groups: Any, durations: Any) -> Any:
        import numpy as np

        t = np.asarray(self.base.transfer_ns(workload, groups, durations), dtype=np.int64)
        return np.rint(t / self.factor).astype(np.int64) if self.comm else t


def _what_ifs(api: dict[str, Any]) -> list[tuple[str, _Faster]]:
    from lumos.graph.model import TaskKind as K

    traced = api["TracedCost"]()
    return [
        ("communication 2x faster", _Faster(traced, (K.COMM, K.CPU_COMM), 2.0, comm=True)),
        ("compute 2x faster", _Faster(traced, (K.CPU_OP, K.KERNEL), 2.0, comm=False)),
    ]


def _mean_step_ns(steps: list[dict[str, Any]], key: str) -> float:
    vals = [float(s[key]) for s in steps if s.get(key) is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def _peak(steps: list[dict[str, Any]]) -> int | None:
    """The largest predicted memory peak of the steps (None: the run recorded no memory)."""
    peaks = [s["predicted_peak_memory_bytes"] for s in steps
             if s.get("predicted_peak_memory_bytes") is not None]  # fmt: skip
    return max(peaks) if peaks else None


def _replay(out: Path, manifest_path: Path, api: dict[str, Any], say: Progress) -> dict[str, Any]:
    """Replay the collected run and one what-if; the ``replay.json`` content (rank 0's view)."""
    run = read_manifest(manifest_path)
    say(f"building the execution graph of {len(run.ranks)} ranks")
    graphs = [api["build_graph"](api["read_kineto"](r.kineto)) for r in run.ranks]
    workload = api["Workload"](tuple(graphs))
    say("replaying the run in the simulator")
    sim = api["simulate"](workload)
    summary = api["replay_summary"](sim, 0)
    api["write_chrome_trace"](out / "replay.perfetto.json", workload, sim)
    base_ns = _mean_step_ns(summary["steps"], "predicted_ns")
    what_if: list[dict[str, Any]] = [
        {"scenario": "replay (as traced)", "step_ns": round(base_ns), "speedup": 1.0,
         "peak_memory_bytes": _peak(summary["steps"])}
    ]  # fmt: skip
    for name, cost in _what_ifs(api):
        say(f"what-if: {name}")
        steps = api["replay_summary"](api["simulate"](workload, cost), 0)["steps"]
        wi_ns = _mean_step_ns(steps, "predicted_ns")
        what_if.append(
            {"scenario": name, "step_ns": round(wi_ns), "speedup": round(base_ns / wi_ns, 4),
             "peak_memory_bytes": _peak(steps)}
        )  # fmt: skip
    d = run.data
    rel = os.path.relpath
    perfetto = {f"measured, rank {r.rank}": rel(r.kineto, out) for r in run.ranks}
    perfetto["simulated (all ranks)"] = "replay.perfetto.json"
    return {
        **summary,
        "title": f"lumos demo: bundled GPT, {d.get('world_size')} ranks, "
        f"{d.get('backend')} on {d.get('device')}",
        "what_if": what_if,
        "perfetto": perfetto,
        "run": {
            k: d.get(k)
            for k in ("world_size", "backend", "device", "parallel", "schedule", "torch_version")
        },
    }


def run_demo(out_dir: str | os.PathLike[str], progress: Progress | None = None) -> DemoResult:
    """Run the demo into ``out_dir`` (created; a previous demo's files are replaced).

    ``progress`` receives one human-readable line as each stage starts. Without torch the
    bundled recording is replayed instead of a new collection (``bundled_because`` says so).
    Raises a :class:`~lumos.errors.LumosError` naming the log when the workload fails.
    """
    say = progress or _quiet
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    bundled_because = None if torch_available() else BUNDLED_BECAUSE
    manifest = _collect(out, say) if bundled_because is None else _bundled(out, say)
    result = DemoResult(out_dir=out, run_dir=manifest.parent, manifest=manifest,
                        bundled_because=bundled_because)  # fmt: skip
    api = _replay_api()
    if api is None:
        result.stopped_because = (
            "the replay API (lumos.graph.build_graph, lumos.sim.simulate) is not in this "
            "install yet; the collected traces are ready for it"
        )
        return result
    data = _replay(out, manifest, api, say)
    if bundled_because is not None:
        data["title"] += " (the bundled recording: torch is not installed)"
    result.replay = out / "replay.json"
    with atomic_write(result.replay) as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    say("writing the report")
    result.report = write_report(data, out / "report.html")
    result.figures = write_figures(data, out / "figures")
    return result
