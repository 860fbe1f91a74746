"""What a first command's Chakra write costs in NumPy (``lumos.chakra._encode_py``) vs compiling.

Run on demand:  python benchmarks/bench_encode_py.py [--repeat N] [TRACE]

On the execution graph of TRACE (default: df_index_resolver, realdata ``v100_stream_wait_event``,
76k tasks), mapped as ``lumos convert`` maps it (``convert_graph``, 162k nodes), times with each
encoder, interleaved, medians of ``--repeat``: ``convert_graph`` (whose attribute bytes are
``mapping_encode._encode`` or its twin) and ``write_chakra`` of the result (its records,
``_wire.encode_nodes`` or its twin), and prints the bytes each is charged against
``_encode_py.MAX_BYTES``. Then the compile the twins avoid: ``to_chakra`` + ``write_chakra`` of
the bundled example with the compiled encoders, in a fresh process with an empty
``NUMBA_CACHE_DIR``, against the same in a second process once that cache is filled.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

from _realdata import trace_or_exit
from lumos.chakra import _encode_py, write_chakra
from lumos.convert import convert_graph
from lumos.graph.build import build_graph
from lumos.ingest.kineto import read_kineto

_FIRST_WRITE = """
import time
from pathlib import Path
from lumos.chakra import _wire_py, write_chakra
from lumos.chakra.mapping import to_chakra
from lumos.examples_data import example_trace_path
from lumos.graph.build import build_graph
from lumos.ingest.kineto import read_kineto
g = build_graph(read_kineto(example_trace_path()))
t = time.perf_counter()
with _wire_py.compiled():
    write_chakra(to_chakra(g), Path({out!r}))
print(time.perf_counter() - t)
"""


def _seconds(fn: Callable[[], object], python: bool) -> float:
    with mock.patch.object(_encode_py, "use_python", lambda compiled, nbytes: python):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t


def _first_write_s(cache: str, out: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "LUMOS_JIT_BACKGROUND": "0"}
    code = _FIRST_WRITE.format(out=out)
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return float(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    graph = build_graph(read_kineto(args.trace or trace_or_exit("v100_stream_wait_event")))
    trace = convert_graph(graph)[0]  # compiles (or loads) both encoders before timing
    times: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.0.et"
        write_chakra(trace, path)
        for _ in range(args.repeat):
            for python in (True, False):
                for step, fn in (("convert_graph", lambda: convert_graph(graph)),
                                 ("write_chakra", lambda: write_chakra(trace, path))):  # fmt: skip
                    times.setdefault((step, python), []).append(_seconds(fn, python))
        size = path.stat().st_size
        names_off = np.zeros(len(trace.names) + 1, dtype=np.int64)
        np.cumsum([len(s.encode()) for s in trace.names], out=names_off[1:])
        copied = _encode_py.copied_bytes(trace, names_off)
        print(f"{trace.num_nodes:,} nodes, {trace.attr_len.size:,} attributes, a {size / 1e6:.1f} "
              f"MB ET ({copied / 2**20:.1f} MiB copied spans; MAX_BYTES "
              f"{_encode_py.MAX_BYTES / 2**20:.0f} MiB), medians of {args.repeat}:")  # fmt: skip
        for step in ("convert_graph", "write_chakra"):
            py, c = (statistics.median(times[(step, p)]) for p in (True, False))
            print(f"  {step:13} NumPy twin {py:.3f} s, compiled {c:.3f} s ({py - c:+.3f} s)")
        cold = _first_write_s(f"{d}/cache", f"{d}/first.0.et")
        warm = _first_write_s(f"{d}/cache", f"{d}/second.0.et")
    print(f"to_chakra + write_chakra of the bundled example, compiled encoders, fresh process: "
          f"{cold:.2f} s with an empty NUMBA_CACHE_DIR (the compile), {warm:.2f} s cached")  # fmt: skip


if __name__ == "__main__":
    main()
