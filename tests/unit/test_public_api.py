"""The curated public API: `lumos.__all__` is pinned, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import lumos

PINNED = [
    "ChakraFormatError", "ChakraTrace", "ChakraWorkload", "ConfigError", "CostModel",
    "ExecGraph", "GraphError", "HostTrace", "InputError", "KinetoTrace", "LinkedTrace",
    "LumosError", "MissingDependencyError", "NoTracesError", "Replay", "SimResult",
    "SimulationError", "TraceFormatError", "TracedCost", "Workload", "__version__",
    "align_ranks", "build_graph", "example_trace_path", "read_chakra", "read_kineto",
    "read_pytorch_et", "replay", "simulate", "write_chakra", "to_chakra", "from_chakra",
]  # fmt: skip


def test_all_is_pinned():
    assert sorted(lumos.__all__) == sorted(PINNED)


def test_every_public_name_resolves():
    for name in lumos.__all__:
        assert getattr(lumos, name) is not None


def test_errors_share_one_root():
    for name in lumos.__all__:
        obj = getattr(lumos, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, lumos.LumosError)


def test_import_is_light_and_torch_free():
    code = "import sys, lumos; print('numpy' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
