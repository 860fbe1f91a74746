"""ASTRA-sim 1.0 text workloads -> per-rank Chakra ETs, with upstream's converter mistakes fixed.

Input format (one workload per file)::

    DATA                      <- parallelism: DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, MICRO
    2                         <- number of layers
    conv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10
    fc    -1 7 NONE 0 7 NONE 0 7 ALLREDUCE 4096 10

Layer columns: name, reserved, then for forward, input-gradient and weight-gradient each a
compute time (in NPU cycles), a collective (NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER,
ALLTOALL) and its size in bytes, then the weight-update time.

What differs from upstream's ``text2chakra`` converter, on purpose:

- compute times are cycles, not microseconds: ``duration_micros = round(cycles /
  cycles_per_micro)`` (default 1000, a 1 GHz NPU as in ASTRA-sim 1.0) and the exact cycle count
  is kept in an int64 ``compute_cycles`` attribute. Upstream wrote cycles as microseconds.
- ``NONE`` means no communication: no node is written. Upstream wrote a COMM_COLL node with
  comm_type 0, i.e. an ALL_REDUCE of the given size.
- node ids start at 0 in every rank file. Upstream kept counting across rank files.

Schedule per pass: forward layer by layer (each compute after the previous layer's compute or
its forward collective); backward in reverse, weight gradient then input gradient per layer,
each collective after its compute; a layer's forward in the next pass waits for its weight
gradient collective (or compute). Every non-NONE entry becomes a collective (upstream's modes
read a subset: DATA only weight gradients, MODEL forward and input gradients); MICRO writes only
the weight-gradient collectives. Nodes of one rank file are identical across ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.chakra.attrs import attr
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import ChakraTrace, ChakraWorkload
from lumos.errors import InputError

__all__ = ["PARALLELISM", "text_to_chakra"]

PARALLELISM = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "MICRO")
_COMM = {
    "ALLREDUCE": CollectiveCommType.ALL_REDUCE,
    "ALLGATHER": CollectiveCommType.ALL_GATHER,
    "REDUCESCATTER": CollectiveCommType.REDUCE_SCATTER,
    "ALLTOALL": CollectiveCommType.ALL_TO_ALL,
}


@dataclass(frozen=True, slots=True)
class _Layer:
    name: str
    phases: tuple[tuple[int, str, int], ...]  # (cycles, comm, bytes) for fwd, ig, wg


def _parse(text: str, where: str) -> tuple[str, list[_Layer]]:
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise InputError(where, "needs a parallelism line and a layer count")
    kind = lines[0][0]
    if kind not in PARALLELISM:
        raise InputError(
            where, f"line 1: unsupported parallelism {kind!r} (supported: {', '.join(PARALLELISM)})"
        )
    try:
        count = int(lines[1][0])
    except ValueError:
        raise InputError(where, f"line 2: layer count {lines[1][0]!r} is not an integer") from None
    layers = []
    for k, cols in enumerate(lines[2:], start=3):
        if len(cols) < 12:
            raise InputError(where, f"line {k}: a layer needs 12 columns, found {len(cols)}")
        try:
            phases = tuple((int(cols[c]), cols[c + 1].upper(), int(cols[c + 2])) for c in (2, 5, 8))
        except ValueError:
            raise InputError(where, f"line {k}: compute times and sizes must be integers") from None
        for _, comm, _ in phases:
            if comm != "NONE" and comm not in _COMM:
                raise InputError(where, f"line {k}: unknown collective {comm!r}")
        layers.append(_Layer(cols[0], phases))
    if len(layers) != count:
        raise InputError(where, f"line 2 announces {count} layers but {len(layers)} follow")
    return kind, layers


def text_to_chakra(
    text: str, num_npus: int, *, num_passes: int = 1, cycles_per_micro: float = 1000.0,
    source: str = "<text>",
) -> ChakraWorkload:  # fmt: skip
    """Convert an ASTRA-sim 1.0 text workload (see module docstring) to ``num_npus`` ranks."""
    kind, layers = _parse(text, source)
    meta = [attr("schema", "1.0.2-chakra.0.0.4"), attr("input_file", text)]
    traces = {r: _rank_trace(kind, layers, meta, r, num_passes, cycles_per_micro)
              for r in range(num_npus)}  # fmt: skip
    return ChakraWorkload(traces)


def _rank_trace(
    kind: str, layers: list[_Layer], meta: list, rank: int, num_passes: int, cycles_per_micro: float
) -> ChakraTrace:
    """One rank's trace (identical for every rank apart from ``rank``)."""
    b = ChakraTraceBuilder(metadata_attrs=meta, rank=rank)
    next_id = 0

    def add(name: str, cycles: int | None, comm: str = "NONE", size: int = 0, deps=()) -> int:
        nonlocal next_id
        nid = next_id
        next_id += 1
        if cycles is not None:
            b.add_node(nid, name, NodeType.COMP_NODE, data_deps=deps,
                       duration_micros=round(cycles / cycles_per_micro),
                       attrs=[attr("is_cpu_op", False), attr("compute_cycles", cycles)])  # fmt: skip
        else:
            b.add_node(nid, name, NodeType.COMM_COLL_NODE, data_deps=deps,
                       attrs=[attr("is_cpu_op", False), attr("comm_type", int(_COMM[comm])),
                              attr("comm_size", size)])  # fmt: skip
        return nid

    def comp_comm(layer: _Layer, phase: int, label: str, deps: list[int]) -> tuple[int, int]:
        """(compute node id, last node id: the collective when there is one)."""
        cycles, comm, size = layer.phases[phase]
        comp = add(f"COMP_NODE_{layer.name}_{label}", cycles, deps=deps)
        if comm == "NONE":
            return comp, comp
        return comp, add(f"COMM_COLL_NODE_{layer.name}_{label}_{comm}", None, comm, size, [comp])

    wg_done: dict[int, int] = {}
    for _ in range(num_passes):
        if kind == "MICRO":
            for layer in layers:
                _, comm, size = layer.phases[2]
                if comm != "NONE":
                    add(f"COMM_COLL_NODE_{layer.name}_{comm}", None, comm, size)
            continue
        prev: list[int] = []
        for i, layer in enumerate(layers):
            deps = prev + ([wg_done[i]] if i in wg_done else [])
            prev = [comp_comm(layer, 0, "FWD", deps)[1]]
        for i in range(len(layers) - 1, -1, -1):
            wg_comp, wg_done[i] = comp_comm(layers[i], 2, "BWD_WG", prev)
            if i > 0:
                prev = [comp_comm(layers[i], 1, "BWD_IG", [wg_comp])[1]]
    return b.build()
