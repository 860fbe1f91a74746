"""End-to-end ``lumos replay RUN -o DIR`` of the 8-rank DLRM job replicated to 256 ranks on disk.

Run on demand:  python benchmarks/bench_replay_ranks.py [--ranks 256] [--repeat 3] [--stages]

The 8 DLRM Kineto traces (realdata ``dlrm_kineto_8rank``) are written ``--ranks / 8`` times into
a temporary run directory, rank ``r + 8k`` a copy of rank ``r`` with its ``distributedInfo``
saying rank ``r + 8k`` of ``--ranks`` (what a user's directory of a replicated or lockstep job
holds). Then ``lumos replay RUN -o OUT`` runs as a user runs it (a fresh process: imports,
reading, building, simulating, every output written), the best of ``--repeat``; prints its wall
seconds, the traces' and the outputs' MB and tasks/s. ``--stages`` also times the stages in
this process (build_workload, replay, write_replay), the best of ``--repeat``. ``--distinct``
makes every copy a distinct trace (copy ``k``'s first kernel lasts ``k`` us longer): no build or
output is shared, the cost of a job whose ranks all recorded different bytes.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _realdata import trace_or_exit
from _timing import best_of
from lumos.ingest.detect import expand_paths

_INFO = re.compile(
    rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)(\d+)([^{}]*?"world_size"\s*:\s*)(\d+)'
)


_DUR = re.compile(rb'"dur"\s*:\s*(\d+)')


def write_run(run: Path, ranks: int, distinct: bool = False) -> int:
    """Write the replicated run directory; returns its size in bytes."""
    refs = [r for r in expand_paths([trace_or_exit("dlrm_kineto_8rank")]) if r.kind == "kineto"]
    base = [r.read() for r in refs]
    size = 0
    for k in range(ranks // len(base)):
        for data in base:
            m = _INFO.search(data)
            if m is None:
                raise SystemExit("dlrm_kineto_8rank: no distributedInfo rank / world_size")
            rank = int(m.group(2)) + len(base) * k
            out = data[: m.start(2)] + b"%d" % rank + m.group(3) + b"%d" % ranks + data[m.end(4) :]
            d = _DUR.search(out, out.index(b'"cat": "kernel"')) if distinct and k else None
            if d is not None:
                out = out[: d.start(1)] + b"%d" % (int(d.group(1)) + k) + out[d.end(1) :]
            (run / f"rank{rank:04d}.pt.trace.json").write_bytes(out)
            size += len(out)
    return size


def _stages(run: Path, out: Path, repeat: int) -> None:
    from lumos.replay import build_workload, replay, write_replay

    t_build, (w, sources) = best_of(lambda: build_workload([run]), repeat)
    t_replay, rep = best_of(lambda: replay(w, sources=sources), repeat)
    t_write, _ = best_of(lambda: write_replay(rep, out), repeat)
    print(f"stages (in this process, best of {repeat}): build_workload {t_build:.2f} s, "
          f"replay {t_replay:.2f} s, write_replay {t_write:.2f} s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--distinct", action="store_true", help="every rank a distinct trace")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumos-ranks-") as tmp:
        run, out = Path(tmp) / "run", Path(tmp) / "out"
        run.mkdir()
        size = write_run(run, a.ranks, a.distinct)
        cmd = [sys.executable, "-m", "lumos", "replay", str(run), "-o", str(out)]
        subprocess.run(cmd, check=True, capture_output=True)  # page cache
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            best = min(best, time.perf_counter() - t0)
        # one a replayed task (the recording beside it and the critical-path copies have none)
        tasks = (out / "replay.perfetto.json").read_bytes().count(b'"recorded_ts_us":')
        out_mb = sum(f.stat().st_size for f in out.iterdir()) / 1e6
        what = "distinct" if a.distinct else "replicated"
        print(f"{a.ranks} ranks, {size / 1e6:.0f} MB of Kineto traces ({what}), {tasks} tasks")
        print(f"lumos replay RUN -o OUT (end to end, best of {a.repeat}): {best:.2f} s, "
              f"{tasks / best:.0f} tasks/s, {out_mb:.0f} MB written")  # fmt: skip
        if a.stages:
            _stages(run, out, a.repeat)


if __name__ == "__main__":
    main()
