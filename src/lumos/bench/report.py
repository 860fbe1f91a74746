"""``bench.json``: what ran, what was skipped and why, executed against source, per step and class.

Top-level keys (DESIGN §7 fixes the first five; the rest extend them):

=======================  ======================================================================
key                      meaning
=======================  ======================================================================
``ops_total``            compute ops of the source's steps, over every rank
``ops_executed``         those that ran (a GPU-only op run as its portable twin included)
``ops_skipped``          reason -> count of those that did not
``ops_emulated``         Chakra ops with no recorded work, held for their recorded time
                         (executed + emulated + skipped = total)
``steps[]``              per step: ``name``, ``source_ns`` (null without source timing),
                         ``executed_ns``, ``change``; several ranks: the slowest rank's each
``ranks[]``              per rank: its files under ``rank<r>/``, its steps, its counts, the
                         torch intra-op ``threads`` it ran with and ``threads_from`` (``option``,
                         ``recorded``, ``not recorded: ...``; see
                         :func:`lumos.bench.run.rank_threads`)
``comms_total``...       the same counts for collectives and transfers
``skipped[]``            each skipped op by ``reason`` and ``op`` with ``count`` (and the
                         first error message, ``example``, for ops that raised)
``substituted``          GPU-only op -> the twin it ran as
``median``               median step, source and executed, over the steps both have
``classes[]``            per op class: time per step (summed over ranks), source and executed;
                         several ranks: ``communication`` is the collectives' transfers,
                         ``comm_wait`` their wait for the other ranks (see
                         :func:`lumos.bench.compare.split_waiting`)
``source``               paths, ``kind``, ``timing`` (recorded, replayed or null), and whether
                         the timed run recorded an Execution Trace (``execution_trace``) and
                         allocations (``memory``) as it ran
``execution_trace``,     whether the executed run recorded them too (by default as the source:
``memory``               each costs time per op, so both sides pay it or neither)
``comms``                ``--comms-only``: ``samples`` (one per call: the shortest time over
                         the ranks, see :func:`comm_samples`) and ``table`` (per kind, group
                         size and message size: count, median time, algorithm bandwidth)
=======================  ======================================================================

Times are integer nanoseconds; ``change`` is executed / source - 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lumos._io import atomic_write
from lumos.bench.compare import compare_classes, compare_steps, split_waiting, step_classes
from lumos.bench.plan import Skips

__all__ = [
    "BENCH_FILE",
    "FORMAT",
    "bench_document",
    "comm_samples",
    "comm_table",
    "read_document",
    "write_document",
]

BENCH_FILE = "bench.json"
FORMAT = "lumos.bench"


def _executed(tmp: Path, results: Sequence[Any]) -> dict[int, dict[str, dict[str, Any]]]:
    from lumos.ingest.kineto import read_kineto

    return {r.rank: step_classes(read_kineto(tmp / f"rank{r.rank}" / r.kineto)) for r in results}


def comm_samples(results: Sequence[Any]) -> list[dict[str, Any]]:
    """One sample per call of the run: its time on the rank that took least (the last to
    arrive, which waited for nobody), in call order."""
    best: dict[int, dict[str, Any]] = {}
    for r in results:
        for s in r.comm_samples:
            k = int(s["call"])
            if k not in best or s["time_ns"] < best[k]["time_ns"]:
                best[k] = {key: v for key, v in s.items() if key != "rank"}
    return [best[k] for k in sorted(best)]


def comm_table(samples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (kind, group size, size, dtype): ``count``, ``median_ns`` and ``algbw_bytes_per_s``
    (size / median time), sorted by kind, group size, size."""
    groups: dict[tuple[str, int, int, str], list[int]] = {}
    for s in samples:
        key = (s["kind"], int(s["group_size"]), int(s["size_bytes"]), str(s.get("dtype", "")))
        groups.setdefault(key, []).append(int(s["time_ns"]))
    rows = []
    for (kind, group, size, dtype), times in sorted(groups.items()):
        med = int(np.median(times))
        rows.append({"kind": kind, "group_size": group, "size_bytes": size, "dtype": dtype,
                     "count": len(times), "median_ns": med,
                     "algbw_bytes_per_s": round(size / med * 1e9) if med > 0 else None})  # fmt: skip
    return rows


