"""Measured ground truth for what-if estimates: pairs of configurations run in one job.

    .venv/bin/python benchmarks/whatif_pairs.py [-o /work/pairs] [--only NAME ...] [--steps 6]
        [--arch gpt|llama] [--plain] [--estimate] [--baseline-hints] [--list]

For each pair of the table (:data:`PAIRS`), runs ONE torchrun job of 2 ranks on CPU (gloo,
``OMP_NUM_THREADS=1``, one intra-op thread per rank) of the bundled GPT workload with
``--alternate``, so configurations A and B take turns step by step and see the same machine speed,
recorded like ``lumos collect`` does (``record_shapes``; 2 untraced and 2 warm-up steps, then
``--steps`` recorded steps per configuration). The run is split (:func:`lumos.collect.split.split_run`)
into two normal run directories ``OUT/NAME/A`` and ``OUT/NAME/B`` (``lumos replay`` and
``lumos estimate`` take either). Each configuration's measured step time is the median over its
steps of the slowest rank's ``ProfilerStep`` duration. Everything lands in ``OUT/pairs.json``
(per pair: mode, both configurations as KEY=VALUE dicts, the run directories, per-step and
median milliseconds, B/A ratio), rewritten after every pair.

``--estimate`` then runs ``lumos estimate SRC --set KEY=VALUE ...`` in both directions (A -> B and
B -> A; keys in the estimator's words: ``layers hidden ffn heads seq microbatches
microbatch_size``, only those that change) and prints pair, direction, measured target,
estimate, error, and the error of guessing "unchanged" (the source's own measured step). When the
verb refuses the keys, the row says the estimate is unavailable and why; the measurements stand.
``--baseline-hints`` also passes the source configuration as ``--baseline KEY=VALUE``.

The machine is shared and noisy: read the B/A ratios (same job, alternating), not the absolute
milliseconds. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos._io import atomic_write
from lumos.collect import CollectConfig, run_collect, torchrun_command
from lumos.collect.split import profiler_steps, read_trace, split_run


@dataclass(frozen=True)
class Pair:
    """One job: configuration A (``mode`` and ``base`` flags) and B (A with ``change``)."""

    name: str
    mode: str
    change: dict[str, int]
    base: dict[str, int] = field(default_factory=dict)


#: Sizes chosen so a step takes roughly 50-300 ms per configuration with 2 ranks on 2 cores.
SMALL = {"batch": 4, "seq": 32, "hidden": 128, "layers": 4}
PAIRS = (
    Pair("ddp_layers_x2", "ddp", {"layers": 8}, SMALL),
    Pair("ddp_layers_half", "ddp", {"layers": 4}, {**SMALL, "layers": 8}),
    Pair("ddp_hidden_ffn_x2", "ddp", {"hidden": 256}, SMALL),
    Pair("ddp_h256_layers_x2", "ddp", {"layers": 8}, {**SMALL, "hidden": 256}),
    Pair("ddp_ffn_x2", "ddp", {"ffn_mult": 8}, SMALL),
    Pair("ddp_seq_x2", "ddp", {"seq": 64}, SMALL),
    Pair("pp_microbatches_x2", "pipeline", {"batch": 8, "microbatches": 4},
         {**SMALL, "batch": 4, "microbatches": 2}),
    Pair("pp_layers_x2", "pipeline", {"layers": 8}, {**SMALL, "microbatches": 2}),
)  # fmt: skip
#: Run only when named (``--only``): the 2 stages merged onto rank 0 (``pp`` 2 -> 1; rank 1
#: idles at a barrier and its traces are dropped). On a machine where the 2 ranks share the
#: cores, the 2-stage side's ops run slower than the 1-rank side's, which no edit of its trace
#: can know (see the README).
EXTRA = (Pair("pp_stages_half", "pipeline", {"stages": 1}, {**SMALL, "microbatches": 2}),)

WAIT, WARMUP = 2, 2  # even, so the first recorded step is A's


def _flags(d: dict[str, int]) -> list[str]:
    return [x for k, v in sorted(d.items()) for x in (f"--{k.replace('_', '-')}", str(v))]


def run_pair(
    pair: Pair, out: Path, steps: int, timeout_s: float, arch: str = "gpt", plain: bool = False
) -> dict[str, Any]:
    """Run, split and measure one pair; returns its ``pairs.json`` entry."""
    root = out / pair.name
    if root.exists():
        shutil.rmtree(root)
    run_dir = root / "run"
    change = ",".join(f"{k}={v}" for k, v in sorted(pair.change.items()))
    args = ["--mode", pair.mode, "--arch", arch, "--threads", "1", *_flags(pair.base),
            "--alternate", change] + (["--plain"] if plain else [])  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cfg = CollectConfig(run_dir=run_dir, steps=2 * steps, warmup=WARMUP, wait=WAIT)
    t0 = time.perf_counter()
    res = run_collect(cfg, torchrun_command("lumos.examples.gpt", args, nproc=2), env=env,
                      log=root / "job.log", timeout_s=timeout_s)  # fmt: skip
    if res.exit_code != 0:
        raise SystemExit(
            f"{pair.name}: the job failed (exit {res.exit_code}); see {root / 'job.log'}"
        )
    job_s = time.perf_counter() - t0
    dirs = {label: root / label for label in "AB"}
    manifests = split_run(run_dir, dirs)
    entry: dict[str, Any] = {"name": pair.name, "mode": pair.mode, "change": pair.change, "arch": arch,
                             "job_s": round(job_s, 1), "source_run": str(run_dir)}  # fmt: skip
    for label, d in dirs.items():
        stages = manifests[label]["alternate"].get("config", {}).get("stages", 0)
        for rank in range(stages, 2) if stages else ():  # idle ranks: no part of the run
            for f in d.glob(f"rank{rank}.*"):
                f.unlink()
        per_step = measured_steps_ms(d)
        entry[label] = {
            "config": manifests[label]["alternate"].get("config", {}),
            "dir": str(d),
            "steps_ms": per_step,
            "median_ms": round(statistics.median(per_step), 3),
        }
    entry["ratio_b_over_a"] = round(entry["B"]["median_ms"] / entry["A"]["median_ms"], 4)
    return entry


def measured_steps_ms(run_dir: Path) -> list[float]:
    """Per step (matched by step number) the slowest rank's ProfilerStep duration, in ms."""
    per_rank = []
    for p in sorted(run_dir.glob("rank*.kineto.json.gz")):
        per_rank.append({num: dur for num, _, dur in profiler_steps(read_trace(p), where=str(p))})
    common = sorted(set.intersection(*(set(r) for r in per_rank)))
    return [round(max(r[n] for r in per_rank) / 1e6, 3) for n in common]


