"""``convert``: a PyTorch run (Kineto, optionally with PyTorch ETs) -> one Chakra ET per rank.

Each rank's Kineto trace becomes an execution graph (:func:`lumos.graph.build.build_graph`: stream
order, launch, inter-stream and sync edges, calibrated delays), then a Chakra trace
(:func:`lumos.chakra.mapping.to_chakra`), written to ``<OUT_PREFIX>.<rank>.et``. When a PyTorch ET
of the same rank is present it is linked to the Kineto trace (:func:`lumos.link.link`) and the
CPU op nodes it matches carry the ET's ``inputs``/``outputs`` (values, shapes, types as JSON
text) and ``op_schema``, ``rf_id``, ``et_id`` attributes; ops it does not match are converted
all the same, and the link's match rate is reported.

Ranks: a Kineto trace's rank is its ``distributedInfo.rank`` (else the ``rank3``/``worker3``/last
number of its file name; a single trace is rank 0 unless it says otherwise). ETs pair with
Kineto traces by the same rule; one ET and one Kineto trace always pair.

``compat="upstream"`` (:func:`upstream_compat`) keeps only the dependency structure upstream's
Chakra converter writes (CPU order, launches, inter-thread edges): no same-stream order, no
inter-stream (event) edges, no syncs (edges or waits), no edge out of an NCCL kernel. The file
then replays short, which is the point: it shows what that structure costs. (lumos's replay
still runs each stream one task at a time, as ASTRA-sim runs one GPU compute node at a time,
so the missing same-stream edges cost less than they would in a purely dependency-driven
simulator.)

Delay nodes (default on, except with ``compat="upstream"``): each positive edge delay (CPU
overhead between ops, launch latency) is also written as a synthetic ``delay:<kind>`` COMP node
on its dependency (:mod:`lumos.chakra.mapping_delay`). Chakra has no field for delays, so
without them a consumer that honours only the dependencies and ``duration_micros`` replays
every gap as 0. They are for dependency-driven consumers: ASTRA-sim runs each NPU's nodes on one
CPU, one compute and one communication slot, so delay nodes of several threads queue behind
each other there and these files do not reproduce lumos's replay in it (the 8-rank DLRM run
finishes 23-27 % early there, measured with its analytical binary; a run with process groups
or host-side collectives does not finish at all: METADATA node, collectives on the CPU);
``lumos convert --target astra-sim``
(:mod:`lumos.convert_astra`) writes files that do. lumos itself reads the exact delays either
way (``from_chakra`` drops the synthetic nodes). ``delay_nodes=False`` (``--no-delay-nodes``)
writes only the task nodes.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from lumos._io import atomic_write
from lumos.chakra.attrs import Attr, IOInfo
from lumos.chakra.io import write_chakra
from lumos.chakra.mapping import to_chakra
from lumos.chakra.trace import ChakraTrace
from lumos.errors import ConfigError, InputError, NoTracesError
from lumos.graph.build import build_graph
from lumos.graph.model import DepKind, ExecGraph, TaskKind
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.parallel import map_ranks

__all__ = [
    "COMPAT_MODES",
    "ConvertReport",
    "RankJob",
    "RankReport",
    "convert",
    "convert_graph",
    "convert_rank",
    "delay_nodes_for",
    "plan_run",
    "refs_by_rank",
    "upstream_compat",
    "write_report",
]

#: Accepted values of ``compat``.
COMPAT_MODES = ("upstream",)
_UPSTREAM_DROPS = (DepKind.INTRA_STREAM, DepKind.INTER_STREAM, DepKind.SYNC)
_NAMED_RANK = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
_LAST_INT = re.compile(r"(\d+)(?!.*\d)")
_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


@dataclass(frozen=True)
class RankJob:
    """One rank to convert: its Kineto trace, its ET (or None), where to write."""

    rank: int
    kineto: TraceRef
    et: TraceRef | None
    out_path: str
    compat: str | None = None
    delay_nodes: bool = True


@dataclass(frozen=True)
class RankReport:
    """What converting one rank did (``match_rate`` is None without an ET)."""

    rank: int
    kineto: str
    et: str | None
    output: str
    events: int
    tasks: int
    edges: int
    waits: int
    nodes: int
    data_deps: int
    match_rate: float | None
    ops_with_et: int
    seconds: float
    diagnostics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConvertReport:
    """All ranks of one conversion."""

    out_prefix: str
    compat: str | None
    ranks: tuple[RankReport, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_prefix": self.out_prefix,
            "compat": self.compat,
            "ranks": [asdict(r) for r in self.ranks],
        }


# ---------------------------------------------------------------------------------------------
# Pure part: graph (+ linked ET) -> Chakra


def upstream_compat(graph: ExecGraph, *, keep_delays: bool = True) -> ExecGraph:
    """The graph with upstream's simpler dependency structure (see the module docstring).

    The delays of the edges kept stay (they are lumos attributes, invisible to Chakra-only
    tools for ANY file); ``keep_delays=False`` zeroes them too, which is what a consumer
    that reads only ``data_deps`` and durations replays.
    """
    g = graph.drop_edges(_UPSTREAM_DROPS).drop_waits()
    comm_src = g.tasks.kind[g.edges.src] == TaskKind.COMM
    edges = g.edges.take(~comm_src)
    if not keep_delays:
        edges = edges.replace(delay_ns=np.zeros(len(edges), dtype=np.int64))
    return g.replace(edges=edges)


def _et_extras(graph: ExecGraph, linked: Any) -> tuple[dict, dict]:
    """``(io, task_attrs)`` for the CPU op tasks the ET link matched."""
    host = linked.host
    ev = graph.tasks.event_idx
    n_ev = linked.event_node_idx.shape[0]
    cpu = np.flatnonzero((graph.tasks.kind == TaskKind.CPU_OP) & (ev >= 0) & (ev < n_ev))
    node = linked.event_node_idx[ev[cpu]]
    io: dict[int, tuple[IOInfo | None, IOInfo | None]] = {}
    attrs: dict[int, list[Attr]] = {}
    for t, k in zip(cpu[node >= 0].tolist(), node[node >= 0].tolist(), strict=True):
        pair = []
        for info in (host.inputs(k), host.outputs(k)):
            pair.append(
                IOInfo(
                    values=json.dumps(info.values, default=str),
                    shapes=json.dumps(info.shapes, default=str),
                    types=json.dumps(info.types, default=str),
                )
            )
        io[t] = (pair[0], pair[1])
        extra = [
            Attr("et_id", int(host.node_id[k]), "int64_val"),
            Attr("rf_id", int(host.rf_id[k]), "int64_val"),
        ]
        schema = host.op_schemas[int(host.op_schema_idx[k])] if host.op_schema_idx[k] >= 0 else ""
        if schema:
            extra.append(Attr("op_schema", schema, "string_val"))
        attrs[t] = extra
    return io, attrs


def delay_nodes_for(compat: str | None, delay_nodes: bool | None) -> bool:
    """Whether delay nodes are written: as asked, else on unless ``compat`` is set."""
    return compat is None if delay_nodes is None else bool(delay_nodes)


def convert_graph(
    graph: ExecGraph,
    linked: Any = None,
    compat: str | None = None,
    *,
    delay_nodes: bool | None = None,
) -> tuple[ChakraTrace, int]:
    """``(trace, ops carrying ET data)``: one rank's graph as Chakra, with the linked ET's
    inputs/outputs and schema on matched CPU ops (``linked`` a :class:`lumos.link.LinkedTrace`),
    and delay nodes unless ``delay_nodes`` is false (default: see :func:`delay_nodes_for`)."""
    if compat is not None and compat not in COMPAT_MODES:
        raise ConfigError(f"unknown compat mode {compat!r} (choose from {', '.join(COMPAT_MODES)})")
    g = upstream_compat(graph) if compat == "upstream" else graph
    io, attrs = _et_extras(g, linked) if linked is not None else ({}, {})
    delays = delay_nodes_for(compat, delay_nodes)
    return to_chakra(g, io=io, task_attrs=attrs, delay_nodes=delays), len(io)


# ---------------------------------------------------------------------------------------------
# Files: plan, convert one rank (in a worker), convert a run


def _name_rank(ref: TraceRef) -> int:
    name = PurePosixPath(ref.member or Path(ref.path).name).name
    m = _NAMED_RANK.search(name) or _LAST_INT.search(name.split(".")[0])
    return int(m.group(1)) if m else -1


def _rank_of(ref: TraceRef, many: bool) -> int:
    m = _DIST_RANK.search(ref.read()[: 1 << 20])
    if m:
        if len(m.group(1)) > 9:
            rank = m.group(1).decode()
            raise InputError(ref.where, f"distributedInfo.rank {rank} is out of range")
        return int(m.group(1))
    if not many:
        return 0
    r = _name_rank(ref)
    if r < 0:
        raise InputError(ref.where, "cannot tell its rank (no distributedInfo, no rank in name)")
    return r


def refs_by_rank(refs: list[TraceRef], what: str) -> dict[int, TraceRef]:
    """``refs`` by rank: each one's ``distributedInfo.rank``, else (several refs) the rank its
    name says; ``what`` names them in the error two of them for one rank raise."""
    out: dict[int, TraceRef] = {}
    for ref in refs:
        r = _rank_of(ref, len(refs) > 1)
        if r in out:
            raise InputError(ref.where, f"a second {what} for rank {r} (first: {out[r].where})")
        out[r] = ref
    return out


def plan_run(
    paths: Sequence[str | os.PathLike[str]],
    out_prefix: str,
    compat: str | None = None,
    delay_nodes: bool | None = None,
) -> list[RankJob]:
    """One :class:`RankJob` per Kineto trace under ``paths``, each paired with its rank's ET."""
    refs = expand_paths(list(paths))
    kin = [r for r in refs if r.kind == "kineto"]
    ets = [r for r in refs if r.kind == "pytorch_et"]
    if not kin:
        raise NoTracesError(", ".join(str(p) for p in paths), "no Kineto trace to convert")
    if len(kin) == 1 and len(ets) == 1:
        k = refs_by_rank(kin, "Kineto trace")
        rank = next(iter(k))
        et_of = {rank: ets[0]}
    else:
        k = refs_by_rank(kin, "Kineto trace")
        et_of = refs_by_rank(ets, "PyTorch ET") if ets else {}
    delays = delay_nodes_for(compat, delay_nodes)
    return [RankJob(r, k[r], et_of.get(r), f"{out_prefix}.{r}.et", compat, delays)
            for r in sorted(k)]  # fmt: skip