def _rank_entry(r: Any, executed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    src = dict(zip(r.steps, r.source_ns, strict=True))
    ex = {n: int(executed[n]["dur_ns"]) for n in r.steps if n in executed}
    return {
        "rank": r.rank,
        "kineto": f"rank{r.rank}/{r.kineto}",
        "et": f"rank{r.rank}/{r.et}" if r.et else None,
        "ops_total": r.ops_total, "ops_executed": r.ops_executed,
        "ops_skipped": r.skipped.counts(), "ops_emulated": r.ops_emulated,
        "comms_total": r.comms_total, "comms_executed": r.comms_executed,
        "comms_skipped": r.comm_skipped.counts(),
        "replaced_outputs": r.replaced_outputs,
        "steps": compare_steps(src, ex)["steps"],
        "warmup_wall_ns": r.wall_ns[:-1],
        "threads": r.threads, "threads_from": r.threads_from,
        "notes": r.notes,
    }  # fmt: skip


def _job_steps(ranks: Sequence[Mapping[str, Any]]) -> tuple[dict[str, int | None], dict[str, int]]:
    """Per step name: the slowest rank's source and executed times (first rank's order)."""
    src: dict[str, int | None] = {}
    ex: dict[str, int] = {}
    for r in ranks:
        for s in r["steps"]:
            n = s["name"]
            if s["executed_ns"] is not None:
                ex[n] = max(ex.get(n, 0), int(s["executed_ns"]))
            if s["source_ns"] is not None:
                src[n] = max(src.get(n) or 0, int(s["source_ns"]))
            else:
                src.setdefault(n, None)
    return src, ex


def bench_document(
    src: Any,
    results: Sequence[Any],
    timing: Mapping[int, Mapping[str, Mapping[str, Any]]],
    tmp: Path,
    *,
    device: str,
    options: Any,
    et: bool,
    memory: bool = False,
    torch_version: str,
) -> dict[str, Any]:
    """The ``bench.json`` document (see the module docstring)."""
    executed = _executed(tmp, results)
    ranks = [_rank_entry(r, executed[r.rank]) for r in results]
    skips, comm_skips = Skips(), Skips()
    substituted: dict[str, str] = {}
    for r in results:
        skips.merge(r.skipped)
        comm_skips.merge(r.comm_skipped)
        substituted.update(r.substituted)
    src_steps, ex_steps = _job_steps(ranks)
    steps = compare_steps(src_steps, ex_steps)
    with_classes = [dict(t) for t in timing.values() if all(s.get("classes") for s in t.values())]
    source_classes = ([{n: s for n, s in t.items()} for t in with_classes]
                      if with_classes and len(with_classes) == len(results) else None)  # fmt: skip
    for side in (source_classes or [], list(executed.values())):
        split_waiting(side)
    doc: dict[str, Any] = {
        "format": FORMAT, "version": 1,
        "ops_total": sum(r.ops_total for r in results),
        "ops_executed": sum(r.ops_executed for r in results),
        "ops_skipped": skips.counts(),
        "ops_emulated": sum(r.ops_emulated for r in results),
        "steps": steps["steps"],
        "median": steps["median"],
        "classes": compare_classes(source_classes, list(executed.values())),
        "comms_total": sum(r.comms_total for r in results),
        "comms_executed": sum(r.comms_executed for r in results),
        "comms_skipped": comm_skips.counts(),
        "skipped": skips.rows() + [{**row, "collective": True} for row in comm_skips.rows()],
        "substituted": dict(sorted(substituted.items())),
        "source": {"paths": list(src.paths), "kind": src.kind, "timing": src.timing,
                   "execution_trace": src.execution_trace,
                   "memory": getattr(src, "memory", False)},
        "device": device, "torch_version": torch_version, "world_size": len(results),
        "warmup": options.warmup, "execution_trace": et, "memory": memory,
        "comms_only": options.comms_only,
        "threads": options.threads, "emulate": options.emulate,
        "ranks": ranks,
    }  # fmt: skip
    if options.comms_only:  # nothing else ran: the other classes say nothing
        doc["classes"] = [c for c in doc["classes"] if c["class"] in ("communication", "comm_wait")]
        samples = comm_samples(results)
        doc["comms"] = {"samples": samples, "table": comm_table(samples)}
    return doc


def write_document(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``doc`` as indented JSON (atomically)."""
    p = Path(path)
    with atomic_write(p) as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    return p


def read_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``bench.json`` (or the folder holding one), checked to be one."""
    from lumos.errors import InputError

    p = Path(path)
    if p.is_dir():
        p = p / BENCH_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(p, f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(p, "not a lumos bench.json")
    return doc
