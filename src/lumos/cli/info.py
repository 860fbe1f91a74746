"""``lumos info TRACE...``: what is in a trace file (or a directory / archive of them)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from lumos.cli._text import field_lines
from lumos.errors import LumosError
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.ingest.kineto import trace_from_bytes
from lumos.ingest.summary import summarize_kineto

__all__ = ["collectives_text", "register", "summarize_ref"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``info`` verb."""
    p = sub.add_parser(
        "info",
        help="summarize Kineto, PyTorch ET or Chakra traces",
        description="Summarize traces: rank/world, device, iterations, streams, collectives. "
        "Accepts files, directories (searched recursively) and tar archives; the kind of "
        "each file is recognized by content.",
    )
    p.add_argument("paths", nargs="*", metavar="TRACE", help="trace files or directories")
    p.add_argument("--json", action="store_true", help="print one JSON object per trace")
    p.add_argument("--all-ranks", action="store_true",
                   help="with the Kineto traces of more than two ranks of one job: every "
                        "rank's detail after the job summary (default: one line per rank)")  # fmt: skip
    p.add_argument(
        "--example",
        action="store_true",
        help="summarize the bundled example (lumos's own 2-rank gloo recording, both ranks)",
    )
    p.set_defaults(func=run)


def summarize_ref(ref: TraceRef) -> dict[str, Any]:
    """The summary of one trace, whatever its kind."""
    if ref.kind == "kineto":
        return summarize_kineto(trace_from_bytes(ref.payload(), ref.where))
    if ref.kind == "pytorch_et":
        et = importlib.import_module("lumos.ingest.pytorch_et")
        trace = et.read_pytorch_et(ref.path, ref.member)
        return {"path": ref.where, "kind": "pytorch_et", **et.summarize_et(trace)}
    if ref.member is not None:
        from lumos.errors import InputError

        raise InputError(ref.where, "Chakra ETs inside archives are not supported; extract it")
    from lumos.chakra import ChakraTrace, read_chakra
    from lumos.chakra.stats import trace_stats

    trace = read_chakra(ref.path)
    assert isinstance(trace, ChakraTrace)  # a file path reads as one rank's trace
    return {**trace_stats(trace), "path": ref.where, "kind": "chakra"}


def run(args: argparse.Namespace) -> int:
    """Print summaries; exit 1 if any trace failed (the others are still printed)."""
    paths = list(args.paths)
    if args.example:
        from lumos.examples_data import example_run_dir

        paths.append(example_run_dir())
    if not paths:
        raise LumosError("info needs at least one TRACE path (or --example)")
    refs = expand_paths(paths)
    failures = 0
    summaries = []
    for ref in refs:
        try:
            summary = summarize_ref(ref)
        except LumosError as exc:
            if len(refs) == 1:
                raise
            failures += 1
            print(f"lumos: error: {exc}", file=sys.stderr)
            continue
        if args.json:
            print(json.dumps(summary, sort_keys=False))
        else:
            summaries.append(summary)
    if summaries:
        from lumos.cli.info_job import format_job, job_ranks

        job = job_ranks(summaries)
        if job:
            print(format_job(job))
        in_job = {id(s) for s in job} if not args.all_ranks else set()
        for summary in summaries:
            if id(summary) in in_job:
                continue
            print(format_summary(summary))
    return 1 if failures else 0


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _device(s: dict[str, Any]) -> str:
    """The device model, or what the trace shows when it names none (a 2021 GPU trace has
    kernels but no deviceProperties)."""
    if s["device"]:
        return str(s["device"])
    return "GPU (model not in the trace)" if s["streams"] else "CPU"


def collectives_text(s: dict[str, Any]) -> str:
    """``all_reduce x3 (2.5 MB), ...``: a Kineto summary's collectives by kind, count and
    total size (sizes the trace does not give said so)."""
    unknown = s.get("collective_size_unknown", {})

    def size(k: str, n: int) -> str:
        if unknown.get(k, 0) == n:
            return "size unknown"
        mb = f"{s['collective_bytes'].get(k, 0) / 1e6:.1f} MB"
        return mb + (f", {unknown[k]} of unknown size" if unknown.get(k) else "")

    return ", ".join(f"{k} x{n} ({size(k, n)})" for k, n in s["collectives"].items())


def format_summary(s: dict[str, Any]) -> str:
    """A human-readable rendering of :func:`summarize_ref`'s result."""
    lines = [f"{s['path']}  [{s['kind']}]"]
    if s["kind"] != "kineto":
        lines.extend(field_lines({k: v for k, v in s.items() if k not in ("path", "kind")}))
        return "\n".join(lines)
    world = s["world_size"] if s["world_size"] >= 0 else "?"
    rank = s["rank"] if s["rank"] >= 0 else "?"
    lines.append(f"  rank {rank}/{world}  backend {s['backend'] or '-'}  device {_device(s)}")
    lines.append(f"  events: {s['num_events']} ({s['num_duration_events']} with durations)")
    cats = ", ".join(f"{k} {v}" for k, v in s["categories"].items())
    lines.append(f"  categories: {cats}")
    if s["steps"]:
        lines.append(f"  iterations: {len(s['steps'])}")
        for st in s["steps"]:
            gpu = f"  (GPU {_ms(st['gpu_dur_ns'])})" if st["gpu_dur_ns"] >= 0 else ""
            lines.append(f"    {st['name']:<20} {_ms(st['dur_ns'])}{gpu}")
    for st in s["streams"]:
        lines.append(
            f"  GPU {st['device']} stream {st['stream']}: {st['num_kernels']} kernels, "
            f"{st['num_memcpy']} memcpy, {st['num_memset']} memset, busy {_ms(st['busy_ns'])}"
        )
    if s["collectives"]:
        lines.append("  collectives: " + collectives_text(s))
    if s["comm_kernels"]:
        ns = s.get("comm_kernel_ns", {})
        parts = [f"{k} x{n} ({_ms(ns.get(k, 0))})" for k, n in s["comm_kernels"].items()]
        lines.append("  comm kernels: " + ", ".join(parts))
    for f in s["flags"]:
        lines.append(f"  note: {f}")
    for k, v in s["diagnostics"].items():
        lines.append(f"  warning: {k} x{v}")
    return "\n".join(lines)