def convert_rank(job: RankJob) -> RankReport:
    """Read, build, link, map and write one rank (runs in a worker process)."""
    from lumos.ingest.kineto import trace_from_bytes

    t0 = time.perf_counter()
    kineto = trace_from_bytes(job.kineto.payload(), job.kineto.where)
    graph = build_graph(kineto)
    linked = None
    if job.et is not None:
        from lumos.ingest.pytorch_et import read_pytorch_et
        from lumos.link import link

        linked = link(read_pytorch_et(job.et.path, job.et.member), kineto)
    trace, with_et = convert_graph(graph, linked, job.compat, delay_nodes=job.delay_nodes)
    write_chakra(trace, job.out_path)
    diag = graph.diagnostics.to_dict()
    if linked is not None:
        diag.update({f"link:{k}": v for k, v in linked.diagnostics.to_dict().items()})
    return RankReport(
        rank=job.rank,
        kineto=job.kineto.where,
        et=job.et.where if job.et else None,
        output=job.out_path,
        events=len(kineto.events),
        tasks=graph.num_tasks,
        edges=graph.num_edges,
        waits=len(graph.waits),
        nodes=trace.num_nodes,
        data_deps=int(trace.data_deps.size),
        match_rate=float(linked.report.match_rate) if linked is not None else None,
        ops_with_et=with_et,
        seconds=round(time.perf_counter() - t0, 3),
        diagnostics=diag,
    )


