"""Fidelity of synthetic workloads to their sources: the figures in the README.

    python benchmarks/synth_fidelity.py [--seeds 3]

For each source the issue names (``nccl_data``, ``df_index_resolver``, the 8-rank DLRM run from
realdata, and the bundled demo run), fits a model on it alone, samples it with the source's
configuration for each seed, replays source and sample, and prints per seed: the mean replayed
step (over ranks and steps) against the source's, the largest change of a four-way breakdown
share (points), of an op-class count per step (classes holding 1 % of the tasks or more) and of
the communication bytes per step. ``tests/synth/test_fit_sample.py`` asserts the same with the
issue's bounds (5 %, 5 points, 5 %, 2 %). Run on demand, not in CI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _realdata import ROOT, trace_or_exit

sys.path.insert(0, str(ROOT / "tests"))

from synth.test_fit_sample import _stats  # noqa: E402

import lumos  # noqa: E402
from lumos.replay import build_workload  # noqa: E402
from lumos.synth.classes import CLASSES  # noqa: E402
from lumos.synth.fit import fit_model  # noqa: E402
from lumos.synth.sample import plan_sample, sample_workload  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args()
    sources = {
        "nccl_data": trace_or_exit("nccl_a100"),
        "df_index_resolver": trace_or_exit("v100_stream_wait_event"),
        "dlrm 8 ranks": trace_or_exit("dlrm_kineto_8rank"),
        "bundled demo": Path(lumos.example_trace_path()).parent,
    }
    print(f"{'source':<20}{'seed':>5}{'step ms':>10}{'sample':>10}{'error':>8}"
          f"{'share pts':>11}{'class %':>9}{'comm %':>8}")  # fmt: skip
    for name, path in sources.items():
        t0 = time.perf_counter()
        model = fit_model([str(path)])
        w, _ = build_workload([str(path)])
        src = _stats(w)
        big = src["counts"] >= 0.01 * src["counts"].sum()
        for seed in range(1, args.seeds + 1):
            got = _stats(sample_workload(plan_sample(model, seed=seed)))
            share = max(abs(got["share"][k] - v) for k, v in src["share"].items())
            cls = abs(got["counts"][big] / src["counts"][big] - 1).max()
            comm = abs(got["comm"] / src["comm"] - 1) if src["comm"] else 0.0
            print(f"{name:<20}{seed:>5}{src['step'] / 1e6:>10.2f}{got['step'] / 1e6:>10.2f}"
                  f"{(got['step'] / src['step'] - 1) * 100:>+7.1f}%{share * 100:>11.1f}"
                  f"{cls * 100:>8.1f}%{comm * 100:>7.1f}%")  # fmt: skip
        print(f"  ({len(CLASSES)} classes in the vocabulary; {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
