"""Microbenchmark workloads: one collective per rank, as ASTRA-sim's example generator writes.

``microbenchmark("all_reduce", 8, "1MB")`` returns a :class:`ChakraWorkload` whose files are
byte for byte the ones in ASTRA-sim's ``examples/workload/microbenchmarks/all_reduce/8npus_1MB``:
metadata ``version "0.0.4"``; one COMM_COLL_NODE named ``all_reduce_8npus_1MB`` with
``is_cpu_op`` false (bool), ``comm_type`` and ``comm_size`` (int64). Upstream numbers the single
node of rank r with id r; ids are per file, so this is harmless, and ``node_id=0`` gives every
rank id 0 instead.
"""

from __future__ import annotations

import re

from lumos.chakra.attrs import attr
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import ChakraWorkload
from lumos.errors import ConfigError

__all__ = ["COLLECTIVES", "microbenchmark", "parse_size"]

#: CLI names of the collectives a microbenchmark can use.
COLLECTIVES = {m.name.lower(): m for m in CollectiveCommType}
_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1 << 10,
    "MB": 1 << 20,
    "GB": 1 << 30,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
}


def parse_size(text: str) -> int:
    """Bytes in ``"1MB"``, ``"64KB"``, ``"4096"`` (binary units, as ASTRA-sim's examples use)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m[2].upper() not in _UNITS:
        raise ConfigError(f"cannot read the size {text!r}; use e.g. 1MB, 64KB or a byte count")
    return int(m[1]) * _UNITS[m[2].upper()]


def microbenchmark(
    collective: str, num_npus: int, size: str | int, *, node_id: int | None = None
) -> ChakraWorkload:
    """One ``collective`` of ``size`` per rank for ``num_npus`` ranks (see module docstring)."""
    key = collective.lower()
    if key not in COLLECTIVES:
        raise ConfigError(
            f"unknown collective {collective!r}; choose one of {', '.join(COLLECTIVES)}"
        )
    if num_npus < 1:
        raise ConfigError("num_npus must be at least 1")
    size_bytes = parse_size(size) if isinstance(size, str) else int(size)
    label = size if isinstance(size, str) else f"{size}B"
    name = f"{key}_{num_npus}npus_{label}"
    traces = {}
    for rank in range(num_npus):
        b = ChakraTraceBuilder(version="0.0.4", rank=rank)
        b.add_node(
            rank if node_id is None else node_id, name, NodeType.COMM_COLL_NODE,
            attrs=[attr("is_cpu_op", False), attr("comm_type", int(COLLECTIVES[key])),
                   attr("comm_size", size_bytes)],
        )  # fmt: skip
        traces[rank] = b.build()
    return ChakraWorkload(traces, key)