def convert(
    paths: Sequence[str | os.PathLike[str]],
    out_prefix: str | os.PathLike[str],
    *,
    compat: str | None = None,
    delay_nodes: bool | None = None,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
    jobs: Sequence[RankJob] | None = None,
) -> ConvertReport:
    """Convert every rank under ``paths`` to ``<out_prefix>.<rank>.et`` (ranks in parallel
    processes, or on a Dask cluster), and write ``<out_prefix>.convert.json``. ``jobs`` (from
    :func:`plan_run` with the same arguments) skips planning again."""
    if compat is not None and compat not in COMPAT_MODES:
        raise ConfigError(f"unknown compat mode {compat!r} (choose from {', '.join(COMPAT_MODES)})")
    prefix = str(out_prefix)
    jobs = list(jobs) if jobs is not None else plan_run(paths, prefix, compat, delay_nodes)
    reports = map_ranks(convert_rank, jobs, workers=workers, dask_address=dask_address,
                        on_done=on_done)  # fmt: skip
    report = ConvertReport(prefix, compat, tuple(reports))
    write_report(report, f"{prefix}.convert.json")
    return report


def write_report(report: ConvertReport, path: str | os.PathLike[str]) -> Path:
    """The JSON report (atomic)."""
    p = Path(path)
    with atomic_write(p) as f:
        json.dump(report.to_dict(), f, indent=1, sort_keys=True)
        f.write("\n")
    return p
