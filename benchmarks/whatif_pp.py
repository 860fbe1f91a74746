"""Changing ``pp``, measured: the bundled pipeline with ``--from`` stages and with ``--to``
stages (one rank each), in back-to-back jobs (one configuration per job: the rank counts
differ), ``--repeats`` times, and ``lumos estimate --set pp=TO`` from each ``--from`` run.

    python benchmarks/whatif_pp.py -o OUT [--from 2] [--to 4] [--steps 8] [--repeats 2]

Prints per repeat the measured median steps and the estimate's error. On a machine with fewer
cores than ranks, a job's processes share cores and its measured steps include that contention,
which the estimate (each rank on its own core) does not model: ``--from 2 --to 1`` (stages
merged onto one rank) is the pair a 2-core machine measures fairly.
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
    p.add_argument("--from", dest="src", type=int, default=2, help="traced stages")
    p.add_argument("--to", dest="dst", type=int, default=4, help="estimated stages")
    args = p.parse_args(argv)
    a, b = args.src, args.dst
    rows = []
    for rep in range(args.repeats):
        out = args.out / f"repeat{rep}"
        run_a, run_b = _job(out, a, args.steps), _job(out, b, args.steps)
        ma = statistics.median(measured_steps_ms(run_a))
        mb = statistics.median(measured_steps_ms(run_b))
        workload, _ = build_workload([str(run_a)])
        est = estimate(workload, [parse_scenario([f"pp={b}"])])
        eb = est.rows[1].median_step_ns / 1e6
        rows.append({f"pp{a}_ms": ma, f"pp{b}_ms": mb, f"estimate_pp{b}_ms": round(eb, 3),
                     "error_pct": round(100 * (eb - mb) / mb, 1)})  # fmt: skip
        print(f"repeat {rep}: pp={a} {ma:.1f} ms, pp={b} measured {mb:.1f} ms "
              f"({100 * (mb - ma) / ma:+.1f} %), estimated {eb:.1f} ms "
              f"({100 * (eb - ma) / ma:+.1f} %), error {rows[-1]['error_pct']:+.1f} %")  # fmt: skip
    (args.out / f"whatif_pp_{a}_to_{b}.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
