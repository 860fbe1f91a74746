"""``lumos demo``: collect the bundled GPT workload on 2 CPU ranks, replay it, report.

:func:`run_demo` is the whole demo, one stage after another, each calling the public API:

1. **collect**: ``python -m torch.distributed.run --nproc-per-node 2 -m lumos.examples.gpt``
   under :func:`lumos.collect.run_collect` (gloo, Kineto + Execution Trace of 3 steps per rank);
2. **replay**: build the execution graph and simulate it; compare with the measured steps;
3. **what-if**: one estimate on the replayed graph;
4. **report**: ``report.html`` (and the figures as SVG) in the output directory.

Stages 2-4 need the replay API (:mod:`lumos.graph`, :mod:`lumos.sim`); until it is present the
demo stops after collection and says so (:attr:`DemoResult.stopped_because`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos.collect import CollectConfig, read_manifest, run_collect, torchrun_command
from lumos.collect._torch import require_torch
from lumos.errors import LumosError

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


def _quiet(_: str) -> None:
    return None


def _collect(out_dir: Path, progress: Progress) -> Path:
    run_dir = out_dir / "run"
    log = out_dir / "collect.log"
    progress(f"collecting the bundled GPT workload on 2 CPU ranks (log: {log})")
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


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def _replay_api() -> dict[str, Any] | None:
    """The replay entry points, or None while they are not in this install."""
    api: dict[str, Any] = {}
    for module, name in (("lumos.graph", "build_graph"), ("lumos.sim", "simulate")):
        try:
            api[name] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return None
    return api


def run_demo(out_dir: str | os.PathLike[str], progress: Progress | None = None) -> DemoResult:
    """Run the demo into ``out_dir`` (created; a previous demo's files are replaced).

    ``progress`` receives one human-readable line as each stage starts. Raises
    :class:`~lumos.errors.MissingDependencyError` without torch, and a
    :class:`~lumos.errors.LumosError` naming the log when the workload fails.
    """
    require_torch("lumos demo")
    say = progress or _quiet
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest = _collect(out, say)
    result = DemoResult(out_dir=out, run_dir=manifest.parent, manifest=manifest)
    api = _replay_api()
    if api is None:
        result.stopped_because = (
            "the replay API (lumos.graph.build_graph, lumos.sim.simulate) is not in this "
            "install yet; the collected traces are ready for it"
        )
        return result
    # Replay, what-if and report plug in here once the replay API has landed.
    result.stopped_because = "replay is not wired into the demo yet"
    return result
