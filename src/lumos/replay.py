"""``replay``: trace(s) -> execution graph(s) -> simulation -> measured-vs-predicted summary.

The workflow behind ``lumos replay``. Ablations drop one dependency kind (``without``) to show
what it is worth; ``scale`` re-times tasks whose name matches a regular expression ("what if
this kernel ran 2x faster"). Per-rank graphs are built in parallel processes.
"""

from __future__ import annotations

import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs, atomic_write
from lumos.chakra.trace import ChakraTrace
from lumos.diagnostics import Diagnostics
from lumos.errors import ConfigError, LumosError, NoTracesError
from lumos.graph.build import align_ranks, build_graph
from lumos.graph.edits import scale_by_name
from lumos.graph.edits_class import scale_class
from lumos.graph.model import DepKind, ExecGraph, Workload
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.ingest.kineto import trace_from_bytes
from lumos.replay_ranks import rank_summaries
from lumos.report.analysis_ranks import analyze
from lumos.report.perfetto import write_chrome_trace
from lumos.report.table import Table
from lumos.shared_builds import build_ranks
from lumos.sim import simulate
from lumos.sim.cost import CostModel
from lumos.sim.result import SimResult

__all__ = [
    "ABLATIONS",
    "Replay",
    "apply_edits",
    "build_workload",
    "replay",
    "write_replay",
]

#: Names accepted by ``without`` and what each removes. ``launch`` keeps the launches as the
#: record of when GPU work was submitted (a synchronization still waits only for work launched
#: before it) but no GPU task waits for its launch: how much the CPU side paces the GPU.
ABLATIONS: dict[str, tuple[DepKind, ...]] = {
    "intra_thread": (DepKind.INTRA_THREAD,),
    "inter_thread": (DepKind.INTER_THREAD,),
    "launch": (DepKind.LAUNCH,),
    "intra_stream": (DepKind.INTRA_STREAM,),
    "inter_stream": (DepKind.INTER_STREAM,),
    "sync": (DepKind.SYNC,),  # also removes the runtime waits
    "collective": (DepKind.COLLECTIVE,),
    "p2p": (DepKind.P2P,),
}


@dataclass(frozen=True, eq=False)
class Replay:
    """A finished replay: the (edited) workload, the simulation and one summary per rank;
    ``recorded`` is the workload as built from the traces (the measured side)."""

    workload: Workload
    result: SimResult
    summaries: tuple[dict[str, Any], ...]
    without: tuple[str, ...] = ()
    scale: tuple[tuple[str, float], ...] = ()
    sources: tuple[str, ...] = field(default=())
    recorded: Workload | None = None

    def __repr__(self) -> str:
        steps = sum(len(s.get("steps") or ()) for s in self.summaries)
        what_if = [f"{p}={f:g}" for p, f in self.scale] + [f"without {w}" for w in self.without]
        return (f"Replay({len(self.summaries)} rank(s), {steps} steps, makespan "
                f"{self.result.makespan_ns / 1e6:.3f} ms"
                + (f", {', '.join(what_if)}" if what_if else "") + ")")  # fmt: skip

    def analysis(self) -> dict[str, Table]:
        """The analysis tables (:func:`lumos.report.analysis_ranks.analyze`) of the recording
        (``measured``) and of this replay (``predicted``)."""
        return analyze(self.recorded or self.workload, self.result)

    def to_dict(self) -> dict[str, Any]:
        """The ``replay.json`` document (single rank: the rank's summary at top level)."""
        base: dict[str, Any] = {
            "sources": list(self.sources),
            "without": list(self.without),
            "scale": [{"pattern": p, "factor": f} for p, f in self.scale],
        }
        if len(self.summaries) == 1:
            return {**base, **self.summaries[0]}
        return {**base, **self.summaries[0], "ranks": list(self.summaries)}


def _build_one(ref: TraceRef) -> ExecGraph:
    try:
        if ref.kind == "chakra":
            return _chakra_graph(ref)
        return build_graph(trace_from_bytes(ref.payload(), ref.where))
    except LumosError as exc:
        if ref.where not in str(exc):  # say which rank's file, whatever stage failed
            exc.args = (f"{ref.where}: {exc}", *exc.args[1:])
        raise


