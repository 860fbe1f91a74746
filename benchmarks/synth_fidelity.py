"""Fidelity of synthetic workloads to their sources: the figures in the README.

    python benchmarks/synth_fidelity.py [--seeds 3] [--more]

For each source the issue names (``nccl_data``, ``df_index_resolver``, the 8-rank DLRM run from
realdata, and the bundled demo run), fits a model on it alone, samples it with the source's
configuration for each seed and compares the sample with its source
(:func:`lumos.synth.fidelity.compare`, what ``lumos synth report`` prints): the mean replayed
step per rank-step, the largest change of a four-way breakdown share (points), of a bounded
op-class count per step and of the communication bytes per step, and whether every bound of
the issue (5 %, 5 points, 5 %, 2 %) was met. ``tests/synth/test_fit_sample.py`` asserts the
same. ``--more`` adds realdata traces synth was not developed on (``rccl_mi300``,
``sendrecv_5streams_rank0``, ``gpu_bound_v100``, ``alltoall_4streams``, ``legacy_2021_v100``,
``gloo_cpu_only``) and names the bounds each seed missed. Run on demand, not in CI.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import lumos
from _realdata import trace_or_exit
from lumos.replay import build_workload
from lumos.synth.fidelity import compare
from lumos.synth.fit import fit_model
from lumos.synth.sample import plan_sample, sample_workload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--more", action="store_true", help="also traces synth was not tuned on")
    args = p.parse_args()
    sources = {
        "nccl_data": trace_or_exit("nccl_a100"),
        "df_index_resolver": trace_or_exit("v100_stream_wait_event"),
        "dlrm 8 ranks": trace_or_exit("dlrm_kineto_8rank"),
        "bundled demo": Path(lumos.example_trace_path()).parent,
    }
    if args.more:
        for name in ("rccl_mi300", "sendrecv_5streams_rank0", "gpu_bound_v100",
                     "alltoall_4streams", "legacy_2021_v100", "gloo_cpu_only"):  # fmt: skip
            sources[name] = trace_or_exit(name)
    print(f"{'source':<20}{'seed':>5}{'step ms':>10}{'sample':>10}{'error':>8}"
          f"{'share pts':>11}{'class %':>9}{'comm %':>8}  bounds")  # fmt: skip
    for name, path in sources.items():
        t0 = time.perf_counter()
        model = fit_model([str(path)])
        w, _ = build_workload([str(path)])
        for seed in range(1, args.seeds + 1):
            fid = compare(w, sample_workload(plan_sample(model, seed=seed)))
            step = fid.row("step_time_ns")
            worst = {kind: max((abs(r.delta or 0) for r in fid.rows if r.bound is not None
                                and r.metric.startswith(kind)), default=0.0)
                     for kind in ("breakdown.", "class.", "comm.bytes_per_step")}  # fmt: skip
            print(f"{name:<20}{seed:>5}{step.source / 1e6:>10.2f}{step.candidate / 1e6:>10.2f}"
                  f"{step.delta * 100:>+7.1f}%{worst['breakdown.'] * 100:>11.1f}"
                  f"{worst['class.'] * 100:>8.1f}%{worst['comm.bytes_per_step'] * 100:>7.1f}%"
                  f"  {'met' if fid.ok else 'missed: ' + ', '.join(r.metric for r in fid.failures())}")  # fmt: skip
        print(f"  ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
