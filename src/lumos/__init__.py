"""lumos: trace-driven performance modeling of distributed LLM training.

The pipeline, one noun per stage (see the README)::

    read_kineto / read_pytorch_et -> KinetoTrace / HostTrace
    link                          -> LinkedTrace
    build_graph                   -> ExecGraph (per rank) / Workload
    read_chakra / write_chakra   <-> Workload
    simulate                      -> SimResult
    estimate                      -> prediction tables
"""

from lumos._version import __version__
from lumos.chakra import ChakraTrace, ChakraWorkload, read_chakra, write_chakra
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
from lumos.ingest.pytorch_et import HostTrace, read_pytorch_et
from lumos.link import LinkedTrace

__all__ = [
    "ChakraFormatError",
    "ChakraTrace",
    "ChakraWorkload",
    "ConfigError",
    "GraphError",
    "HostTrace",
    "InputError",
    "LinkedTrace",
    "LumosError",
    "MissingDependencyError",
    "NoTracesError",
    "SimulationError",
    "TraceFormatError",
    "__version__",
    "read_chakra",
    "read_pytorch_et",
    "write_chakra",
]
