"""Collection overhead on the bundled GPT step (one process, CPU), and the demo's wall time.

    .venv/bin/python benchmarks/bench_collect.py [--steps 6] [--repeat 3] [--threads 1] [--demo]

Runs the bundled GPT model's training step in this process (no process group: DDP is not
involved, so the numbers are the profiler's own cost) under four settings: no collector, a
disabled collector (the hook compiled in, ``LUMOS_COLLECT_DIR`` unset), Kineto only, Kineto plus
Execution Trace. For each, prints the median wall time of the recorded steps and the ratio to
the baseline, plus trace sizes. ``--demo`` also times ``lumos demo`` end to end (collection,
replay, what-ifs, report) in a temporary directory. Wall-clock medians over ``--repeat`` runs;
these machines are noisy (7-15 % step to step), so read ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from lumos.collect import CollectConfig, collector
from lumos.examples import gpt


def _step_fn(cfg: gpt.GPTConfig, batch: int):
    model = gpt._Whole(gpt.build_stages(cfg, 1)[0], gpt.Head(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = gpt.batches(cfg, batch, gpt.SEED, torch.device("cpu"))

    def step() -> None:
        x, y = next(data)
        model(x, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _run(setting: str, steps: int, cfg: gpt.GPTConfig, batch: int, tmp: Path) -> tuple[float, int]:
    """Median ms of the recorded steps, and bytes written."""
    step = _step_fn(cfg, batch)
    col_cfg = None
    if setting in ("kineto", "kineto+et"):
        col_cfg = CollectConfig(run_dir=tmp / setting, steps=steps, warmup=1, wait=1,
                                execution_trace=setting == "kineto+et")  # fmt: skip
    skip = 2  # the iterations the collector waits and warms up on
    times: list[float] = []
    if setting == "none":
        for _ in range(skip + steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    else:
        with collector(col_cfg) as col:
            for _ in range(skip + steps):
                t0 = time.perf_counter()
                step()
                col.step()  # the step boundary is where the profiler flushes: count it
                times.append(time.perf_counter() - t0)
    size = sum(p.stat().st_size for p in (tmp / setting).glob("*")) if col_cfg else 0
    return statistics.median(times[skip:]) * 1e3, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--demo", action="store_true", help="also time `lumos demo` end to end")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = gpt.GPTConfig()
    print(f"bundled GPT step, 1 process, {args.threads} thread(s), batch {args.batch}, "
          f"{args.steps} recorded steps, median of {args.repeat} runs")  # fmt: skip
    base = None
    with tempfile.TemporaryDirectory() as d:
        for setting in ("none", "disabled", "kineto", "kineto+et"):
            runs = [_run(setting, args.steps, cfg, args.batch, Path(d) / str(i))
                    for i in range(args.repeat)]  # fmt: skip
            ms = statistics.median(r[0] for r in runs)
            size = runs[-1][1]
            base = base or ms
            extra = f", traces {size / 1e6:.1f} MB" if size else ""
            print(f"  {setting:<10} {ms:8.1f} ms/step  x{ms / base:.2f}{extra}")
    if args.demo:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "lumos", "demo", "-o", d], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            print(f"lumos demo end to end: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
