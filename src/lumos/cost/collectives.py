"""Alpha-beta time of a collective: latency per step plus bytes over bandwidth, term by term.

Sizes follow PyTorch's conventions (what ``record_param_comms`` reports and what
:class:`~lumos.graph.model.Comms` stores):

==================  ==========================================================================
kind                ``size_bytes`` is
==================  ==========================================================================
all_reduce          the tensor (every rank's input and output)
all_gather          the OUTPUT (the gathered buffer, ``ranks`` x each rank's input)
reduce_scatter      the INPUT (the full buffer, ``ranks`` x each rank's output)
all_to_all          the total a rank sends (``ranks`` pieces of ``size_bytes / ranks``)
broadcast, reduce   the tensor
gather, scatter     the root's full buffer
send, recv          the message
barrier             ignored
==================  ==========================================================================

With ``p`` ranks, ``n`` bytes, per-step latency ``a``, effective bandwidth ``B`` (link bandwidth
x protocol efficiency), ``c`` pipeline chunks and ``L = ceil(log2 p)``, each term in integer ns:

* ``latency_ns = (steps + c - 1) * a``: a step is one message hop; pipelining ``c`` chunks adds
  one latency per extra chunk;
* ``bandwidth_ns = factor * n / B``;
* ``reduction_ns = reduced_bytes / reduce_bw`` when ``reduce_bw_bytes_per_s`` is given (else 0:
  nccl-tests bus bandwidths already include the reduction).

==============================  ===================  ======================  =================
collective / algorithm          steps                bandwidth factor        reduced bytes
==============================  ===================  ======================  =================
all_reduce ring                 2(p-1)               2(p-1)/p                (p-1)/p n
all_reduce tree (double binary) 2L                   2                       n
all_reduce halving_doubling     2L                   2(p-1)/p                (p-1)/p n
all_reduce direct               2                    2(p-1)/p                (p-1)/p n
all_gather, reduce_scatter ring p-1                  (p-1)/p                 (p-1)/p n (RS)
  ... halving_doubling          L                    (p-1)/p                 (p-1)/p n (RS)
  ... direct                    1                    (p-1)/p                 (p-1)/p n (RS)
all_to_all direct               1 (concurrent)       (p-1)/p                 -
all_to_all ring                 p-1                  (p-1)/2 (relayed)       -
broadcast, reduce ring (chain)  p-1                  1 (pipelined)           n (reduce)
broadcast, reduce tree          L                    1 (pipelined)           n (reduce)
gather, scatter direct          p-1                  (p-1)/p                 -
send, recv                      1                    1                       -
barrier                         L                    0                       -
==============================  ===================  ======================  =================

On a :class:`~lumos.cost.topology.Topology`, a group within one node uses the intra-node link;
a flat algorithm over several nodes uses the inter-node latency and the bottleneck bandwidth
``min(intra, inter per node)`` (assumption: NCCL spreads a ring's channels over all NICs of a
node, so a ring crossing nodes sustains the node's NIC bandwidth, as multi-node nccl-tests
show). ``hierarchical`` (``N`` nodes of ``g = ceil(p/N)`` ranks, intra link ``a_i, B_i``,
inter ``a_o, B_o`` per node; the ``g`` ranks of a node share its NICs):

* all_reduce = intra reduce-scatter + inter all-reduce of ``n/g`` per rank + intra all-gather:
  ``2(g-1) a_i + 2(g-1)/g n/B_i + 2(N-1) a_o + 2(N-1)/N n/B_o``;
* all_gather, reduce_scatter: ``(g-1) a_i + (g-1)/g n/B_i + (N-1) a_o + (N-1)/N n/B_o``.

A direct all_to_all over several nodes is bound by the slower of the intra part
(``(g-1)/p n / B_i``) and the node's NICs (``g (p-g)/p n / B_o``).

Protocols (NCCL's, as bandwidth efficiency; assumptions from their wire formats): ``simple``
1.0; ``ll128`` 120/128 (8 flag bytes per 128-byte line); ``ll`` 0.5 (4 flag bytes per 8).

``algorithm="auto"`` picks roughly what NCCL's tuner does: all_reduce uses ``tree`` below
:data:`AUTO_TREE_BELOW_BYTES` (256 KiB, an assumption: NCCL's crossover depends on version,
ranks and protocol) on more than 2 ranks, ``ring`` above; all_gather, reduce_scatter,
broadcast and reduce use ``ring``; all_to_all, gather and scatter ``direct``.

>>> link = Link(bw_bytes_per_s=50e9, latency_ns=500)
>>> t = collective_time("all_reduce", 1 << 20, 8, link, algorithm="ring")
>>> t.time_ns, dict(t.terms)
(43700, {'latency_ns': 7000, 'bandwidth_ns': 36700, 'reduction_ns': 0})
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lumos.cost.topology import Topology
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType

__all__ = [
    "ALGORITHMS",
    "AUTO_TREE_BELOW_BYTES",
    "PROTOCOL_EFFICIENCY",
    "CommTime",
    "Link",
    "collective_time",
    "comm_kind",
]

ALGORITHMS = ("auto", "ring", "tree", "direct", "halving_doubling", "hierarchical")
AUTO_TREE_BELOW_BYTES = 256 * 1024
PROTOCOL_EFFICIENCY: dict[str, float] = {"simple": 1.0, "ll128": 120 / 128, "ll": 0.5}

_REDUCING = {CommType.ALL_REDUCE, CommType.REDUCE, CommType.REDUCE_SCATTER,
             CommType.REDUCE_SCATTER_BLOCK}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Link:
    """One flat network: every step between two ranks has this bandwidth and latency."""

    bw_bytes_per_s: float
    latency_ns: int

    def __post_init__(self) -> None:
        if not (0 < self.bw_bytes_per_s < math.inf):
            raise ConfigError(f"bandwidth must be positive, got {self.bw_bytes_per_s}")
        if self.latency_ns < 0:
            raise ConfigError(f"latency must be >= 0, got {self.latency_ns}")


@dataclass(frozen=True)
class CommTime:
    """A predicted collective time and the named terms (integer ns) that sum to it."""

    kind: str
    algorithm: str
    size_bytes: int
    ranks: int
    terms: Mapping[str, int] = field(default_factory=dict)

    @property
    def time_ns(self) -> int:
        return sum(self.terms.values())

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "algorithm": self.algorithm, "size_bytes": self.size_bytes,
                "ranks": self.ranks, "time_ns": self.time_ns, "terms": dict(self.terms)}  # fmt: skip

    def with_bandwidth_scaled(self, factor: float) -> CommTime:
        """The same prediction with every ``*bandwidth_ns`` term x ``factor`` (a slow link)."""
        terms = {k: round(v * factor) if k.endswith("bandwidth_ns") else v
                 for k, v in self.terms.items()}  # fmt: skip
        return CommTime(self.kind, self.algorithm, self.size_bytes, self.ranks, terms)


def comm_kind(kind: CommType | int | str) -> CommType:
    """A :class:`CommType` from itself, its value, or a name (``all_reduce``, ``allreduce``,
    ``all-reduce``, ``ALL_REDUCE``); :class:`ConfigError` otherwise."""
    if isinstance(kind, CommType):
        return kind
    if isinstance(kind, int):
        try:
            return CommType(kind)
        except ValueError:
            raise ConfigError(f"unknown collective type {kind}") from None
    key = str(kind).strip().lower().replace("-", "_")
    names = {c.name.lower(): c for c in CommType if c != CommType.UNKNOWN}
    names.update({n.replace("_", ""): c for n, c in list(names.items())})
    if key not in names:
        known = ", ".join(c.name.lower() for c in CommType if c != CommType.UNKNOWN)
        raise ConfigError(f"unknown collective {kind!r}; known: {known}")
    return names[key]


def _auto(kind: CommType, size_bytes: int, ranks: int) -> str:
    if kind == CommType.ALL_REDUCE:
        return "tree" if size_bytes < AUTO_TREE_BELOW_BYTES and ranks > 2 else "ring"
    if kind in (CommType.ALL_TO_ALL, CommType.GATHER, CommType.SCATTER, CommType.SEND,
                CommType.RECV, CommType.BARRIER):  # fmt: skip
        return "direct"
    return "ring"


def _steps_factor(kind: CommType, algorithm: str, p: int) -> tuple[int, float, float] | None:
    """(steps, bandwidth factor, reduced fraction of n) for a flat algorithm, None if n/a."""
    log = math.ceil(math.log2(p))
    share = (p - 1) / p
    if kind == CommType.ALL_REDUCE:
        return {"ring": (2 * (p - 1), 2 * share, share), "tree": (2 * log, 2.0, 1.0),
                "halving_doubling": (2 * log, 2 * share, share),
                "direct": (2, 2 * share, share)}.get(algorithm)  # fmt: skip
    if kind in (CommType.ALL_GATHER, CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK):
        red = share if kind != CommType.ALL_GATHER else 0.0
        return {"ring": (p - 1, share, red), "halving_doubling": (log, share, red),
                "direct": (1, share, red)}.get(algorithm)  # fmt: skip
    if kind == CommType.ALL_TO_ALL:
        return {"direct": (1, share, 0.0), "ring": (p - 1, (p - 1) / 2, 0.0)}.get(algorithm)
    if kind in (CommType.BROADCAST, CommType.REDUCE):
        red = 1.0 if kind == CommType.REDUCE else 0.0
        return {"ring": (p - 1, 1.0, red), "tree": (log, 1.0, red)}.get(algorithm)
    if kind in (CommType.GATHER, CommType.SCATTER):
        return {"direct": (p - 1, share, 0.0), "ring": (p - 1, share, 0.0)}.get(algorithm)
    if kind in (CommType.SEND, CommType.RECV):
        return (1, 1.0, 0.0)
    if kind == CommType.BARRIER:
        return (log, 0.0, 0.0)
    return None


def _ns(nbytes: float, bw_bytes_per_s: float) -> int:
    return round(nbytes / bw_bytes_per_s * 1e9)


def _flat_link(network: Link | Topology, ranks: int) -> Link:
    if isinstance(network, Link):
        return network
    if ranks <= network.gpus_per_node:
        return Link(bw_bytes_per_s=network.intra_bw_bytes_per_s,
                    latency_ns=network.intra_latency_ns)  # fmt: skip
    if not network.multi_node:
        raise ConfigError(
            f"{ranks} ranks do not fit on topology {network.name} "
            f"({network.gpus_per_node} GPUs, no inter-node network)"
        )
    bw = min(network.intra_bw_bytes_per_s, network.inter_bw_bytes_per_s)
    return Link(bw_bytes_per_s=bw, latency_ns=network.inter_latency_ns)


def collective_time(
    kind: CommType | int | str,
    size_bytes: int,
    ranks: int,
    network: Link | Topology,
    *,
    algorithm: str = "auto",
    protocol: str = "simple",
    chunks: int = 1,
    reduce_bw_bytes_per_s: float | None = None,
) -> CommTime:
    """Predicted time of one collective of ``size_bytes`` over ``ranks`` ranks on ``network``
    (see the module docstring for the conventions and formulas)."""
    ctype = comm_kind(kind)
    if size_bytes < 0:
        raise ConfigError(f"size must be >= 0 bytes, got {size_bytes}")
    if ranks < 1:
        raise ConfigError(f"ranks must be >= 1, got {ranks}")
    if chunks < 1:
        raise ConfigError(f"chunks must be >= 1, got {chunks}")
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if protocol not in PROTOCOL_EFFICIENCY:
        raise ConfigError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOL_EFFICIENCY)}")
    if ctype in (CommType.SEND, CommType.RECV):
        ranks = max(ranks, 2)
    algo = _auto(ctype, size_bytes, ranks) if algorithm == "auto" else algorithm
    name = ctype.name.lower()
    eff = PROTOCOL_EFFICIENCY[protocol]
    if ranks == 1:
        return CommTime(name, algo, size_bytes, ranks,
                        {"latency_ns": 0, "bandwidth_ns": 0, "reduction_ns": 0})  # fmt: skip
    reduced = 0.0
    if algo == "hierarchical" or (
        ctype == CommType.ALL_TO_ALL
        and isinstance(network, Topology)
        and ranks > network.gpus_per_node
        and algo == "direct"
    ):
        if not isinstance(network, Topology):
            raise ConfigError("the hierarchical algorithm needs a --topology (nodes and links)")
        terms = _multi_node(ctype, algo, size_bytes, ranks, network, eff, chunks)
        reduced = (ranks - 1) / ranks * size_bytes if ctype in _REDUCING else 0.0
    else:
        plan = _steps_factor(ctype, algo, ranks)
        if plan is None:
            raise ConfigError(f"algorithm {algo!r} does not apply to {name}")
        steps, factor, reduced_share = plan
        link = _flat_link(network, ranks)
        terms = {
            "latency_ns": (steps + chunks - 1) * link.latency_ns,
            "bandwidth_ns": _ns(factor * size_bytes, link.bw_bytes_per_s * eff),
        }
        reduced = reduced_share * size_bytes
    terms["reduction_ns"] = _ns(reduced, reduce_bw_bytes_per_s) if reduce_bw_bytes_per_s else 0
    return CommTime(name, algo, size_bytes, ranks, terms)


def _multi_node(
    kind: CommType, algo: str, n: int, p: int, topo: Topology, eff: float, chunks: int
) -> dict[str, int]:
    """Terms of a hierarchical collective (or a direct all_to_all) over several nodes."""
    if not topo.multi_node and p > topo.gpus_per_node:
        raise ConfigError(f"{p} ranks do not fit on topology {topo.name} (no inter-node network)")
    nodes = topo.nodes_for(p)
    g = math.ceil(p / nodes)
    b_i = topo.intra_bw_bytes_per_s * eff
    b_o = topo.inter_bw_bytes_per_s * eff if nodes > 1 else math.inf
    a_i, a_o = topo.intra_latency_ns, topo.inter_latency_ns if nodes > 1 else 0
    if kind == CommType.ALL_TO_ALL:
        intra = (g - 1) / p * n / b_i
        inter = g * (p - g) / p * n / b_o
        return {
            "latency_ns": chunks * max(a_i, a_o),
            "bandwidth_ns": round(max(intra, inter) * 1e9),
        }
    if kind == CommType.ALL_REDUCE:
        twice = 2
    elif kind in (CommType.ALL_GATHER, CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK):
        twice = 1
    else:
        raise ConfigError(f"algorithm {algo!r} does not apply to {kind.name.lower()}")
    return {
        "intra_latency_ns": twice * (g - 1) * a_i,
        "intra_bandwidth_ns": _ns(twice * (g - 1) / g * n, b_i),
        "inter_latency_ns": (twice * (nodes - 1) + chunks - 1) * a_o,
        "inter_bandwidth_ns": 0 if nodes == 1 else _ns(twice * (nodes - 1) / nodes * n, b_o),
    }
