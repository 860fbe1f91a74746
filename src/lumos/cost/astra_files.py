"""ASTRA-sim's analytical-backend configuration: one network, written and read back, and fitted
to a run's own collectives.

:class:`AstraNetwork` is what lumos needs to predict ASTRA-sim's collective times
(:func:`lumos.cost.astra.astra_time`) and what ASTRA-sim needs to run: a one-dimensional ring
of ``npus`` NPUs, link bandwidth and latency, the system layer's chunking, endpoint delay and
local-memory bandwidth. :func:`write_astra_configs` writes the three files ASTRA-sim's
analytical binaries take beside the ETs:

==========================  =================================================================
file                        content
==========================  =================================================================
``network.yml``             ``topology: [ Ring ]``, ``npus_count``, ``bandwidth`` (GB/s, ASTRA-sim
                            reads 1 GB = 2^30 bytes here), ``latency`` (ns)
``system.json``             ring implementations of all four collectives, ``preferred-dataset-
                            splits`` = chunks, ``active-chunks-per-dimension`` 1, ``endpoint-
                            delay``, ``local-mem-bw`` (GB/s, 1 GB = 10^9 bytes), roofline off
                            (COMP nodes replay their ``duration_micros``)
``remote_memory.json``      ``NO_MEMORY_EXPANSION``
==========================  =================================================================

:func:`read_astra_network` reads ``network.yml`` + ``system.json`` back (only the keys above;
anything else is an error naming the file). :func:`fit_astra_network` fits link latency and
bandwidth to measured collective transfers: ASTRA-sim's time is, per collective,
``c + a * latency_ns + b * (1e9 / bw)`` with ``a``, ``b``, ``c`` fixed by kind, size and group
size (see :mod:`lumos.cost.astra`), so the fit is an ordinary least-squares solve in
``(latency_ns, 1e9 / bw)``, with latency clamped at 0.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lumos._io import atomic_write
from lumos.cost.astra import AstraConfig, astra_time
from lumos.errors import ConfigError, InputError

__all__ = [
    "CONFIG_FILES",
    "AstraNetwork",
    "CommSample",
    "fit_astra_network",
    "read_astra_network",
    "write_astra_configs",
]

#: Names of the files written beside the ETs.
CONFIG_FILES = ("network.yml", "system.json", "remote_memory.json")
_GIB = 2**30
_SUPPORTED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True, kw_only=True)
class AstraNetwork:
    """A ring of ``npus`` NPUs and ASTRA-sim's system parameters (see the module docstring)."""

    npus: int
    bw_bytes_per_s: float
    latency_ns: float
    chunks: int = 1
    endpoint_delay_ns: int = 10
    local_mem_bw_bytes_per_s: float = 50e9

    def __post_init__(self) -> None:
        if self.npus < 1:
            raise ConfigError(f"npus must be >= 1, got {self.npus}")
        self.config()  # validates the rest

    def config(self) -> AstraConfig:
        """The :class:`AstraConfig` of this network (latency rounded to whole ns)."""
        return AstraConfig(
            bw_bytes_per_s=self.bw_bytes_per_s, latency_ns=round(self.latency_ns),
            chunks=self.chunks, endpoint_delay_ns=self.endpoint_delay_ns,
            local_mem_bw_bytes_per_s=self.local_mem_bw_bytes_per_s,
        )  # fmt: skip

    def collective_ns(self, kind: str, size_bytes: int, ranks: int) -> int:
        """ASTRA-sim's time of one collective (``size_bytes`` in lumos's convention)."""
        return astra_time(kind, size_bytes, ranks, self.config()).time_ns

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_astra_configs(network: AstraNetwork, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``network.yml``, ``system.json``, ``remote_memory.json`` into ``out_dir``
    (atomically, each); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gbps = network.bw_bytes_per_s / _GIB
    yml = (
        "# written by lumos (ASTRA-sim analytical backend; bandwidth in GB/s of 2^30 bytes)\n"
        "topology: [ Ring ]\n"
        f"npus_count: [ {network.npus} ]\n"
        f"bandwidth: [ {gbps!r} ]\n"
        f"latency: [ {float(network.latency_ns)!r} ]\n"
    )
    system = {
        "scheduling-policy": "FIFO",
        "endpoint-delay": network.endpoint_delay_ns,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": network.chunks,
        "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"],
        "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"],
        "collective-optimization": "localBWAware",
        "local-mem-bw": network.local_mem_bw_bytes_per_s / 1e9,
        "boost-mode": 0,
        "roofline-enabled": 0,
    }
    paths = [out / name for name in CONFIG_FILES]
    with atomic_write(paths[0]) as f:
        f.write(yml)
    with atomic_write(paths[1]) as f:
        json.dump(system, f, indent=2)
        f.write("\n")
    with atomic_write(paths[2]) as f:
        json.dump({"memory-type": "NO_MEMORY_EXPANSION"}, f, indent=2)
        f.write("\n")
    return paths


