"""First run after install vs second: what an empty compile cache costs a user's `lumos replay`.

Run on demand:  python benchmarks/bench_first_run.py [--repeat N] [TRACE ...]
Default traces: the bundled example (2 ranks, lumos's own gloo recording),
df_index_resolver (76k tasks) and upstream's Chakra ET ``chakra/tests/data/chakra.0.et``
(3664 nodes, 184k deps: the Chakra decoder and dependency order), both realdata (see
``tests/REALDATA.md``).

For each trace and repetition, in a fresh empty ``NUMBA_CACHE_DIR`` (what a new install has):
``lumos replay TRACE`` (first run, as a user types it: it starts the background compiler),
then ``python -m lumos._jit`` (untimed: waits until the cache is complete) and a wait until the
first run's background compiler has exited too (on Linux; it would otherwise slow the second
run down), then the same replay again (second run). Prints both wall times, the penalty (first - second) and the ratio,
per pair and as medians; also the time ``python -m lumos._jit`` takes on an empty cache, which
is what a first replay waited for before kernels could run interpreted or in the background.
The machine is shared: compare the two runs of one pair, not runs across days. Last, per trace:
the median first and second run and their difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _realdata import trace_or_exit
from lumos.examples_data import example_trace_path

LUMOS = [sys.executable, "-m", "lumos"]


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0


def _wait_for_processes(marker: str, timeout_s: float = 600.0) -> None:
    """Wait until no process has ``marker`` (``NAME=value``) in its environment: the detached
    background compiler a first run started. Linux only (``/proc``); elsewhere no wait."""
    needle = marker.encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = False
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                alive = needle in environ.read_bytes().split(b"\0")
            except OSError:  # gone, or another user's
                continue
            if alive:
                break
        if not alive:
            return
        time.sleep(0.2)


def pair(trace: Path, out: Path, cache: Path) -> tuple[float, float, float]:
    """(first run, time to complete the cache after it, second run) in seconds."""
    marker = f"LUMOS_BENCH_FIRST_RUN={cache.name}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    replay = [*LUMOS, "replay", str(trace), "-o", str(out)]
    first = _timed(replay, dict(env, LUMOS_BENCH_FIRST_RUN=cache.name))
    fill = _timed([sys.executable, "-m", "lumos._jit"], env)
    _wait_for_processes(marker)
    second = _timed(replay, env)
    return first, fill, second


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    traces = a.traces or [
        example_trace_path().parent,
        trace_or_exit("v100_stream_wait_event"),
        trace_or_exit("chakra_pytorch_converted"),
    ]
    with tempfile.TemporaryDirectory(prefix="lumos-first-run-") as tmp:
        cold = Path(tmp) / "cold"
        env = {**os.environ, "NUMBA_CACHE_DIR": str(cold)}
        compile_all = _timed([sys.executable, "-m", "lumos._jit"], env)
        print(
            f"compile every kernel into an empty cache (python -m lumos._jit): {compile_all:.2f} s"
        )
        print(f"{'trace':<34}{'first s':>9}{'second s':>10}{'penalty s':>11}{'ratio':>7}")
        penalties: list[float] = []
        ratios: list[float] = []
        per_trace: dict[str, list[tuple[float, float]]] = {}
        for trace in traces:
            for i in range(a.repeat):
                cache = Path(tmp) / f"cache-{trace.name}-{i}"
                first, _, second = pair(trace, Path(tmp) / "out", cache)
                penalties.append(first - second)
                ratios.append(first / second)
                per_trace.setdefault(trace.name, []).append((first, second))
                print(f"{trace.name[:33]:<34}{first:9.2f}{second:10.2f}"
                      f"{first - second:11.2f}{first / second:7.2f}")  # fmt: skip
        print(f"first-run penalty: median {statistics.median(penalties):.2f} s, "
              f"max {max(penalties):.2f} s; first/second ratio: median "
              f"{statistics.median(ratios):.2f}x, max {max(ratios):.2f}x")  # fmt: skip
        for name, runs in per_trace.items():
            first, second = (statistics.median(r[k] for r in runs) for k in (0, 1))
            print(f"{name}: first {first:.2f} s, second {second:.2f} s (medians), "
                  f"penalty {first - second:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