def estimator_keys(config: dict[str, int], mode: str) -> dict[str, int]:
    """A configuration in ``lumos estimate --set`` words."""
    out = {
        k: config[k] for k in ("layers", "hidden", "ffn", "heads", "seq", "vocab") if k in config
    }
    if mode == "pipeline":
        out["pp"] = config.get("stages") or 2  # one stage per rank of the 2-rank job
        out["microbatches"] = config["microbatches"]
        out["microbatch_size"] = config["batch"] // config["microbatches"]
    else:
        out["microbatch_size"] = config["batch"]
    return out


def estimate(entry: dict[str, Any], src: str, dst: str, out: Path, hints: bool) -> dict[str, Any]:
    """``lumos estimate`` from ``src``'s run to ``dst``'s configuration; a table row."""
    a = estimator_keys(entry[src]["config"], entry["mode"])
    b = estimator_keys(entry[dst]["config"], entry["mode"])
    sets = [f"{k}={v}" for k, v in b.items() if a.get(k) != v]
    est_dir = out / entry["name"] / f"estimate_{src}_to_{dst}"
    cmd = [sys.executable, "-m", "lumos", "estimate", entry[src]["dir"], "-o", str(est_dir)]
    for s in sets:
        cmd += ["--set", s]
    if hints:
        for k, v in a.items():
            cmd += ["--baseline", f"{k}={v}"]
    target = entry[dst]["median_ms"]
    row: dict[str, Any] = {"pair": entry["name"], "direction": f"{src}->{dst}", "set": sets,
                           "measured_ms": target, "command": cmd[1:],
                           "unchanged_error": (entry[src]["median_ms"] - target) / target}  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        row.update(estimated_ms=None, error=None, unavailable=why)
        return row
    rows = json.loads((est_dir / "estimate.json").read_text())["rows"]
    est_ms = rows[-1]["median_step_ns"] / 1e6
    row.update(estimated_ms=round(est_ms, 3), error=(est_ms - target) / target)
    return row


