"""ASTRA-sim-compatible collective times: what ASTRA-sim's analytical backend computes for one
dimension, written as a closed formula (derived from reading its public source, not copied).

Setting (ASTRA-sim's system.json / network.yml): ``preferred-dataset-splits`` = ``chunks``,
``active-chunks-per-dimension`` = 1 (chunks go through the collective one after another),
``endpoint-delay`` = ``E``, ``local-mem-bw``, a one-dimensional network with link latency ``L``
and bandwidth ``B``; ``ring`` runs on a ring (one hop per message), ``direct`` on a fully
connected network (one link per pair of NPUs, all messages in flight at once).

Per chunk, with ``S(m) = floor(m / B)`` (ns; the backend truncates the serialization delay) and
``R(m) = 3 floor(m / local_mem_bw)`` (one write and two reads per reduced message, each
truncated), every message hop costs ``L + S(m)`` on the link and ``E`` at the receiving end,
and the collective pays one more ``E`` when it starts:

====================  =================================  ==========================================
collective            message ``m``                      time per chunk
====================  =================================  ==========================================
all_reduce ring       chunk / p                          E + 2(p-1)(L + S(m) + E) + (p-1) R(m)
reduce_scatter ring   chunk / p                          E + (p-1)(L + S(m) + E + R(m))
all_gather ring       chunk (of one rank's input)        E + (p-1)(L + S(m) + E)
all_to_all ring       chunk / p                          E + p(p-1)/2 (L + S(m) + E)
X direct              as for ring                        E + L + S(m) + E (+ R(m) if reducing)
====================  =================================  ==========================================

The total is ``chunks x`` the time per chunk (integer division everywhere, as ASTRA-sim does).
Sizes: the caller passes lumos's (PyTorch's) convention; ASTRA-sim's ``comm_size`` of an
all_gather is one rank's *input*, so ``size_bytes / p`` is split into chunks there. A chunk
smaller than ``p`` bytes is raised to ``p`` bytes (except all_gather), as ASTRA-sim does.

Units: ASTRA-sim's network ``bandwidth`` in GB/s means 2^30 bytes/s per GB (its
``bw_GBps_to_Bpns`` multiplies by 2^30 / 10^9) while ``local-mem-bw`` in GB/s means 10^9
(``Sys.cc`` multiplies by 10^9). This module takes bytes per second; the CLI reads
``--bandwidth`` with binary prefixes and ``--local-mem-bw`` with decimal ones in this mode, so
the numbers of an ASTRA-sim config give ASTRA-sim's result.

Reference (ASTRA-sim's regression test ``tests/rt_template``: ring all-reduce of 1 MiB over 8
NPUs, 50 GB/s and 500 ns links, 4 chunks, 10 ns endpoint delay, local-mem-bw 50 GB/s; it
reports 117,780 cycles = ns):

>>> cfg = AstraConfig(bw_bytes_per_s=50 * 2**30, latency_ns=500, chunks=4,
...                   endpoint_delay_ns=10, local_mem_bw_bytes_per_s=50e9)
>>> t = astra_time("all_reduce", 1 << 20, 8, cfg)
>>> t.time_ns
117780
>>> dict(t.terms)
{'endpoint_ns': 600, 'latency_ns': 28000, 'bandwidth_ns': 34160, 'reduction_ns': 55020}
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.cost.collectives import CommTime, comm_kind
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType

__all__ = ["ASTRA_ALGORITHMS", "AstraConfig", "astra_time"]

ASTRA_ALGORITHMS = ("ring", "direct")
_KINDS = (CommType.ALL_REDUCE, CommType.REDUCE_SCATTER, CommType.ALL_GATHER, CommType.ALL_TO_ALL)


@dataclass(frozen=True, kw_only=True)
class AstraConfig:
    """One network dimension and the system parameters ASTRA-sim's collectives use.

    Defaults: one chunk; ``endpoint_delay_ns`` 10 (ASTRA-sim's own default); local memory
    50 GB/s (10^9 bytes per GB; the value in ASTRA-sim's shipped system configs).
    """

    bw_bytes_per_s: float
    latency_ns: int
    chunks: int = 1
    endpoint_delay_ns: int = 10
    local_mem_bw_bytes_per_s: float = 50e9

    def __post_init__(self) -> None:
        if not (0 < self.bw_bytes_per_s < math.inf):
            raise ConfigError(f"bandwidth must be positive, got {self.bw_bytes_per_s}")
        if not (0 < self.local_mem_bw_bytes_per_s < math.inf):
            raise ConfigError(f"local-mem-bw must be positive, got {self.local_mem_bw_bytes_per_s}")
        if self.chunks < 1:
            raise ConfigError(f"chunks must be >= 1, got {self.chunks}")
        if self.latency_ns < 0 or self.endpoint_delay_ns < 0:
            raise ConfigError("latency and endpoint delay must be >= 0")


def _trunc_ns(nbytes: int, bw_bytes_per_s: float) -> int:
    return int(nbytes / (bw_bytes_per_s / 1e9))


def astra_time(
    kind: CommType | int | str, size_bytes: int, ranks: int, config: AstraConfig,
    *, algorithm: str = "ring",
) -> CommTime:  # fmt: skip
    """ASTRA-sim's time for one collective (see the module docstring for the formulas)."""
    ctype = comm_kind(kind)
    if ctype == CommType.REDUCE_SCATTER_BLOCK:
        ctype = CommType.REDUCE_SCATTER
    if ctype not in _KINDS:
        raise ConfigError(f"the ASTRA-sim-compatible mode models all_reduce, reduce_scatter, "
                          f"all_gather and all_to_all, not {ctype.name.lower()}")  # fmt: skip
    if algorithm == "auto":
        algorithm = "ring"
    if algorithm not in ASTRA_ALGORITHMS:
        raise ConfigError(f"the ASTRA-sim-compatible mode has algorithms "
                          f"{', '.join(ASTRA_ALGORITHMS)}, not {algorithm!r}")  # fmt: skip
    if ctype == CommType.ALL_REDUCE and algorithm == "direct":
        raise ConfigError("the ASTRA-sim-compatible mode has no direct all_reduce; use ring")
    if ranks < 1 or size_bytes < 0:
        raise ConfigError(f"need ranks >= 1 and size >= 0, got {ranks} and {size_bytes}")
    p, name = ranks, ctype.name.lower()
    if p == 1 or size_bytes == 0:
        zero = {"endpoint_ns": 0, "latency_ns": 0, "bandwidth_ns": 0, "reduction_ns": 0}
        return CommTime(name, algorithm, size_bytes, ranks, zero)
    data = size_bytes // p if ctype == CommType.ALL_GATHER else size_bytes
    chunk = data // config.chunks
    if ctype != CommType.ALL_GATHER and chunk < p:
        chunk = p
    n_chunks = math.ceil(data / chunk) if chunk else config.chunks
    msg = chunk if ctype == CommType.ALL_GATHER else chunk // p
    serial = _trunc_ns(msg, config.bw_bytes_per_s)
    reduce = 3 * _trunc_ns(msg, config.local_mem_bw_bytes_per_s)
    if algorithm == "direct":
        hops, reductions, endpoints = 1, int(ctype == CommType.REDUCE_SCATTER), 2
    else:
        hops = {CommType.ALL_REDUCE: 2 * (p - 1), CommType.ALL_TO_ALL: p * (p - 1) // 2}.get(
            ctype, p - 1
        )
        reductions = p - 1 if ctype in (CommType.ALL_REDUCE, CommType.REDUCE_SCATTER) else 0
        endpoints = hops + 1
    terms = {
        "endpoint_ns": n_chunks * endpoints * config.endpoint_delay_ns,
        "latency_ns": n_chunks * hops * config.latency_ns,
        "bandwidth_ns": n_chunks * hops * serial,
        "reduction_ns": n_chunks * reductions * reduce,
    }
    return CommTime(name, algorithm, size_bytes, ranks, terms)
