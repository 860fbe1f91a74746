"""``python -m tests.refmodel OUTDIR [--seed N]``: every scenario's baseline and changed-run
traces (``SCENARIO.LABEL.json.gz``) and ``truth.json`` with their per-step ground truth."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .api import CHANGES, run_scenario
from .kineto import to_kineto, write_trace
from .scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.refmodel", description=__doc__)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="repeatable")
    a = ap.parse_args(argv)
    scenarios: dict[str, dict[str, object]] = {}
    for name in a.scenario or list(SCENARIOS):
        runs: dict[str, object] = {}
        for label, scales in CHANGES.items():
            ex = run_scenario(name, seed=a.seed, **scales)
            file = f"{name}.{label}.json.gz"
            write_trace(to_kineto(ex), a.outdir / file)
            durs = [(n, e - s) for n, s, e in ex.steps()]
            steps = [{"name": n, "dur_ns": d} for n, d in durs]
            runs[label] = {"file": file, "scales": scales, "steps": steps}
            print(f"{file:<44} " + " ".join(f"{d / 1e6:7.3f}" for _, d in durs) + " ms")
        scenarios[name] = runs
    truth = {"seed": a.seed, "unit": "ns", "scenarios": scenarios}
    (a.outdir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