def _write(path: Path, doc: dict[str, Any]) -> None:
    with atomic_write(path) as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--out", type=Path, default=Path("/work/pairs"))
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these pairs")
    p.add_argument("--steps", type=int, default=6, help="recorded steps per configuration")
    p.add_argument("--arch", choices=("gpt", "llama"), default="gpt",
                   help="model family of the bundled workload (llama: an unseen-model check)")  # fmt: skip
    p.add_argument("--plain", action="store_true",
                   help="the workload without its forward/backward/optimizer spans")  # fmt: skip
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per job")
    p.add_argument("--estimate", action="store_true", help="run lumos estimate both ways")
    p.add_argument("--no-run", action="store_true",
                   help="reuse OUT/pairs.json (with --estimate: estimate only)")  # fmt: skip
    p.add_argument("--baseline-hints", action="store_true",
                   help="pass the source configuration as --baseline KEY=VALUE")  # fmt: skip
    p.add_argument("--list", action="store_true", help="print the pairs and exit")
    args = p.parse_args(argv)
    chosen = [q for q in (*PAIRS, *EXTRA) if q.name in (args.only or [x.name for x in PAIRS])]
    if args.only and len(chosen) != len(set(args.only)):
        p.error(f"--only: unknown pair (known: {', '.join(q.name for q in (*PAIRS, *EXTRA))})")
    if args.list:
        for q in chosen:
            print(f"{q.name:<22}{q.mode:<10}{_flags(q.base)} -> {q.change}")
        return 0
    pairs_path = args.out / "pairs.json"
    doc: dict[str, Any] = {"pairs": []}
    if pairs_path.is_file():
        doc = json.loads(pairs_path.read_text())
    if not args.no_run:
        for q in chosen:
            print(f"{q.name}: running ...", flush=True)
            entry = run_pair(q, args.out, args.steps, args.timeout, args.arch, args.plain)
            doc["pairs"] = [e for e in doc["pairs"] if e["name"] != q.name] + [entry]
            doc.update(machine={"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
                       steps_per_config=args.steps)  # fmt: skip
            _write(pairs_path, doc)
            print(f"  A {entry['A']['median_ms']:9.1f} ms  B {entry['B']['median_ms']:9.1f} ms"
                  f"  B/A {entry['ratio_b_over_a']:.3f}  ({entry['job_s']:.0f} s)", flush=True)  # fmt: skip
    print(f"\n{'pair':<22}{'A ms':>10}{'B ms':>10}{'B/A':>8}")
    entries = [e for e in doc["pairs"] if not args.only or e["name"] in args.only]
    for e in entries:
        print(f"{e['name']:<22}{e['A']['median_ms']:>10.1f}{e['B']['median_ms']:>10.1f}"
              f"{e['ratio_b_over_a']:>8.3f}")  # fmt: skip
    if not args.estimate:
        return 0
    rows = [estimate(e, s, d, args.out, args.baseline_hints) for e in entries
            for s, d in (("A", "B"), ("B", "A"))]  # fmt: skip
    doc["estimates"] = rows
    _write(pairs_path, doc)
    print(f"\n{'pair':<22}{'dir':<6}{'measured ms':>12}{'estimate ms':>12}{'error':>9}"
          f"{'unchanged':>11}")  # fmt: skip
    errors = []
    for r in rows:
        un = f"{r['unchanged_error'] * 100:+10.1f}%"
        if r["estimated_ms"] is None:
            print(f"{r['pair']:<22}{r['direction']:<6}{r['measured_ms']:>12.1f}"
                  f"{'-':>12}{'-':>9}{un}  unavailable: {r['unavailable']}")  # fmt: skip
            continue
        errors.append(abs(r["error"]))
        print(f"{r['pair']:<22}{r['direction']:<6}{r['measured_ms']:>12.1f}"
              f"{r['estimated_ms']:>12.1f}{r['error'] * 100:+8.1f}%{un}")  # fmt: skip
    if errors:
        print(f"mean |error| {statistics.mean(errors) * 100:.1f}%  "
              f"max |error| {max(errors) * 100:.1f}%  over {len(errors)} estimates")  # fmt: skip
    un_all = [abs(r["unchanged_error"]) for r in rows]
    print(f"guessing 'unchanged': mean |error| {statistics.mean(un_all) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
