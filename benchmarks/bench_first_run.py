"""First run after install vs second: what an empty compile cache costs a user's first command.

Run on demand:  python benchmarks/bench_first_run.py [--repeat N] [TRACE ...]
Default commands: ``lumos replay`` of the bundled example (2 ranks, lumos's own gloo recording),
of df_index_resolver (76k tasks) and of upstream's Chakra ET ``chakra/tests/data/chakra.0.et``
(3664 nodes, 184k deps: the Chakra decoder and dependency order); ``lumos info chakra.0.et``
(attribute values, critical path) and ``lumos convert df_index_resolver`` (the Chakra encoder),
realdata for all but the example (see ``tests/REALDATA.md``). TRACE arguments replace them with
``lumos replay TRACE`` each.

For each command and repetition, in a fresh empty ``NUMBA_CACHE_DIR`` (what a new install has):
the command (first run, as a user types it: it starts the background compiler), then ``python
-m lumos._jit`` (untimed: waits until the cache is complete) and a wait until the first run's
background compiler has exited too (on Linux; it would otherwise slow the second run down),
then the same command again (second run). Prints both wall times, the penalty (first - second)
and the ratio, per pair and as medians; also the time ``python -m lumos._jit`` takes on an
empty cache, which is what a first command waited for before kernels could run interpreted or in
the background. The machine is shared: compare the two runs of one pair, not runs across days.
Last, per command: the median first and second run and their difference.
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


def pair(args: list[str], cache: Path) -> tuple[float, float, float]:
    """(first run, time to complete the cache after it, second run) of ``lumos ARGS``, seconds."""
    marker = f"LUMOS_BENCH_FIRST_RUN={cache.name}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    cmd = [*LUMOS, *args]
    first = _timed(cmd, dict(env, LUMOS_BENCH_FIRST_RUN=cache.name))
    fill = _timed([sys.executable, "-m", "lumos._jit"], env)
    _wait_for_processes(marker)
    second = _timed(cmd, env)
    return first, fill, second


def _commands(traces: list[Path], out: Path) -> list[tuple[str, list[str]]]:
    """(label, lumos arguments) of each command timed."""
    if traces:
        return [(f"replay {t.name}", ["replay", str(t), "-o", str(out)]) for t in traces]
    kineto = trace_or_exit("v100_stream_wait_event")
    et = trace_or_exit("chakra_pytorch_converted")
    return [
        ("replay example", ["replay", str(example_trace_path().parent), "-o", str(out)]),
        ("replay df_index_resolver", ["replay", str(kineto), "-o", str(out)]),
        ("replay chakra.0.et", ["replay", str(et), "-o", str(out)]),
        ("info chakra.0.et", ["info", str(et)]),
        ("convert df_index_resolver", ["convert", str(kineto), "-o", str(out / "dfi")]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumos-first-run-") as tmp:
        commands = _commands(a.traces, Path(tmp) / "out")
        cold = Path(tmp) / "cold"
        env = {**os.environ, "NUMBA_CACHE_DIR": str(cold)}
        compile_all = _timed([sys.executable, "-m", "lumos._jit"], env)
        print(
            f"compile every kernel into an empty cache (python -m lumos._jit): {compile_all:.2f} s"
        )
        print(f"{'command':<34}{'first s':>9}{'second s':>10}{'penalty s':>11}{'ratio':>7}")
        penalties: list[float] = []
        ratios: list[float] = []
        per_command: dict[str, list[tuple[float, float]]] = {}
        for k, (label, args) in enumerate(commands):
            for i in range(a.repeat):
                cache = Path(tmp) / f"cache-{k}-{i}"
                first, _, second = pair(args, cache)
                penalties.append(first - second)
                ratios.append(first / second)
                per_command.setdefault(label, []).append((first, second))
                print(f"{label[:33]:<34}{first:9.2f}{second:10.2f}"
                      f"{first - second:11.2f}{first / second:7.2f}")  # fmt: skip
        print(f"first-run penalty: median {statistics.median(penalties):.2f} s, "
              f"max {max(penalties):.2f} s; first/second ratio: median "
              f"{statistics.median(ratios):.2f}x, max {max(ratios):.2f}x")  # fmt: skip
        for name, runs in per_command.items():
            first, second = (statistics.median(r[k] for r in runs) for k in (0, 1))
            print(f"{name}: first {first:.2f} s, second {second:.2f} s (medians), "
                  f"penalty {first - second:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