def _chakra_graph(ref: TraceRef) -> ExecGraph:
    """A Chakra ET's graph (lumos-written: exact; foreign: guessed, see chakra.mapping)."""
    from lumos.chakra.io import read_chakra
    from lumos.chakra.mapping import from_chakra
    from lumos.errors import InputError

    if ref.member is not None:
        raise InputError(ref.where, "Chakra ETs inside archives are not supported; extract it")
    trace = read_chakra(ref.path)
    if not isinstance(trace, ChakraTrace):  # pragma: no cover - a file path gives one trace
        raise InputError(ref.where, "expected one Chakra file")
    return from_chakra(trace)


def build_workload(
    paths: Sequence[str | os.PathLike[str] | TraceRef],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> tuple[Workload, tuple[str, ...]]:
    """Read every Kineto trace (or Chakra ET) under ``paths`` and build one graph per rank, in
    parallel, once per distinct trace (:mod:`lumos.shared_builds`: ranks that recorded the same
    bytes but for their rank share one build). A Chakra ET written by lumos gives back the exact
    graph it was converted from. ``paths`` may be the traces :func:`expand_paths` found."""
    found = [r for p in paths for r in ([p] if isinstance(p, TraceRef) else expand_paths([p]))]
    refs = [r for r in found if r.kind in ("kineto", "chakra")]
    if not refs:
        raise NoTracesError(
            ", ".join(str(p) for p in paths), "no Kineto trace or Chakra ET to replay"
        )
    graphs, _ = build_ranks(
        _build_one, refs, workers=workers, dask_address=dask_address, on_done=on_done
    )
    graphs = _settle_world_size(graphs)
    ranks = [g.rank for g in graphs]
    sizes = sorted({g.world_size for g in graphs})
    if len(sizes) > 1:
        which = ", ".join(
            f"{r.where} (world size {g.world_size})" for r, g in zip(refs, graphs, strict=True)
        )
        raise ConfigError(f"traces of different jobs cannot replay together: {which}")
    if len(set(ranks)) != len(ranks):
        raise ConfigError(
            "several traces claim the same rank "
            f"({', '.join(r.where for r in refs)}); replay one rank's file at a time"
        )
    return Workload(align_ranks(graphs), _partial(graphs)), tuple(r.where for r in refs)


def _settle_world_size(graphs: list[ExecGraph]) -> list[ExecGraph]:
    """Graphs of Chakra ETs that state no world size (upstream's: each guessed its rank + 1)
    take the largest world size of the set, so that the ranks of one job replay together."""
    from lumos.chakra.mapping_foreign import WORLD_SIZE_GUESSED

    world = max((g.world_size for g in graphs), default=1)
    return [g.replace(world_size=world) if g.diagnostics.count(WORLD_SIZE_GUESSED) else g
            for g in graphs]  # fmt: skip


def _partial(graphs: Sequence[ExecGraph]) -> Diagnostics:
    """A counted warning naming the ranks of the job that were not traced (a partial workload:
    collectives with those peers keep their traced timing, waiting included)."""
    diag = Diagnostics()
    world = max(g.world_size for g in graphs)
    missing = sorted(set(range(world)) - {g.rank for g in graphs})
    if missing and len(graphs) > 1:
        diag.warn("partial_workload_missing_ranks", _ranges(missing), len(missing))
    return diag


def _ranges(ranks: Sequence[int]) -> str:
    """``[2, 3, 4, 9]`` -> ``"2-4, 9"``."""
    out: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if r is not None:
            start = prev = r
    return ", ".join(out)


def parse_scale(specs: Iterable[str]) -> tuple[tuple[str, float], ...]:
    """``["REGEX=FACTOR", ...]`` -> ``((regex, factor), ...)``; raises ConfigError."""
    out = []
    for spec in specs:
        pattern, sep, factor = spec.rpartition("=")
        if not sep or not pattern:
            raise ConfigError(f"--scale {spec!r}: expected REGEX=FACTOR, e.g. 'gemm=0.5'")
        try:
            f = float(factor)
            re.compile(pattern)
        except ValueError:
            raise ConfigError(f"--scale {spec!r}: FACTOR must be a number") from None
        except re.error as exc:
            raise ConfigError(f"--scale {spec!r}: bad regular expression: {exc}") from None
        if not f >= 0:
            raise ConfigError(f"--scale {spec!r}: FACTOR must be >= 0")
        out.append((pattern, f))
    return tuple(out)


def apply_edits(
    graph: ExecGraph, without: Iterable[str] = (), scale: Iterable[tuple[str, float]] = ()
) -> ExecGraph:
    """A new graph with dependency kinds removed and matching tasks re-timed: ``scale`` holds
    name patterns (:func:`~lumos.graph.edits.scale_by_name`) and class selectors ``@compute``,
    ``@comm``, ``@host`` (:func:`~lumos.graph.edits_class.scale_class`)."""
    kinds: list[DepKind] = []
    drop_waits = False
    for name in without:
        if name not in ABLATIONS:
            raise ConfigError(
                f"unknown dependency kind {name!r} (choose from {', '.join(ABLATIONS)})"
            )
        kinds.extend(ABLATIONS[name])
        drop_waits |= name == "sync"
    g = graph.drop_edges(kinds) if kinds else graph
    if drop_waits:
        g = g.drop_waits()
    scale = list(scale)
    for selector, f in (x for x in scale if x[0].startswith("@")):
        g, _ = scale_class(g, selector, f)
    names = [x for x in scale if not x[0].startswith("@")]
    if names:
        g, _ = scale_by_name(g, names)
    return g


def replay(
    workload: Workload | ExecGraph,
    *,
    without: Sequence[str] = (),
    scale: Sequence[tuple[str, float]] = (),
    cost_model: CostModel | None = None,
    sources: Sequence[str] = (),
) -> Replay:
    """Simulate (an edited copy of) a workload and summarize every rank."""
    w = Workload.of(workload)
    cut = tuple(k for k in without if k != "launch")
    edited = w.replace_graphs(apply_edits(g, cut, scale) for g in w.graphs)
    result = simulate(edited, cost_model, launch_paces="launch" not in without)
    summaries = rank_summaries(result, w.graphs)
    return Replay(
        edited, result, summaries, tuple(without), tuple(scale), tuple(sources), recorded=w
    )


def write_replay(
    rep: Replay, out_dir: str | os.PathLike[str], *, perfetto: str = "replay.perfetto.json"
) -> dict[str, Path]:
    """Write ``replay.json``, the Perfetto trace (``perfetto``: a file name in ``out_dir``,
    ``replay.perfetto.json`` by default, which users' scripts rely on; one ending in ``.json.gz``
    is gzip-compressed, about a tenth of the size) and ``sm_util.csv`` into ``out_dir``,
    atomically as a set (``replay.json``, which names the others, lands last)."""
    out = Path(out_dir)
    if Path(perfetto).name != perfetto or not perfetto.endswith((".json", ".json.gz")):
        raise ConfigError(f"--perfetto {perfetto!r}: a file name ending in .json or .json.gz")
    names = {"replay": "replay.json", "perfetto": perfetto, "sm_util": "sm_util.csv"}
    doc = rep.to_dict()
    doc["perfetto"] = {"replay": names["perfetto"]}
    with atomic_outputs(out, names["replay"]) as tmp:
        with atomic_write(tmp / names["replay"]) as f:
            # one string, one write (json.dump writes each of its many pieces)
            f.write(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")
        write_chrome_trace(tmp / names["perfetto"], rep.workload, rep.result, recorded=rep.recorded)
        with atomic_write(tmp / names["sm_util"]) as f:
            f.write("rank,bin,start_ns,measured,predicted\n")
            for s in rep.summaries:
                sm = s["sm_util"]
                meas, pred = sm["measured"], sm["predicted"]
                for i in range(max(len(meas), len(pred))):
                    m = f"{meas[i]:.4f}" if i < len(meas) else ""
                    p = f"{pred[i]:.4f}" if i < len(pred) else ""
                    f.write(f"{s['rank']},{i},{i * sm['bin_ns']},{m},{p}\n")
    return {k: out / v for k, v in names.items()}


class _CallableModule(types.ModuleType):
    """``lumos.replay`` is both this module and the function :func:`replay`: importing the
    module (``from lumos.replay import build_workload``) makes the package attribute the
    module, so calling the module calls the function and ``lumos.replay(graph)`` works either
    way."""

    def __call__(self, *args: Any, **kwargs: Any) -> Replay:
        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
