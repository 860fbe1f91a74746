"""``lumos replay TRACE... -o DIR``: replay traces in the simulator and compare with the measurement."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from lumos.cli._args import add_edit_args, add_parallel_args
from lumos.cli._progress import progress_bar
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.replay import build_workload, parse_scale, replay, write_replay
from lumos.report.labels import BREAKDOWN_LABELS, kind_label
from lumos.report.table import write_tables

__all__ = ["format_replay", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``replay`` verb."""
    p = sub.add_parser(
        "replay",
        help="replay traces in the simulator; predicted vs measured step time",
        description="Build the execution graph of each rank's Kineto trace, simulate it, and "
        "compare predicted with measured ProfilerStep times and the time breakdown. "
        "Writes DIR/replay.json, DIR/replay.perfetto.json (open in ui.perfetto.dev: per rank "
        "the recording above the replay, the critical path marked; --perfetto "
        "replay.perfetto.json.gz writes it gzip-compressed, for big traces) and "
        "DIR/sm_util.csv.",
    )
    p.add_argument("paths", nargs="+", metavar="TRACE", help="Kineto traces or a run directory")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: replay.json, Perfetto traces")  # fmt: skip
    add_edit_args(p)
    p.add_argument(
        "--analysis",
        action="store_true",
        help="also write the tables of `lumos analyze` (CSV) into DIR/analysis/",
    )
    p.add_argument("--all-ranks", action="store_true",
                   help="print every rank's detail (default: a job of more than two ranks "
                   "prints its summary and its slowest rank)")  # fmt: skip
    p.add_argument("--chakra-only", action="store_true",
                   help="replay Chakra ETs as ASTRA-sim runs them: Chakra fields only, one CPU, "
                   "one compute and one communication slot per rank, collectives on the network "
                   "of network.yml/system.json (beside the ETs, or --network)")  # fmt: skip
    p.add_argument("--network", metavar="DIR", default=None,
                   help="with --chakra-only: directory with ASTRA-sim's network.yml and "
                   "system.json")  # fmt: skip
    p.add_argument(
        "--perfetto",
        default="replay.perfetto.json",
        metavar="NAME",
        help="file name of the Perfetto trace in DIR; a name ending in .json.gz is gzip-compressed "
        "(default replay.perfetto.json)",
    )
    add_parallel_args(p)
    p.set_defaults(func=run, out_kind="dir")


def run(args: argparse.Namespace) -> int:
    """Replay, print the table, write the outputs."""
    if getattr(args, "chakra_only", False):
        return _run_chakra_only(args)
    found = _expanded(args.paths)  # once: a run of many ranks has many files to sniff
    if found is not None and _beside_astra_configs(found) and not (args.without or args.scale):
        print("ASTRA-sim configs (network.yml) lie beside these Chakra ETs: replaying them as "
              "ASTRA-sim does (--chakra-only)")  # fmt: skip
        return _run_chakra_only(args)
    without = tuple(w.strip() for w in args.without.split(",") if w.strip())
    scale = parse_scale(args.scale)
    refs = expand_paths(args.paths) if found is None else found  # raises what it found wrong
    n = len(refs)
    with progress_bar("building graphs", n) as advance:
        workload, sources = build_workload(
            refs, workers=args.workers, dask_address=args.dask, on_done=advance
        )
    rep = replay(workload, without=without, scale=scale, sources=sources)
    paths = write_replay(rep, args.out, perfetto=args.perfetto)
    print(format_replay(rep.to_dict(), verbose=bool(getattr(args, "verbose", False)),
                        all_ranks=args.all_ranks))  # fmt: skip
    if rep.result.graphs:
        from lumos.advise import replay_headline

        print(replay_headline(rep.result, rep.summaries, rep.recorded or rep.workload)
              + "  (lumos advise for what pays)")  # fmt: skip
    print(f"wrote {paths['replay']}, {paths['perfetto']}, {paths['sm_util']}")
    if args.analysis:
        written = write_tables(rep.analysis(), Path(args.out) / "analysis")
        print(f"wrote {len(written)} analysis tables to {written[0].parent}")
    return 0


