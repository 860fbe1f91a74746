"""``lumos convert ... --target astra-sim``: a PyTorch run -> what ASTRA-sim's analytical backend
runs: ``<prefix>.<rank>.et`` (see :mod:`lumos.astra_target`), and beside them ``network.yml``,
``system.json``, ``remote_memory.json`` (:mod:`lumos.cost.astra_files`), ``comm_group.json``
when some collective runs on a subset of the ranks, and ``<prefix>.convert.json``.

The network is fitted to the run's own collectives (:func:`~lumos.cost.astra_files.
fit_astra_network` on every collective's traced transfer): a ring of ``world_size`` NPUs, one
chunk, 10 ns endpoint delay, local memory 50 GB/s. A run whose collectives have no sizes (gloo
on CPU without recorded shapes) gets :data:`DEFAULT_NETWORK_FOR_UNSIZED` and sizes that take the
traced transfer time on it (``astra_comm_size_from_time`` in the diagnostics).

Every rank is needed at once (collectives are ordered and sized across ranks), so the ranks are
built in parallel and then replayed together by lumos's simulator (traced costs); the ETs follow
that replay. PyTorch ETs given with the Kineto traces are not used by this target.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lumos._io import atomic_write
from lumos.astra_target import comm_samples, to_astra
from lumos.chakra.io import write_chakra
from lumos.cost.astra_files import AstraNetwork, fit_astra_network, write_astra_configs
from lumos.errors import ConfigError
from lumos.graph.model import Workload
from lumos.replay import build_workload
from lumos.report.metrics import replay_summary
from lumos.sim import simulate

__all__ = ["DEFAULT_NETWORK_FOR_UNSIZED", "AstraConvertReport", "convert_astra", "write_astra"]

#: Link bandwidth (bytes/s) and latency (ns) used when no collective of the run has a size.
DEFAULT_NETWORK_FOR_UNSIZED = (10e9, 1000.0)


@dataclass(frozen=True)
class AstraRankReport:
    """One rank: nodes written; when lumos's replay of the run ends (``replay_end_ns``) and when
    the recording ends (``measured_end_ns``), both on the run's shared clock from its first
    task (where ASTRA-sim's clock starts); the recorded ProfilerSteps (``measured_steps_ns``,
    their sum)."""

    rank: int
    output: str
    nodes: int
    collectives: int
    replay_end_ns: int
    measured_end_ns: int
    measured_steps_ns: int


@dataclass(frozen=True)
class AstraConvertReport:
    """What ``convert_astra`` wrote and decided."""

    out_prefix: str
    network: dict[str, Any]
    fit: dict[str, Any]
    configs: tuple[str, ...]
    ranks: tuple[AstraRankReport, ...]
    diagnostics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["target"] = "astra-sim"
        return d


def _measured_end_ns(workload: Workload, gi: int) -> int:
    origin = min((int(g.tasks.ts_ns.min()) for g in workload.graphs if g.num_tasks), default=0)
    t = workload.graphs[gi].tasks
    return int((t.ts_ns + t.dur_ns).max()) - origin if t.ts_ns.size else 0


def convert_astra(
    paths: Sequence[str | os.PathLike[str]],
    out_prefix: str | os.PathLike[str],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> AstraConvertReport:
    """Convert the run under ``paths`` for ASTRA-sim (module docstring); returns the report
    also written to ``<out_prefix>.convert.json``."""
    workload, _ = build_workload(paths, workers=workers, dask_address=dask_address,
                                 on_done=on_done)  # fmt: skip
    return write_astra(workload, out_prefix)


def write_astra(workload: Workload, out_prefix: str | os.PathLike[str]) -> AstraConvertReport:
    """Replay ``workload`` and write it for ASTRA-sim (module docstring) under ``out_prefix``."""
    prefix = str(out_prefix)
    if any(g.world_size != len(workload.graphs) for g in workload.graphs):
        raise ConfigError(f"--target astra-sim needs every rank of the job; got ranks "
                          f"{[g.rank for g in workload.graphs]} of world size "
                          f"{workload.graphs[0].world_size}")  # fmt: skip
    result = simulate(workload)
    npus = len(workload.graphs)
    samples = comm_samples(workload)
    try:
        network, fit = fit_astra_network(samples, npus)
    except ConfigError:
        bw, lat = DEFAULT_NETWORK_FOR_UNSIZED
        network = AstraNetwork(npus=npus, bw_bytes_per_s=bw, latency_ns=lat)
        fit = {"samples": 0, "note": "no collective with a size: a default network, and sizes "
               "that take each collective's traced transfer time on it"}  # fmt: skip
    target = to_astra(workload, result, network)
    out_dir = Path(prefix).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = []
    for gi, g in enumerate(workload.graphs):
        path = f"{prefix}.{g.rank}.et"
        trace = target.traces[g.rank]
        write_chakra(trace, path)
        reports.append(AstraRankReport(
            rank=g.rank, output=path, nodes=trace.num_nodes,
            collectives=int(np.isin(trace.node_type, [5, 6, 7]).sum()),
            replay_end_ns=int(result.ends(gi).max()) if g.num_tasks else 0,
            measured_end_ns=_measured_end_ns(workload, gi),
            measured_steps_ns=sum(int(st["measured_ns"] or 0) for st in
                                  replay_summary(result, gi, recorded=g)["steps"]),
        ))  # fmt: skip
    configs = [str(p) for p in write_astra_configs(network, out_dir)]
    if target.comm_groups:
        cg = out_dir / "comm_group.json"
        with atomic_write(cg) as f:
            json.dump({k: list(v) for k, v in target.comm_groups.items()}, f, indent=2)
            f.write("\n")
        configs.append(str(cg))
    report = AstraConvertReport(prefix, network.to_dict(), fit, tuple(configs), tuple(reports),
                                target.diagnostics.to_dict())  # fmt: skip
    with atomic_write(f"{prefix}.convert.json") as f:
        json.dump(report.to_dict(), f, indent=1, sort_keys=True)
        f.write("\n")
    return report
