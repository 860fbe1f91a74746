"""A multi-GB Kineto trace end to end: a real trace replicated in time, then `lumos replay`.

Run on demand:  python benchmarks/bench_big.py [--copies 25] [--keep PATH]

Builds the big trace from df_index_resolver (realdata; 54 MB, 216k events): ``--copies``
copies of its events one after another (each copy's times shifted by the trace's span, its
correlation, External id and flow ids and ProfilerStep numbers offset, so that every copy is
a valid continuation), written as plain JSON to a temporary file (deleted at the end unless
``--keep``; 25 copies are about 1.3 GB). Then runs ``lumos replay FILE -o DIR --perfetto
NAME`` (``--perfetto``, default ``replay.perfetto.json``) stage by stage in a child process (read_kineto, build_graph,
replay, write_replay; compiled kernels loaded first) and prints each stage's seconds, the
child's wall time and peak RSS, and the ingest rate (MB of JSON per second of read_kineto).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from _realdata import trace_or_exit

_SHIFTED_ARGS = ("correlation", "External id")


def replicate(src: Path, copies: int, out: Path) -> tuple[int, int]:
    """Write ``copies`` time-shifted copies of ``src``'s events to ``out``; (bytes, events)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if "ts" in e]
    span = int(max(ts) - min(ts)) + 1000
    top = {k: max((e.get("args") or {}).get(k, 0) for e in events) + 1 for k in _SHIFTED_ARGS}
    flow = max((e.get("id", 0) for e in events if e.get("ph") in ("s", "f")), default=0) + 1
    steps = sum(1 for e in events if e.get("name", "").startswith("ProfilerStep#"))
    enc = msgspec.json.Encoder()
    n = 0
    with out.open("wb") as f:
        f.write(enc.encode(doc)[:-1] + b', "traceEvents": [')
        for k in range(copies):
            batch = []
            for e in events:
                if k and e.get("ph") == "M":
                    continue  # metadata once
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e2["ts"] + k * span
                if "id" in e2 and e2.get("ph") in ("s", "f"):
                    e2["id"] = e2["id"] + k * flow
                args = e2.get("args")
                if args and any(a in args for a in _SHIFTED_ARGS):
                    args = dict(args)
                    for a in _SHIFTED_ARGS:
                        if a in args and args[a] != -1:
                            args[a] = args[a] + k * top[a]
                    e2["args"] = args
                name = e2.get("name", "")
                if k and name.startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(name[13:]) + k * steps}"
                batch.append(e2)
            body = enc.encode(batch)[1:-1]
            f.write((b"," if k else b"") + body)
            n += len(batch)
        f.write(b"]}")
    return out.stat().st_size, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=25)
    ap.add_argument("--keep", type=Path, help="write the big trace here and keep it")
    ap.add_argument("--perfetto", default="replay.perfetto.json", help="its file name (extension "
                    "picks the format; default replay.perfetto.json, as lumos replay)")  # fmt: skip
    ap.add_argument("--stages", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.stages:
        stages(Path(a.stages[0]), Path(a.stages[1]), a.stages[2])
        return
    src = trace_or_exit("v100_stream_wait_event")
    with tempfile.TemporaryDirectory(prefix="lumos-big-") as tmp:
        big = a.keep or Path(tmp) / "big.json"
        t0 = time.perf_counter()
        size, events = replicate(src, a.copies, big)
        mb = size / 1e6
        print(f"trace: {mb:.0f} MB JSON, {events} events ({a.copies} copies of {src.name}), "
              f"written in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--stages", str(big), tmp, a.perfetto],
                              capture_output=True, text=True)  # fmt: skip
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
        if proc.returncode:
            raise SystemExit(f"replay failed ({proc.returncode}): {proc.stderr[-2000:]}")
        print(proc.stdout.rstrip())
        read_s = float(proc.stdout.split("read_kineto ")[1].split()[0])
        print(f"replay end to end: {wall:.1f} s, peak RSS {rss:.2f} GB; ingest {mb / read_s:.0f} "
              f"MB/s")  # fmt: skip


def stages(big: Path, out: Path, perfetto: str) -> None:
    """What `lumos replay FILE --perfetto NAME` does, stage by stage."""
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto
    from lumos.replay import replay, write_replay

    t = time.perf_counter()
    trace = read_kineto(big)
    marks = [("read_kineto", time.perf_counter() - t)]
    t = time.perf_counter()
    graph = build_graph(trace)
    marks.append(("build_graph", time.perf_counter() - t))
    del trace
    t = time.perf_counter()
    rep = replay(graph)
    marks.append(("replay", time.perf_counter() - t))
    t = time.perf_counter()
    paths = write_replay(rep, out / "out", perfetto=perfetto)
    marks.append(("write_replay", time.perf_counter() - t))
    print(f"  {graph.num_tasks} tasks; " + ", ".join(f"{n} {s:.1f} s" for n, s in marks))
    mb = Path(paths["perfetto"]).stat().st_size / 1e6
    print(f"  {perfetto}: {mb:.0f} MB, {mb / marks[-1][1]:.0f} MB/s of write_replay")


if __name__ == "__main__":
    main()