def _expanded(paths: list[str]) -> list[TraceRef] | None:
    """The traces under ``paths``, or None when expanding them fails (the error is raised
    again where the replay needs them, after the option checks)."""
    from lumos.errors import LumosError

    items: list[str | os.PathLike[str]] = list(paths)
    try:
        return expand_paths(items)
    except LumosError:
        return None


def _beside_astra_configs(refs: list[TraceRef]) -> bool:
    """True when every input is a Chakra ET with ASTRA-sim's network.yml in its directory
    (what ``convert --target astra-sim`` and ``chakra generate --target astra-sim`` write)."""
    return bool(refs) and all(r.kind == "chakra" and r.member is None
                              and (Path(r.path).parent / "network.yml").is_file() for r in refs)  # fmt: skip


def _run_chakra_only(args: argparse.Namespace) -> int:
    from lumos.errors import ConfigError
    from lumos.replay_chakra import replay_chakra_only, write_chakra_replay

    if args.without or args.scale:
        raise ConfigError("--chakra-only replays the ETs as they are: no --without or --scale")
    doc = replay_chakra_only(args.paths, network_dir=args.network)
    net = doc["network"]
    print("chakra-only replay (ASTRA-sim semantics); network: " + (
        "none (collectives last their duration_micros)" if net is None else
        f"ring of {net['npus']}, {net['bw_bytes_per_s'] / 1e9:.3f} GB/s, "
        f"{net['latency_ns']} ns"))  # fmt: skip
    for r in doc["ranks"]:
        fin = r["finish_ns"]
        print(f"  rank {r['rank']:>4}  finish " + ("STALLED" if fin is None else f"{fin:,} ns"))
    for s in doc["stalls"][:5]:
        print(f"  stall: {s}")
    path = write_chakra_replay(doc, args.out)
    print(f"wrote {path}")
    return 0 if doc["completed"] else 1


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:10.3f}"


#: Diagnostics worth a line in the short summary, and how to say them.
_SHORT = {
    "inter_stream_edge_contradicted": "inferred inter-stream edges dropped (contradicted)",
    "sync_wait_contradicted": "sync waits dropped (contradicted)",
    "sync_target_unknown": "syncs without a target",
    "thread_start_unexplained": "threads started mid-trace with no cause (kept at offset)",
    "gpu_gap_unexplained": "GPU tasks held back by nothing found (kept as delay)",
    "inter_stream_edge_from_timing": "inter-stream edges inferred from timing",
    "blocking_call_split": "blocking calls split into cost and wait",
    "wait_coincidence_dropped": "coincident releases not taken as waits",
    "partial_workload_missing_ranks": "ranks of the job not traced (their collectives keep "
    "traced timing)",
}


def _model_lines(s: dict[str, Any], verbose: bool) -> list[str]:
    """What the build measured and inferred: calibration, time classes, diagnostics."""
    out = []
    cal = s.get("calibration") or {}
    classes = s.get("time_classes") or []
    parts = []
    if "launch_latency_ns" in cal:
        parts.append(f"launch latency {cal['launch_latency_ns'] / 1e3:.1f} us")
    if cal.get("gpu_clock_offset_ns"):
        parts.append(f"GPU clock moved {cal['gpu_clock_offset_ns'] / 1e3:+.1f} us")
    tot = {k: sum(c[k] for c in classes) for k in
           ("task_ns", "overhead_ns", "wait_ns", "unexplained_ns")}  # fmt: skip
    span = sum(tot.values())
    if span:
        shares = ", ".join(f"{k.removesuffix('_ns')} {v / span * 100:.0f}%" for k, v in tot.items())
        parts.append(f"step threads: {shares}")
    if parts:
        out.append("  model: " + "; ".join(parts))
    diag = s.get("diagnostics") or {}
    if verbose:
        for code, d in diag.items():
            out.append(
                f"  diagnostic {code}: {d['count']}"
                + (f" (e.g. {d['example']})" if d.get("example") else "")
            )
    else:
        short = [f"{diag[c]['count']} {text}" for c, text in _SHORT.items() if c in diag]
        rest = sum(d["count"] for c, d in diag.items() if c not in _SHORT)
        if rest:
            short.append(f"{rest} other (lumos -v replay ... lists them)")
        if short:
            out.append("  diagnostics: " + "; ".join(short))
    return out


