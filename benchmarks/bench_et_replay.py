"""Acceptance of ``lumos bench`` (issue 33): traces executed on this machine, against their source.

    .venv/bin/python benchmarks/bench_et_replay.py -o OUT [--only realdata bundled whatif synth
        comms] [--rounds 3] [--steps 4] [--model '--hidden 1024 --seq 512']

Sections (each prints its table; everything lands in ``OUT/results.json``):

* ``realdata``: param's ETs (linear, ResNet on one GPU, Hugging Face GPT-2) executed on this
  CPU: the share of compute ops run, every skipped op with its reason. ResNet and GPT-2 run
  one profiled pass (``--warmup 0``): on two cores a ResNet-50 step takes about 30 s, GPT-2's
  about 90 s; GPT-2 large needs ``MALLOC_MMAP_THRESHOLD_=1048576`` on a 24 GB machine (glibc
  then gives freed blocks back: 15.6 GB at the peak instead of 18.5).
* ``bundled``: the bundled GPT workload recorded by ``lumos collect --et`` on 1 rank and on 2
  gloo ranks (``OMP_NUM_THREADS=1``), then executed by ``lumos bench``; ``--rounds`` times,
  recording and execution alternating so both see the machine in the same state. Per round the
  median step of each side and the time per op class (``communication``: the collectives'
  transfers; ``comm_wait``: their wait for the other rank, see ``lumos.bench.compare``).
* ``whatif``: ``lumos estimate`` of layers 4 -> 8 from a 1-rank recording writes its edited
  graph as Chakra ETs (``--chakra``), ``lumos bench`` executes them, and a recording of the
  8-layer model (with ``--et`` too) measures the truth: estimate, executed and measured median
  step side by side, ``--rounds`` times.
* ``synth``: a synthetic sample (``lumos synth fit`` on a 2-rank recording, ``sample``) executed.
* ``comms``: ``--comms-only`` on a 2-rank recording: the collectives' kinds, sizes and order
  against the recording's, and ``lumos comm --calibrate`` on the result.

The machine is shared: read ratios within a round, not absolute milliseconds. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _realdata import realdata_or_exit

LUMOS = [sys.executable, "-m", "lumos"]
PARAM = "param/et_replay/tests/inputs"
REALDATA = {"linear": f"{PARAM}/linear_et.json.gz",
            "resnet_1gpu": f"{PARAM}/resnet_1gpu_et.json.tar.gz",
            "gpt2": f"{PARAM}/hf_GPT2_et.json.tar.gz"}  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
#: extra flags of ``lumos.examples.gpt`` for every recording (``--model``): the model's size
MODEL: list[str] = []


def _run(argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        proc = subprocess.run(argv, env=env or ENV, stdout=f, stderr=subprocess.STDOUT,
                              check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}; see {log}")


def _collect(out: Path, ranks: int, steps: int, log: Path, *flags: str) -> Path:
    gpt = ["-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(ranks),
           "--master-port", str(_port()), "-m", "lumos.examples.gpt", "--mode", "ddp",
           "--steps", str(steps + 2), *MODEL, *flags]  # fmt: skip
    _run([*LUMOS, "collect", "-o", str(out), "--et", "--steps", str(steps), "--", sys.executable,
          *gpt], log)  # fmt: skip
    return out


def _port() -> int:
    from lumos.collect.launch import free_port

    return free_port()


def _bench(
    source: list[str], out: Path, log: Path, *flags: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    _run([*LUMOS, "bench", *source, "-o", str(out), *flags], log, env)
    doc: dict[str, Any] = json.loads((out / "bench.json").read_text())
    return doc


def _classes(doc: dict[str, Any], names: tuple[str, ...] = ("gemm", "elementwise",
                                                              "communication", "comm_wait")) -> dict[str, Any]:  # fmt: skip
    return {c["class"]: c for c in doc["classes"] if c["class"] in names}


def realdata(out: Path, log: Path) -> dict[str, Any]:
    rows = {}
    for name, rel in REALDATA.items():
        path = realdata_or_exit(rel)
        flags = ["--warmup", "0"] if name != "linear" else []
        # GPT-2 large holds 15 GB live at its peak: glibc must give freed blocks back
        env = {**ENV, "OMP_NUM_THREADS": "2", "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
        doc = _bench([str(path)], out / f"realdata_{name}", log, *flags, env=env)
        pct = 100.0 * doc["ops_executed"] / doc["ops_total"]
        rows[name] = {"ops_total": doc["ops_total"], "ops_executed": doc["ops_executed"],
                      "percent": round(pct, 2), "skipped": doc["skipped"],
                      "substituted": doc["substituted"],
                      "median_executed_ms": doc["median"]["executed_ns"] / 1e6}  # fmt: skip
        print(f"{name:<12} {doc['ops_executed']:>6} of {doc['ops_total']:>6} compute ops run "
              f"({pct:.2f} %), substituted {doc['substituted']}", flush=True)  # fmt: skip
        for row in doc["skipped"]:
            print(f"             skipped {row['count']} {row['op']}: {row['reason']}")
    return rows


def bundled(
    out: Path, log: Path, rounds: int, steps: int, world: tuple[int, ...] = (1, 2)
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for ranks in world:
        per = []
        for k in range(rounds):
            run = _collect(out / f"bundled{ranks}_r{k}", ranks, steps, log)
            doc = _bench([str(run)], out / f"bundled{ranks}_r{k}_bench", log)
            m = doc["median"]
            cls = _classes(doc)
            per.append({"source_ms": m["source_ns"] / 1e6, "executed_ms": m["executed_ns"] / 1e6,
                        "change": m["change"],
                        "classes": {c: v["change"] for c, v in cls.items()},
                        "class_ms": {c: [v["source_ns"] / 1e6, v["executed_ns"] / 1e6]
                                     for c, v in cls.items()},
                        "ops": [doc["ops_executed"], doc["ops_total"]]})  # fmt: skip
            print(f"{ranks} rank(s), round {k}: median step recorded {m['source_ns'] / 1e6:.1f} "
                  f"ms, executed {m['executed_ns'] / 1e6:.1f} ms ({m['change'] * 100:+.1f} %); "
                  + ", ".join(f"{c} {v['source_ns'] / 1e6:.1f} -> {v['executed_ns'] / 1e6:.1f} ms"
                              + (f" ({v['change'] * 100:+.1f} %)" if v["change"] is not None else "")
                              for c, v in cls.items()),
                  flush=True)  # fmt: skip
        res[f"{ranks}_ranks"] = {
            "rounds": per,
            "median_change": statistics.median(r["change"] for r in per),
            "median_class_change": {c: statistics.median(r["classes"][c] for r in per
                                                         if r["classes"].get(c) is not None)
                                    for c in per[0]["classes"]
                                    if any(r["classes"].get(c) is not None for r in per)},
        }  # fmt: skip
        print(f"{ranks} rank(s): median over rounds {res[f'{ranks}_ranks']['median_change'] * 100:+.1f} %, "
              + ", ".join(f"{c} {v * 100:+.1f} %" for c, v in
                          res[f"{ranks}_ranks"]["median_class_change"].items()), flush=True)  # fmt: skip
    return res


def whatif(out: Path, log: Path, rounds: int, steps: int) -> dict[str, Any]:
    from lumos.ingest.kineto import read_kineto

    per = []
    for k in range(rounds):
        base = _collect(out / f"whatif_l4_r{k}", 1, steps, log)
        est_dir = out / f"whatif_est_r{k}"
        _run([*LUMOS, "estimate", str(base), "--set", "layers=8", "-o", str(est_dir),
              "--chakra", str(est_dir / "l8")], log)  # fmt: skip
        est = json.loads((est_dir / "estimate.json").read_text())["rows"]
        executed = _bench([str(est_dir / "l8")], out / f"whatif_bench_r{k}", log)
        measured = _collect(out / f"whatif_l8_r{k}", 1, steps, log, "--layers", "8")
        steps_ns = [int(d) for d in read_kineto(measured / "rank0.kineto.json.gz").steps.dur_ns]
        row = {"recorded_l4_ms": est[0]["median_step_ns"] / 1e6,
               "estimate_ms": est[1]["median_step_ns"] / 1e6,
               "executed_ms": executed["median"]["executed_ns"] / 1e6,
               "measured_ms": statistics.median(steps_ns) / 1e6,
               "ops": [executed["ops_executed"], executed["ops_emulated"], executed["ops_total"]]}  # fmt: skip
        per.append(row)
        print(f"layers 4 -> 8 (1 rank), round {k}: recorded 4-layer {row['recorded_l4_ms']:.1f} ms, "
              f"estimate {row['estimate_ms']:.1f} ms, executed ET {row['executed_ms']:.1f} ms, "
              f"measured 8-layer {row['measured_ms']:.1f} ms; ops run/emulated/total {row['ops']}",
              flush=True)  # fmt: skip
    med = {key: statistics.median(r[key] for r in per)
           for key in ("recorded_l4_ms", "estimate_ms", "executed_ms", "measured_ms")}  # fmt: skip
    print(
        "layers 4 -> 8, medians over rounds: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items())
    )
    return {"rounds": per, "median": med}


def synth(out: Path, log: Path, steps: int) -> dict[str, Any]:
    run = _collect(out / "synth_src", 2, steps, log)
    _run([*LUMOS, "synth", "fit", str(run), "-o", str(out / "synth_model.json")], log)
    _run([*LUMOS, "synth", "sample", str(out / "synth_model.json"), "-o",
          str(out / "synth" / "s"), "--steps", "2", "--seed", "1"], log)  # fmt: skip
    doc = _bench([str(out / "synth" / "s")], out / "synth_bench", log)
    m = doc["median"]
    row = {"sample_ms": m["source_ns"] / 1e6, "executed_ms": m["executed_ns"] / 1e6,
           "ops": [doc["ops_executed"], doc["ops_emulated"], doc["ops_total"]],
           "comms": [doc["comms_executed"], doc["comms_total"]]}  # fmt: skip
    print(f"synthetic sample (2 ranks): replayed {row['sample_ms']:.1f} ms, executed "
          f"{row['executed_ms']:.1f} ms; ops run/emulated/total {row['ops']}, collectives "
          f"{row['comms']}", flush=True)  # fmt: skip
    return row


def comms(out: Path, log: Path, steps: int) -> dict[str, Any]:
    from lumos.ingest.kineto import read_kineto

    run = _collect(out / "comms_src", 2, steps, log)
    doc = _bench([str(run)], out / "comms_bench", log, "--comms-only")
    want = []
    for r in (0, 1):
        c = read_kineto(run / f"rank{r}.kineto.json.gz").collectives
        want.append(list(zip(c.kind, c.size_bytes.tolist(), strict=True)))
    got = [(s["kind"], s["size_bytes"]) for s in doc["comms"]["samples"]]
    same = all(w == got for w in want)
    cal = subprocess.run([*LUMOS, "comm", "--calibrate", str(out / "comms_bench"), "--json"],
                         env=ENV, capture_output=True, text=True, check=True)  # fmt: skip
    rows = json.loads(cal.stdout)["rows"]
    print(f"comms only (2 ranks): {len(got)} collectives, kinds, sizes and order as recorded: "
          f"{same}", flush=True)  # fmt: skip
    for t in doc["comms"]["table"]:
        print(f"  {t['kind']} {t['size_bytes']:,} B x{t['count']}: {t['median_ns'] / 1e3:.0f} us, "
              f"{t['algbw_bytes_per_s'] / 1e9:.3f} GB/s")  # fmt: skip
    for r in rows:
        print(f"  calibrated {r['kind']} over {r['group_size']}: latency "
              f"{(r['latency_ns'] or 0) / 1e3:.1f} us, {(r['bw_bytes_per_s'] or 0) / 1e9:.3f} GB/s")  # fmt: skip
    return {"same_sizes_and_order": same, "collectives": len(got), "table": doc["comms"]["table"],
            "calibration": rows}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--only", nargs="+", default=["realdata", "bundled", "whatif", "synth", "comms"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument(
        "--ranks",
        type=int,
        nargs="+",
        default=[1, 2],
        help="bundled: the world sizes to record and execute",
    )
    p.add_argument("--model", default="", metavar="FLAGS",
                   help="flags of lumos.examples.gpt for every recording, e.g. "
                        "'--hidden 1024 --seq 512' (default: its own small model)")  # fmt: skip
    args = p.parse_args()
    MODEL[:] = args.model.split()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "commands.log"
    results_path = out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    for name in args.only:
        if name == "realdata":
            results[name] = realdata(out, log)
        elif name == "bundled":
            results[name] = bundled(out, log, args.rounds, args.steps, tuple(args.ranks))
        elif name == "whatif":
            results[name] = whatif(out, log, args.rounds, args.steps)
        elif name == "synth":
            results[name] = synth(out, log, args.steps)
        elif name == "comms":
            results[name] = comms(out, log, args.steps)
        results_path.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
