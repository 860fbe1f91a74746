"""``lumos bench SOURCE... -o DIR``: a PyTorch or Chakra ET executed on this machine's hardware."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lumos.cli._args import positive_int
from lumos.cli._progress import growing_bar
from lumos.collect._torch import require_torch

__all__ = ["format_bench", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` verb."""
    p = sub.add_parser(
        "bench",
        help="execute a PyTorch or Chakra ET on this machine: a benchmark from a trace",
        description="Run the compute ops of a PyTorch Execution Trace (any schema version) "
        "with torch on the local device, with tensors of the recorded shapes, dtypes and "
        "strides, in the recorded order; several ranks as processes, their collectives "
        "through torch.distributed (gloo or NCCL) with the recorded sizes and groups; Chakra "
        "ETs by op class and recorded work. Runs under the profiler: DIR/rank<r>/ holds the "
        "executed Kineto traces, DIR/bench.json what ran, what was skipped and why, and "
        "executed against source per step and op class. SOURCE: a run directory of lumos "
        "collect --et, PyTorch ET files (Kineto traces beside them time their rank), or "
        "Chakra ETs (files or PREFIX). Needs torch.",
    )
    p.add_argument("paths", nargs="+", metavar="SOURCE", help="run directory, ETs or PREFIX")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: bench.json and rank<r>/ traces")  # fmt: skip
    p.add_argument("--device", default=None, metavar="cpu|cuda",
                   help="where ops run (default: cuda when available, else cpu)")  # fmt: skip
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="unprofiled passes over the steps before the measured one (default 1)")  # fmt: skip
    p.add_argument("--et", action=argparse.BooleanOptionalAction, default=None,
                   help="also record an Execution Trace of the executed run (default: when "
                   "the source's timing was recorded with one, so both pay its cost)")  # fmt: skip
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help="record allocations and frees in the executed traces (default: when "
                   "the source's timing recorded them, lumos collect's default)")  # fmt: skip
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="torch intra-op threads per rank (default: as the source recorded; "
                        "not recorded: 1 per rank with several ranks, else torch's)")  # fmt: skip
    p.add_argument("--comms-only", action="store_true",
                   help="re-issue only the collectives and transfers (sizes, groups, order), "
                   "each timed on its own: bandwidth per kind and size in bench.json, which "
                   "lumos comm --calibrate reads")  # fmt: skip
    p.add_argument("--emulate", action=argparse.BooleanOptionalAction, default=True,
                   help="Chakra ETs: hold an op with no recorded work (FLOPs or bytes) for its "
                   "recorded duration (default), or skip it (--no-emulate)")  # fmt: skip
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    """Execute, print the comparison, write bench.json."""
    require_torch("lumos bench")
    from lumos.bench.run import BenchOptions, run_bench

    opts = BenchOptions(device=args.device, warmup=args.warmup, et=args.et, memory=args.memory,
                        threads=args.threads, comms_only=args.comms_only,
                        emulate=args.emulate)  # fmt: skip
    with growing_bar("executing") as update:
        doc = run_bench(args.paths, args.out, opts, progress=update)
    print(format_bench(doc))
    print(f"wrote {Path(args.out) / 'bench.json'}")
    return 0


def _ms(ns: Any) -> str:
    return f"{ns / 1e6:12.3f}" if ns is not None else f"{'-':>12}"


def _pct(ch: Any) -> str:
    if ch is None:
        return f"{'-':>9}"
    text = f"{ch * 100:+.1f}%" if abs(ch) < 10 else f"x{ch + 1:.1f}"
    return f"{text:>9}" if len(text) < 9 else f" {text}"


def format_bench(doc: Mapping[str, Any]) -> str:
    """What ran, per step and per op class executed against source, and what was skipped."""
    total, done = doc["ops_total"], doc["ops_executed"]
    share = f" ({done / total * 100:.1f} %)" if total else ""
    lines = [f"executed {done} of {total} compute ops{share} and {doc['comms_executed']} of "
             f"{doc['comms_total']} collectives on {doc['device']}, {doc['world_size']} "
             f"rank(s)"]  # fmt: skip
    if doc.get("ops_emulated"):
        lines.append(f"  {doc['ops_emulated']} op(s) emulated: no recorded work, held for "
                     "their recorded time")  # fmt: skip
    for twin_of, twin in doc.get("substituted", {}).items():
        lines.append(f"  {twin_of} ran as {twin} (no {doc['device']} kernel)")
    timing = doc["source"]["timing"]
    lines.append(
        f"{'step':<24}{'source ms':>12}{'executed ms':>12}{'change':>9}"
        + (f"   (source {timing})" if timing else "   (the source has no timing)")
    )
    for s in doc["steps"]:
        lines.append(f"{s['name']:<24}{_ms(s['source_ns'])}{_ms(s['executed_ns'])}"
                     f"{_pct(s['change'])}")  # fmt: skip
    m = doc["median"]
    lines.append(f"{'median':<24}{_ms(m['source_ns'])}{_ms(m['executed_ns'])}{_pct(m['change'])}")
    if doc.get("classes"):
        lines.append(f"{'op class (ms per step)':<24}{'source':>12}{'executed':>12}{'change':>9}")
        for c in doc["classes"]:
            lines.append(f"{c['class']:<24}{_ms(c['source_ns'])}{_ms(c['executed_ns'])}"
                         f"{_pct(c['change'])}")  # fmt: skip
    for row in doc.get("comms", {}).get("table", []):
        bw = row["algbw_bytes_per_s"]
        lines.append(f"  {row['kind']} x{row['count']} of {row['size_bytes']:,} bytes over "
                     f"{row['group_size']} rank(s): {row['median_ns'] / 1e3:,.1f} us, "
                     + (f"{bw / 1e9:.3f} GB/s" if bw else "-"))  # fmt: skip
    for row in doc["skipped"]:
        example = f" ({row['example']})" if row.get("example") else ""
        lines.append(f"skipped {row['count']} {row['op']}: {row['reason']}{example}")
    return "\n".join(lines)