def format_replay(doc: dict[str, Any], *, verbose: bool = False, all_ranks: bool = True) -> str:
    """The replay table: per step measured/predicted/error, the two breakdowns, the critical
    path, then what the model measured and inferred (every diagnostic with ``verbose``).

    Without ``all_ranks``, a job of more than two ranks prints its summary across ranks first
    and the detail of its slowest rank only (every rank is in ``replay.json``)."""
    lines: list[str] = []
    ranks = doc.get("ranks", [])
    shown = doc.get("ranks", [doc])
    if not all_ranks and len(ranks) > 2:
        lines.extend(_cross_rank_lines(ranks))
        slowest = max(ranks, key=lambda r: _step_total(r, "predicted"))
        shown = [slowest]
        lines.append(f"detail of rank {slowest['rank']}, the slowest (the other "
                     f"{len(ranks) - 1}: --all-ranks, or replay.json)")  # fmt: skip
    for s in shown:
        lines.append(f"rank {s['rank']}")
        mem = any(st.get("measured_peak_memory_bytes") is not None for st in s["steps"])
        lines.append(f"  {'step':<22}{'measured ms':>12}{'predicted ms':>14}{'error':>9}"
                     + (f"{'peak MiB meas.':>16}{'pred.':>10}" if mem else ""))  # fmt: skip
        for st in s["steps"]:
            err = "-" if st["error"] is None else f"{st['error'] * 100:+8.2f}%"
            peaks = ""
            if mem:
                peaks = "".join(
                    f"{'-' if v is None else f'{v / (1 << 20):.1f}':>{w}}"
                    for v, w in ((st.get("measured_peak_memory_bytes"), 16),
                                 (st.get("predicted_peak_memory_bytes"), 10))
                )  # fmt: skip
            lines.append(
                f"  {st['name']:<22}{_ms(st['measured_ns']):>12}{_ms(st['predicted_ns']):>14}{err:>9}"
                + peaks
            )
        memory = s.get("memory") or {}
        if mem:
            lines.append(f"  memory: {memory.get('device')}, peak = the largest allocated total "
                         "in the step" + (f" ({memory['note']})" if memory.get("note") else ""))  # fmt: skip
        elif memory.get("note"):
            lines.append(f"  {memory['note']}")
        if not s["steps"]:
            w = s["window_ns"]
            meas = w["measured"][1] - w["measured"][0]
            pred = w["predicted"][1] - w["predicted"][0]
            err = f"{(pred - meas) / meas * 100:+8.2f}%" if meas else "-"
            lines.append(f"  {'(no ProfilerStep) run':<22}{_ms(meas):>12}{_ms(pred):>14}{err:>9}")
        e = s["error"]
        if e["mean_abs"] is not None:
            lines.append(
                f"  mean |error| {e['mean_abs'] * 100:.2f}%   max |error| {e['max_abs'] * 100:.2f}%"
            )
        b = s["breakdown"]
        n = len(s["steps"])  # the breakdown covers the whole window: a total, said as one
        what = f"breakdown, {n} steps" if n > 1 else "breakdown"
        lines.append(f"  {what:<22}{'measured ms':>12}{'predicted ms':>14}")
        for part, label in BREAKDOWN_LABELS.items():
            lines.append(
                f"  {label:<22}{_ms(b['measured'][part]):>12}{_ms(b['predicted'][part]):>14}"
            )
        note = _breakdown_note(s)
        if note:
            lines.append(note)
        cp = s.get("critical_path") or {}
        if cp:
            parts = ", ".join(f"{kind_label(k)} {v * 100:.0f}%" for k, v in cp.items()
                              if v >= 0.005)  # fmt: skip
            lines.append(f"  critical path: {parts}")
        for key, what in (("op", "ops"), ("kernel", "kernels")):
            rows = s.get(f"critical_path_{what}") or []
            if rows:
                lines.append(f"  {f'top {what} on the critical path':<60}{'tasks':>7}"
                             f"{'task ms':>10}{'delay ms':>10}{'share':>8}")  # fmt: skip
            for o in rows[:TOP_OPS]:
                lines.append(f"  {o[key][:58]:<60}{o['tasks']:>7}{o['task_ns'] / 1e6:10.3f}"
                             f"{o['delay_ns'] / 1e6:10.3f}{o['share'] * 100:7.1f}%")  # fmt: skip
        lines.extend(_model_lines(s, verbose))
    if len(ranks) > 1 and len(shown) == len(ranks):
        lines.extend(_cross_rank_lines(ranks))
    cpu = all((r.get("sm_util") or {}).get("device") == -1 for r in doc.get("ranks", [doc]))
    lines.extend(GLOSSARY_LINES_CPU if cpu else GLOSSARY_LINES)
    return "\n".join(lines)


