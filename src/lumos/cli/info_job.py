"""``lumos info`` of several ranks of one job: the job's summary first, one line per rank.

A job is more than two Kineto traces of one world size (above 1) with distinct ranks: DLRM's
eight traces print 104 lines of per-rank detail, in which the slowest rank and what differs
between ranks are hard to see. :func:`format_job` puts first what a reader compares: the
steps' slowest and fastest rank and their spread, the collectives (the same on every rank, or
which ranks differ), the notes with how many ranks carry each, then one line per rank
(``lumos info --all-ranks`` adds every rank's detail).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lumos.cli.info import _ms, collectives_text

__all__ = ["format_job", "job_ranks"]


def job_ranks(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Kineto summaries of ``summaries`` that form one job (see the module docstring),
    in rank order; empty when they do not."""
    kineto = [s for s in summaries if s.get("kind") == "kineto"]
    worlds = {s["world_size"] for s in kineto}
    ranks = [s["rank"] for s in kineto]
    if len(kineto) <= 2 or len(worlds) != 1 or min(worlds) <= 1 or min(ranks) < 0:
        return []
    if len(set(ranks)) != len(ranks):
        return []
    return sorted(kineto, key=lambda s: s["rank"])


def _collectives(s: dict[str, Any]) -> str:
    return collectives_text(s) or "none"


def format_job(job: list[dict[str, Any]]) -> str:
    """The job's summary (see the module docstring) of :func:`job_ranks`'s result."""
    first = job[0]
    devices = sorted({str(s["device"] or "?") for s in job})
    lines = [f"job: {len(job)} ranks of world {first['world_size']}, backend "
             f"{first['backend'] or '-'}, device {', '.join(devices)}"]  # fmt: skip
    names = [st["name"] for st in first["steps"]]
    for name in names:
        times = {s["rank"]: st["dur_ns"] for s in job for st in s["steps"] if st["name"] == name}
        slow = max(times, key=lambda r: (times[r], -r))
        fast = min(times, key=lambda r: (times[r], r))
        spread = (times[slow] - times[fast]) / times[fast] * 100 if times[fast] else 0.0
        lines.append(f"  {name}: slowest rank {slow} {_ms(times[slow])}, fastest rank {fast} "
                     f"{_ms(times[fast])} (spread {spread:.1f} %, {len(times)} of "
                     f"{len(job)} ranks)")  # fmt: skip
    kinds = Counter(_collectives(s) for s in job)
    if len(kinds) == 1:
        lines.append(f"  collectives (every rank): {next(iter(kinds))}")
    else:
        for text, n in kinds.most_common():
            ranks = [s["rank"] for s in job if _collectives(s) == text]
            lines.append(f"  collectives (ranks {_ranks(ranks)}, {n}): {text}")
    notes = Counter(f for s in job for f in s["flags"])
    warnings = Counter(f"{k} x{v}" for s in job for k, v in s["diagnostics"].items())
    for text, n in sorted(notes.items()):
        lines.append(f"  note ({n} of {len(job)} ranks): {text}")
    for text, n in sorted(warnings.items()):
        lines.append(f"  warning ({n} of {len(job)} ranks): {text}")
    lines.append("  rank  events  kernels  steps")
    for s in job:
        kernels = s["categories"].get("kernel", 0)
        steps = "  ".join(_ms(st["dur_ns"]) for st in s["steps"])
        lines.append(f"  {s['rank']:>4}  {s['num_events']:>6}  {kernels:>7}  {steps}")
    lines.append(
        "  (every rank's detail: lumos info --all-ranks; the rank the others wait for, "
        "which need not be the slowest step's: lumos advise)"
    )
    return "\n".join(lines)


def _ranks(ranks: list[int]) -> str:
    return ",".join(str(r) for r in ranks)
