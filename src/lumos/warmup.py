"""Use once, on the bundled example, the compiled functions that numba compiles on first use.

:mod:`lumos._jit`'s background warmer compiles every :class:`~lumos._jit.Kernel` from its one
declared signature. The other compiled functions (the Chakra decoder and encoders, the layer
repeat search, the op-sequence alignment) are called with array types that their callers choose, so the warmer compiles
them the way a command does (even where a file and its attribute values are small enough to
decode or encode without them, :mod:`lumos.chakra._wire_py`, :mod:`lumos.chakra._wire_attr_py`,
:mod:`lumos.chakra._encode_py`): :func:`warm_up` reads the bundled example trace, builds its
graph, writes it as a Chakra ET, reads that back with every attribute value, maps it back to a
graph, looks for its layers, aligns two op sequences (the linking of a PyTorch ET), and maps
a small ET of another tool's making. Afterwards numba's cache holds every function of
:data:`DISPATCHERS`, and a user's first Chakra command after a first replay waits for no
compile.
"""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DISPATCHERS", "dispatchers", "warm_up"]

#: The compiled functions :func:`warm_up` leaves in numba's cache, as ``module:name``.
DISPATCHERS = (
)


def dispatchers() -> list[Any]:
    """The numba dispatchers of :data:`DISPATCHERS` (importing their modules)."""
    out = []
    for spec in DISPATCHERS:
        module, name = spec.split(":")
        out.append(getattr(importlib.import_module(module), name))
    return out


def warm_up() -> None:
    """Run the bundled example through every path that calls a function of
    :data:`DISPATCHERS` (compiling it into numba's cache when it is not there)."""
    from lumos.chakra import NodeType, attr, read_chakra, write_chakra
    from lumos.chakra.builder import ChakraTraceBuilder
    from lumos.chakra.mapping import from_chakra, to_chakra
    from lumos.chakra.trace import ChakraTrace
    from lumos.estimate.layers import find_layers
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto
    from lumos.link.align import align

    graph = build_graph(read_kineto(example_trace_path()))
    find_layers(graph)
    # linking a PyTorch ET to its Kineto trace aligns their op sequences (the example has no ET)
    align(np.array([1, 2, 3]), np.array([1, 4, 3]))  # 2 and 4 differ: the LCS kernel
    with tempfile.TemporaryDirectory(prefix="lumos-warm-") as d:
        path = write_chakra(to_chakra(graph), Path(d) / "warm.0.et")[0]
        et = read_chakra(path)
        assert isinstance(et, ChakraTrace)  # one file, one trace
        for node in et.iter_nodes():
            for a in node.attrs:
                _ = a.value
        from_chakra(et)
        # an ET another tool wrote (no lumos metadata): the foreign mapping and its orders
        b = ChakraTraceBuilder(version="0.0.4", rank=0)
        b.add_node(
            1, "compute", NodeType.COMP_NODE, duration_micros=5, attrs=[attr("is_cpu_op", False)]
        )
        b.add_node(
            2,
            "all_reduce",
            NodeType.COMM_COLL_NODE,
            data_deps=[1],
            attrs=[attr("is_cpu_op", False), attr("comm_type", 0), attr("comm_size", 1 << 20)],
        )
        b.add_node(3, "compute", NodeType.COMP_NODE, ctrl_deps=[2], duration_micros=5,
                   attrs=[attr("is_cpu_op", False)])  # fmt: skip
        foreign = write_chakra(b.build(), Path(d) / "foreign.0.et")[0]
        other = read_chakra(foreign)
        assert isinstance(other, ChakraTrace)
        from_chakra(other)
