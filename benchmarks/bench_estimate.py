"""Speed of graph-edit what-ifs: a sweep of configurations over one recorded run.

    python benchmarks/bench_estimate.py [RUN_DIR] [--configs 20]

Builds the run's graphs once, detects the baseline, then estimates ``--configs`` scenarios
(layers, hidden, seq, FFN and micro-batch size changes, cycling) and prints the time per stage,
configurations per second and edited tasks per second. Without RUN_DIR it uses the bundled
example (a small run); the issue's figure is for a run of about 100k tasks, e.g. one recorded with

    OMP_NUM_THREADS=1 lumos collect -o big24 --steps 6 -- torchrun --nproc-per-node 2 \\
        -m lumos.examples.gpt --mode ddp --steps 8 --layers 24 --batch 4 --seq 32
"""

from __future__ import annotations

import argparse
import time

from lumos.estimate import estimate
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.scenario import Scenario
from lumos.examples_data import example_run_dir
from lumos.replay import build_workload


def scenarios(base: dict[str, int], n: int) -> list[Scenario]:
    """``n`` scenarios cycling through the model keys around the baseline's values."""
    layers, hidden, seq = base.get("layers", 2), base.get("hidden", 128), base.get("seq", 64)
    choices = [
        ("layers", [max(1, layers // 2), layers * 2, layers + 2, max(1, layers - 1)]),
        ("hidden", [hidden * 2, hidden // 2]),
        ("seq", [seq * 2, seq // 2]),
        ("microbatch_size", [base.get("microbatch_size", 4) * 2]),
        ("ffn", [base.get("ffn", 4 * hidden) * 2]),
    ]
    flat = [(k, v) for k, vs in choices for v in vs]
    return [Scenario(model=(flat[i % len(flat)],)) for i in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", nargs="?", default=str(example_run_dir()))
    p.add_argument("--configs", type=int, default=20)
    args = p.parse_args()
    t0 = time.perf_counter()
    workload, _ = build_workload([args.run])
    t1 = time.perf_counter()
    base = detect_baseline(workload)
    t2 = time.perf_counter()
    scen = scenarios(base.values, args.configs)
    est = estimate(workload, scen)
    t3 = time.perf_counter()
    tasks = workload.num_tasks
    print(f"run: {args.run}")
    print(f"tasks: {tasks} on {len(workload.graphs)} rank(s); baseline {base.values}")
    print(f"build graphs {t1 - t0:.2f} s, detect baseline {t2 - t1:.2f} s, "
          f"{len(scen)} configurations {t3 - t2:.2f} s")  # fmt: skip
    print(f"{len(scen) / (t3 - t2):.2f} configurations/s, "
          f"{tasks * len(scen) / (t3 - t2) / 1e3:.0f}k edited tasks/s")  # fmt: skip
    for r in est.rows[:4]:
        print(f"  {r.scenario.label:<24}{r.step_ns / 1e6:10.2f} ms")


if __name__ == "__main__":
    main()
