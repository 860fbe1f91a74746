"""lumos: trace-driven performance modeling of distributed LLM training.

The pipeline, one noun per stage (see the README)::

    read_kineto / read_pytorch_et  -> KinetoTrace / HostTrace     (lumos.ingest)
    link                           -> LinkedTrace                 (lumos.link)
    build_graph                    -> ExecGraph per rank          (lumos.graph)
    Workload(graphs)               -> all ranks of one job
    read_chakra / write_chakra    <-> Chakra execution traces     (lumos.chakra)
    to_chakra / from_chakra       <-> ExecGraph as Chakra nodes
    simulate                       -> SimResult                   (lumos.sim)
    replay                         -> measured vs predicted       (lumos.replay)

Names are imported on first use, so ``import lumos`` stays cheap (the simulator and the Chakra
codec load compiled extensions and NumPy).

>>> import lumos
>>> trace = lumos.read_kineto(lumos.example_trace_path())
>>> result = lumos.simulate(lumos.build_graph(trace))
>>> [round(s["error"], 4) for s in result.steps()]
[0.0, 0.0, 0.0]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lumos._version import __version__
from lumos.errors import (
    ChakraFormatError,
    ConfigError,
    GraphError,
    InputError,
    LumosError,
    MissingDependencyError,
    NoTracesError,
    SimulationError,
    TraceFormatError,
)

if TYPE_CHECKING:
    from lumos.chakra import ChakraTrace, ChakraWorkload, read_chakra, write_chakra
    from lumos.chakra.mapping import from_chakra, to_chakra
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import align_ranks, build_graph
    from lumos.graph.model import ExecGraph, Workload
    from lumos.ingest.kineto import KinetoTrace, read_kineto
    from lumos.ingest.pytorch_et import HostTrace, read_pytorch_et
    from lumos.link import LinkedTrace
    from lumos.replay import Replay, replay
    from lumos.sim import simulate
    from lumos.sim.cost import CostModel, TracedCost
    from lumos.sim.result import SimResult

_LAZY: dict[str, str] = {
    "ChakraTrace": "lumos.chakra",
    "ChakraWorkload": "lumos.chakra",
    "read_chakra": "lumos.chakra",
    "write_chakra": "lumos.chakra",
    "to_chakra": "lumos.chakra.mapping",
    "from_chakra": "lumos.chakra.mapping",
    "example_trace_path": "lumos.examples_data",
    "align_ranks": "lumos.graph.build",
    "build_graph": "lumos.graph.build",
    "ExecGraph": "lumos.graph.model",
    "Workload": "lumos.graph.model",
    "KinetoTrace": "lumos.ingest.kineto",
    "read_kineto": "lumos.ingest.kineto",
    "HostTrace": "lumos.ingest.pytorch_et",
    "read_pytorch_et": "lumos.ingest.pytorch_et",
    "LinkedTrace": "lumos.link",
    "Replay": "lumos.replay",
    "replay": "lumos.replay",
    "simulate": "lumos.sim",
    "CostModel": "lumos.sim.cost",
    "TracedCost": "lumos.sim.cost",
    "SimResult": "lumos.sim.result",
}

__all__ = [
    "ChakraFormatError",
    "ChakraTrace",
    "ChakraWorkload",
    "ConfigError",
    "CostModel",
    "ExecGraph",
    "GraphError",
    "HostTrace",
    "InputError",
    "KinetoTrace",
    "LinkedTrace",
    "LumosError",
    "MissingDependencyError",
    "NoTracesError",
    "Replay",
    "SimResult",
    "SimulationError",
    "TraceFormatError",
    "TracedCost",
    "Workload",
    "__version__",
    "align_ranks",
    "build_graph",
    "example_trace_path",
    "from_chakra",
    "read_chakra",
    "read_kineto",
    "read_pytorch_et",
    "replay",
    "simulate",
    "to_chakra",
    "write_chakra",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lumos' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
