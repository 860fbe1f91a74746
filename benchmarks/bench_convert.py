"""Convert throughput (Kineto -> Chakra ET) and replay fidelity of converted files.

    .venv/bin/python benchmarks/bench_convert.py            # throughput on the largest trace
    .venv/bin/python benchmarks/bench_convert.py --table    # + replay table on the test traces

Throughput: events/s of the whole per-rank pipeline (read Kineto, build graph, map, write .et)
and of the mapping stage alone (graph -> ChakraTrace -> bytes), on HTA's
``df_index_resolver.json.gz`` (V100, 216k events), read in place from the realdata folder
(``LUMOS_REALDATA`` or ``../shared/realdata``; see ``tests/REALDATA.md``). When mlc-chakra's
converter is installed its speed is NOT measured here (it needs a PyTorch ET + HTA linking, which
this Kineto-only trace lacks); compare with its published ~10k nodes/s only with care.

Table: per trace, mean step time replayed from the original Kineto graph, from the converted
.et, and from the ``--compat upstream`` .et, with the relative differences.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

from _realdata import REPLAY_TRACES, TRACES, trace_or_exit
from _timing import best_of

LARGEST = "v100_stream_wait_event"
# phenomenon names of tests/realdata.py: the replay traces with GPU work
TABLE = list(REPLAY_TRACES[:9])


def throughput(repeat: int) -> None:
    from lumos.chakra import read_chakra, write_chakra
    from lumos.chakra.mapping import from_chakra, to_chakra
    from lumos.convert import RankJob, convert_rank
    from lumos.graph.build import build_graph
    from lumos.ingest.detect import expand_paths
    from lumos.ingest.kineto import read_kineto

    largest = trace_or_exit(LARGEST)
    trace = read_kineto(largest)
    n_ev = len(trace.events)
    graph = build_graph(trace)
    to_chakra(graph)  # compile
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.0.et"
        t_map, ct = best_of(lambda: to_chakra(graph), repeat)
        t_write, _ = best_of(lambda: write_chakra(ct, out), repeat)
        t_read, back = best_of(lambda: from_chakra(read_chakra(out)), repeat)
        ref = expand_paths([largest])[0]
        job = RankJob(0, ref, None, str(out))
        t_all, _ = best_of(lambda: convert_rank(job), repeat)
        size = out.stat().st_size
    print(f"trace: {TRACES[LARGEST]}: {n_ev} events, {graph.num_tasks} tasks, "
          f"{graph.num_edges} edges, {size / 1e6:.1f} MB .et")  # fmt: skip
    print(f"  end to end (read+build+map+write): {t_all:7.3f} s  {n_ev / t_all:12,.0f} events/s")
    print(
        f"  to_chakra (graph -> trace):        {t_map:7.3f} s  {graph.num_tasks / t_map:12,.0f} tasks/s"
    )
    print(
        f"  write_chakra:                      {t_write:7.3f} s  {size / t_write / 1e6:12,.1f} MB/s"
    )
    print(
        f"  read_chakra + from_chakra:         {t_read:7.3f} s  {graph.num_tasks / t_read:12,.0f} tasks/s"
    )
    del back
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak:.0f} MB")


def _mean_step(graph) -> float:
    from lumos.sim import simulate

    steps = simulate(graph).steps()
    cov = graph.annotations.first_task_idx >= 0
    vals = [s["predicted_ns"] for s, c in zip(steps, cov, strict=True) if c]
    meas = [s["measured_ns"] for s, c in zip(steps, cov, strict=True) if c]
    return float(np.mean(vals)), float(np.mean(meas))


def table() -> None:
    from lumos.chakra import read_chakra, write_chakra
    from lumos.chakra.mapping import from_chakra
    from lumos.convert import convert_graph, upstream_compat
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    rows = [(TRACES[p], trace_or_exit(p)) for p in TABLE]
    rows.append(("example (bundled 2-rank gloo recording, rank 0)", example_trace_path()))
    print(f"{'trace':<58}{'measured':>10}{'kineto':>10}{'.et':>10}{'diff':>8}"
          f"{'upstream':>10}{'under':>8}{'no delay':>10}{'under':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in rows:
            g = build_graph(read_kineto(path))
            pred, meas = _mean_step(g)
            out = {}
            variants = {"lumos": g, "upstream": upstream_compat(g),
                        "no_delays": upstream_compat(g, keep_delays=False)}  # fmt: skip
            for key, gv in variants.items():
                t, _ = convert_graph(gv)
                f = Path(tmp) / f"{key}.0.et"
                write_chakra(t, f)
                out[key] = _mean_step(from_chakra(read_chakra(f)))[0]
            cells = "".join(
                f"{out[k] / 1e6:>10.3f}{(out[k] - pred) / pred * 100:>7.2f}%"
                for k in ("lumos", "upstream", "no_delays")
            )
            print(f"{label:<58}{meas / 1e6:>10.3f}{pred / 1e6:>10.3f}{cells}")
    print("(mean step ms over the steps a replay covers; % vs the Kineto graph's replay. "
          "upstream = --compat upstream; no delay = that with every edge delay 0, i.e. what a "
          "data_deps-only consumer sees)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--table", action="store_true", help="also print the replay table")
    args = ap.parse_args(argv)
    throughput(args.repeat)
    if args.table:
        table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
