"""Changing ``pp``, measured: the bundled pipeline with 2 stages (2 ranks) and with 4 stages (4
ranks), in back-to-back jobs (one configuration per job: the rank counts differ), ``--repeats``
times, and ``lumos estimate --set pp=4`` from each 2-stage run.

    python benchmarks/whatif_pp.py -o OUT [--steps 8] [--repeats 2]

Prints per repeat the measured median steps and the estimate's error. On a machine with fewer
cores than 4 ranks, the 4-stage job's processes share cores and its measured steps include that
contention, which the estimate (each rank on its own core) does not model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from lumos.collect import CollectConfig, run_collect, torchrun_command
from lumos.estimate import estimate, parse_scenario
from lumos.replay import build_workload

sys.path.insert(0, str(Path(__file__).parent))
from whatif_pairs import measured_steps_ms

MODEL = ["--layers", "8", "--hidden", "128", "--seq", "32", "--batch", "8", "--microbatches", "4"]


def _job(out: Path, stages: int, steps: int) -> Path:
    run = out / f"pp{stages}"
    args = ["--mode", "pipeline", "--threads", "1", *MODEL]
    res = run_collect(CollectConfig(run_dir=run, steps=steps, warmup=2, wait=2),
                      torchrun_command("lumos.examples.gpt", args, nproc=stages),
                      env=dict(os.environ, OMP_NUM_THREADS="1"), log=out / f"pp{stages}.log",
                      timeout_s=1800)  # fmt: skip
    if res.exit_code != 0:
        raise SystemExit(f"pp={stages} job failed (exit {res.exit_code}); see {out}")
    return run


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    rows = []
    for rep in range(args.repeats):
        out = args.out / f"repeat{rep}"
        two, four = _job(out, 2, args.steps), _job(out, 4, args.steps)
        m2 = statistics.median(measured_steps_ms(two))
        m4 = statistics.median(measured_steps_ms(four))
        workload, _ = build_workload([str(two)])
        est = estimate(workload, [parse_scenario(["pp=4"])])
        e4 = est.rows[1].median_step_ns / 1e6
        rows.append({"pp2_ms": m2, "pp4_ms": m4, "estimate_pp4_ms": round(e4, 3),
                     "error_pct": round(100 * (e4 - m4) / m4, 1)})  # fmt: skip
        print(f"repeat {rep}: pp=2 {m2:.1f} ms, pp=4 measured {m4:.1f} ms "
              f"({100 * (m4 - m2) / m2:+.1f} %), estimated {e4:.1f} ms "
              f"({100 * (e4 - m2) / m2:+.1f} %), error {rows[-1]['error_pct']:+.1f} %")  # fmt: skip
    (args.out / "whatif_pp.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
