"""What one process costs a user: start-up, a first command after install, a first Chakra read.

Run on demand:  python benchmarks/bench_first_run.py [--repeat N] [TRACE ...]

Users run lumos one process per command (shell loops, notebooks, CI), so this times whole
processes, interleaved, ``--repeat`` rounds, medians:

1. start-up: a bare ``python -c pass``, ``lumos --version`` and ``lumos --help``; ``lumos info``
   of a 35 KB Kineto trace (``tests/data/gloo_pipelining_2stage/rank1``);
2. the first command after install against the same command again: ``lumos replay`` of the
   bundled example, of df_index_resolver and of upstream's Chakra ET ``chakra.0.et``, ``lumos
   info chakra.0.et`` and ``lumos convert df_index_resolver`` (realdata, see
   ``tests/REALDATA.md``; TRACE arguments replace them with ``lumos replay TRACE`` each). A first
   run gets an empty bytecode cache (its own ``PYTHONPYCACHEPREFIX``), which is all that a fresh
   install has not done yet: the kernels were compiled by ``pip install``;
3. the first Chakra read in a process against the second (``read_chakra`` of ``chakra.0.et`` and
   every node's id, name, type, deps, duration and attribute names, twice in one process);
4. a loop of 16 commands (``lumos info`` of the bundled example), after which no process it
   started may be left (Linux: every process's environment is searched for the loop's marker).

The machine is shared: compare figures of one run, not runs across days.
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
SMALL_TRACE = (
    Path(__file__).resolve().parents[1] / "tests/data/gloo_pipelining_2stage/rank1.kineto.json.gz"
)

#: A fresh process reads ``sys.argv[1]`` twice and prints the two wall times.
READ_TWICE = """
import sys, time
from lumos.chakra import read_chakra
def visit():
    n = 0
    for node in read_chakra(sys.argv[1]).iter_nodes():
        (node.id, node.name, node.type, node.data_deps, node.ctrl_deps, node.duration_micros,
         [a.name for a in node.attrs])
        n += 1
    return n
t0 = time.perf_counter(); visit(); t1 = time.perf_counter(); visit(); t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0


def startup(repeat: int) -> None:
    """Medians of the start-up commands, interleaved."""
    cmds = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "lumos --version": [*LUMOS, "--version"],
        "lumos --help": [*LUMOS, "--help"],
        "lumos info 35 KB trace": [*LUMOS, "info", str(SMALL_TRACE)],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(max(repeat, 5)):
        for k, cmd in cmds.items():
            times[k].append(_timed(cmd))
    bare = statistics.median(times["python -c pass"])
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"start-up {k}: {m:.3f} s (median; {m - bare:+.3f} s over bare Python)")


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


def first_vs_second(traces: list[Path], repeat: int, tmp: Path) -> None:
    """Each command with an empty bytecode cache, then again."""
    print(f"{'command':<34}{'first s':>9}{'second s':>10}{'penalty s':>11}{'ratio':>7}")
    penalties: list[float] = []
    ratios: list[float] = []
    per_command: dict[str, list[tuple[float, float]]] = {}
    for k, (label, args) in enumerate(_commands(traces, tmp / "out")):
        for i in range(repeat):
            env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / f"pyc-{k}-{i}")}
            first = _timed([*LUMOS, *args], env)
            second = _timed([*LUMOS, *args], env)
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


def chakra_first_read(repeat: int) -> None:
    """The first ``read_chakra`` + node visit in a process against the second."""
    et = trace_or_exit("chakra_pytorch_converted")
    pairs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", READ_TWICE, str(et)], check=True,
                             capture_output=True, text=True).stdout.split()  # fmt: skip
        pairs.append((float(out[0]), float(out[1])))
    first, second = (statistics.median(p[k] for p in pairs) for k in (0, 1))
    print(f"first Chakra read in a process: {first * 1e3:.1f} ms, second {second * 1e3:.1f} ms "
          f"(medians): {first / second:.2f}x")  # fmt: skip


def _left_behind(marker: str) -> int:
    """Processes whose environment holds ``marker`` (Linux; 0 elsewhere)."""
    needle = marker.encode()
    found = 0
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            found += needle in environ.read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            continue
    return found


def loop_leaves_nothing(n: int = 16) -> None:
    """``n`` commands in a row, then a count of the processes they left."""
    marker = f"LUMOS_BENCH_LOOP={os.getpid()}"
    env = {**os.environ, "LUMOS_BENCH_LOOP": str(os.getpid())}
    t0 = time.perf_counter()
    for _ in range(n):
        _timed([*LUMOS, "info", str(example_trace_path())], env)
    wall = time.perf_counter() - t0
    time.sleep(1.0)
    print(f"loop of {n} `lumos info` commands: {wall:.1f} s, {_left_behind(marker)} processes "
          f"left running after it")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    startup(a.repeat)
    with tempfile.TemporaryDirectory(prefix="lumos-first-run-") as tmp:
        first_vs_second(a.traces, a.repeat, Path(tmp))
    if not a.traces:
        chakra_first_read(a.repeat)
        loop_leaves_nothing()


if __name__ == "__main__":
    main()