def _breakdown_note(s: dict[str, Any]) -> str:
    """A line when the step time matches (mean |error| under 2 %) but exposed communication
    differs by more than a tenth of it: the measured collectives (NCCL kernels, gloo worker
    spans) hold the wait for peers."""
    e = s["error"]["mean_abs"]
    b = s["breakdown"]
    meas, pred = b["measured"]["exposed_comm_ns"], b["predicted"]["exposed_comm_ns"]
    if e is None or e >= 0.02 or abs(meas - pred) <= 0.1 * max(meas, pred, 1):
        return ""
    return ("  note: step time matches but exposed comm differs: a recorded collective (NCCL "
            "kernel, gloo span) also holds its wait\n        for the other ranks; the replay "
            "starts a collective when the last rank arrives, so that wait shows as other (idle) "
            "time,\n        and SM utilization excludes it")  # fmt: skip


#: Ops on the critical path printed per rank.
TOP_OPS = 5

#: The footnote under every replay table: the words it uses (README "Words" says the same).
GLOSSARY_LINES = (
    "words: exposed compute/comm = GPU time when only compute (only communication) runs; "
    "overlapped = both run at once;",
    "  other = no GPU work (idle: host-bound, waiting or outside kernels); delay = time on the "
    "critical path spent between tasks",
    "  (CPU overhead, launch latency, waiting for another task or rank), not running one; "
    "error = (predicted - measured) / measured",
)


#: The same words for a job with no GPU (every rank's ``sm_util`` device is -1).
GLOSSARY_LINES_CPU = (
    "words: exposed compute/comm = time when only compute (CPU ops) or only communication runs; "
    "overlapped = both run at once;",
    "  other = neither runs (framework overhead between ops, waiting for a peer); delay = time "
    "on the critical path spent between tasks",
    GLOSSARY_LINES[2],
)


def _step_total(s: dict[str, Any], side: str) -> int:
    if s["steps"]:
        return int(sum(st[f"{side}_ns"] for st in s["steps"]))
    w = s["window_ns"][side]
    return int(w[1] - w[0])


def _cross_rank_lines(ranks: list[dict[str, Any]]) -> list[str]:
    """Slowest rank by predicted step time and the spread between ranks, both sides."""
    out = ["across ranks (sum of steps)"]
    for side in ("measured", "predicted"):
        tot = [(_step_total(s, side), s["rank"]) for s in ranks]
        hi, lo = max(tot), min(tot)
        spread = (hi[0] - lo[0]) / hi[0] * 100 if hi[0] else 0.0
        out.append(f"  {side:<10} slowest rank {hi[1]} {_ms(hi[0]).strip()} ms, fastest rank "
                   f"{lo[1]} {_ms(lo[0]).strip()} ms, spread {_ms(hi[0] - lo[0]).strip()} ms "
                   f"({spread:.1f}% of the slowest)")  # fmt: skip
    return out
