"""Perfetto (Chrome JSON) trace writing speed of a replay: streamed plain and gzip, vs a dict.

    .venv/bin/python benchmarks/bench_perfetto.py [TRACE] [--repeat 3]

Replays a real trace (default HTA's ``df_index_resolver.json.gz``, read in place from the
realdata folder; see ``tests/REALDATA.md``) and times, interleaved in one run, ``--repeat``
rounds of: ``write_chrome_trace`` to ``.json`` and to ``.json.gz`` (streamed), and the way it
was written before, ``json.dump`` of the whole ``to_chrome_trace`` dict. Prints MB/s of JSON
(medians) and the ratio of the streamed plain write to the dict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _realdata import trace_or_exit
from lumos.graph.build import build_graph
from lumos.ingest.kineto import read_kineto
from lumos.report.perfetto import to_chrome_trace, write_chrome_trace
from lumos.sim import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    g = build_graph(read_kineto(a.trace or trace_or_exit("v100_stream_wait_event")))
    r = simulate(g)
    times: dict[str, list[float]] = {"plain": [], "gz": [], "dict": []}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.repeat):
            for how in times:
                t0 = time.perf_counter()
                if how == "dict":
                    with open(Path(d) / "dict.json", "w") as f:
                        json.dump(to_chrome_trace(g, r), f, separators=(",", ":"), sort_keys=True)
                else:
                    write_chrome_trace(Path(d) / f"t.json{'.gz' if how == 'gz' else ''}", g, r)
                times[how].append(time.perf_counter() - t0)
        mb = (Path(d) / "t.json").stat().st_size / 1e6
        gz_mb = (Path(d) / "t.json.gz").stat().st_size / 1e6
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{g.num_tasks} tasks, {mb:.1f} MB JSON ({gz_mb:.1f} MB gzip)")
    print(f"streamed .json    {med['plain']:.2f} s  {mb / med['plain']:.0f} MB/s")
    print(f"streamed .json.gz {med['gz']:.2f} s  {mb / med['gz']:.0f} MB/s (of JSON)")
    print(f"dict + json.dump  {med['dict']:.2f} s  {mb / med['dict']:.0f} MB/s")
    ratio = statistics.median(d / p for d, p in zip(times["dict"], times["plain"], strict=True))
    print(f"streamed is {ratio:.1f}x the dict")


if __name__ == "__main__":
    main()