_YML_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*\[\s*([^\]]*?)\s*\]\s*(?:#.*)?$")


def _read_yml(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _YML_LINE.match(line)
        if not m:
            raise InputError(str(path), f"cannot read the line {line.strip()!r}")
        out[m[1]] = [v.strip() for v in m[2].split(",") if v.strip()]
    return out


def read_astra_network(directory: str | os.PathLike[str]) -> AstraNetwork:
    """The :class:`AstraNetwork` of ``directory/network.yml`` and ``directory/system.json``:
    a one-dimensional ``Ring`` with ring collectives (what :func:`write_astra_configs`
    writes); anything else is an :class:`InputError` naming the file."""
    d = Path(directory)
    yml_path, sys_path = d / CONFIG_FILES[0], d / CONFIG_FILES[1]
    for p in (yml_path, sys_path):
        if not p.is_file():
            raise InputError(str(p), "not found (lumos convert --target astra-sim writes it)")
    yml = _read_yml(yml_path)
    try:
        topo, npus = yml["topology"], yml["npus_count"]
        bw, lat = yml["bandwidth"], yml["latency"]
    except KeyError as exc:
        raise InputError(str(yml_path), f"has no {exc.args[0]!r}") from None
    if topo != ["Ring"] or len(npus) != 1 or len(bw) != 1 or len(lat) != 1:
        raise InputError(str(yml_path), "lumos models a one-dimensional Ring network only")
    try:
        system = json.loads(sys_path.read_text())
        for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            if system.get(f"{key}-implementation", ["ring"]) != ["ring"]:
                raise InputError(str(sys_path), f"{key}-implementation must be ['ring']")
        if int(system.get("active-chunks-per-dimension", 1)) != 1:
            raise InputError(str(sys_path), "active-chunks-per-dimension must be 1")
        if int(system.get("roofline-enabled", 0)):
            raise InputError(str(sys_path), "roofline-enabled must be 0 (lumos replays durations)")
        return AstraNetwork(
            npus=int(npus[0]), bw_bytes_per_s=float(bw[0]) * _GIB, latency_ns=float(lat[0]),
            chunks=int(system.get("preferred-dataset-splits", 1)),
            endpoint_delay_ns=int(system.get("endpoint-delay", 10)),
            local_mem_bw_bytes_per_s=float(system.get("local-mem-bw", 50)) * 1e9,
        )  # fmt: skip
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(str(sys_path), f"cannot read the network settings: {exc}") from None


@dataclass(frozen=True)
class CommSample:
    """One measured collective: kind (``all_reduce``...), size in lumos's convention, group
    size, and its transfer time (waiting for peers excluded)."""

    kind: str
    size_bytes: int
    ranks: int
    transfer_ns: int


def fit_astra_network(
    samples: Sequence[CommSample], npus: int, *, chunks: int = 1, endpoint_delay_ns: int = 10,
    local_mem_bw_bytes_per_s: float = 50e9,
) -> tuple[AstraNetwork, dict[str, Any]]:  # fmt: skip
    """``(network, fit report)``: link latency and bandwidth that make ASTRA-sim's ring times
    closest (least squares) to the samples' transfer times. Samples of other kinds, of one
    rank or of size 0 are not used. With fewer than two usable samples, or no spread in what
    they say about bandwidth, the bandwidth alone is fitted at latency 0 (said in the report);
    with none, :class:`ConfigError`."""
    rows = [s for s in samples if s.kind in _SUPPORTED and s.ranks > 1 and s.size_bytes > 0]
    if not rows:
        raise ConfigError("no collective with a size and more than one rank to fit the network to")
    probe = AstraConfig(bw_bytes_per_s=1e9, latency_ns=1000, chunks=chunks,
                        endpoint_delay_ns=endpoint_delay_ns,
                        local_mem_bw_bytes_per_s=local_mem_bw_bytes_per_s)  # fmt: skip
    a, b, c, y = [], [], [], []
    for s in rows:
        t = dict(astra_time(s.kind, s.size_bytes, s.ranks, probe).terms)
        a.append(t["latency_ns"] / 1000.0)
        b.append(float(t["bandwidth_ns"]))  # ns at 1 GB/s: the coefficient of 1e9 / bw
        c.append(float(t["endpoint_ns"] + t["reduction_ns"]))
        y.append(float(s.transfer_ns))
    A = np.column_stack([np.asarray(a), np.asarray(b)])
    r = np.asarray(y) - np.asarray(c)
    note = ""
    sol = None
    if len(rows) >= 2 and np.linalg.matrix_rank(A) == 2:
        sol, *_ = np.linalg.lstsq(A, r, rcond=None)
        if sol[0] < 0 or sol[1] <= 0:
            sol = None
    if sol is None:
        k = float(r @ A[:, 1]) / float(A[:, 1] @ A[:, 1]) if float(A[:, 1] @ A[:, 1]) else 0.0
        sol = np.array([0.0, k])
        note = "bandwidth fitted at latency 0 (latency and bandwidth not separable)"
    k = float(sol[1])
    bw = 1e9 / k if k > 0 else 1e15  # time does not grow with size: a very fast link
    if not math.isfinite(bw) or bw > 1e15:
        bw = 1e15
    net = AstraNetwork(npus=npus, bw_bytes_per_s=bw, latency_ns=round(float(sol[0]), 3),
                       chunks=chunks, endpoint_delay_ns=endpoint_delay_ns,
                       local_mem_bw_bytes_per_s=local_mem_bw_bytes_per_s)  # fmt: skip
    pred = np.array([net.collective_ns(s.kind, s.size_bytes, s.ranks) for s in rows], float)
    meas = np.asarray(y)
    report = {
        "samples": len(rows),
        "latency_ns": net.latency_ns,
        "bw_bytes_per_s": net.bw_bytes_per_s,
        "measured_total_ns": int(meas.sum()),
        "predicted_total_ns": int(pred.sum()),
        "rel_rms": float(np.sqrt(((pred - meas) ** 2).mean()) / max(meas.mean(), 1.0)),
        "note": note,
    }
    return net, report
