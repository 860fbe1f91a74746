"""Cut the Kineto traces of an alternating run into one trace (and run directory) per configuration.

An alternating run (``python -m lumos.examples.gpt --alternate ...``) trains two configurations in
one job, steps A, B, A, B, ..., each step's work inside a ``record_function("config:A")`` (or
``config:B``) annotation, the *marker*. :func:`split_trace` keeps one configuration's
``ProfilerStep#N`` iterations and makes the trace look like a run of that configuration alone:

* Every step has a *slot*: from the end of the previous step (the first step: from its own start)
  to its own end, so events that fall between two steps go with the following step. Each event
  belongs to the slot its start falls in, except device events (kernels, copies: they run later
  than they are launched) that take the step of the runtime call with the same ``correlation``,
  and flow ends that take the step of their flow's start.
* An event of a dropped step is removed. An event of a kept step moves back in time by the total
  length of the dropped slots before its step, so the kept steps follow each other as in a normal
  run. Timestamps are shifted in integer nanoseconds.
* Session events (before the first step, after the last one, or covering a whole step besides
  their own, such as the ``PyTorch Profiler (0)`` span) are kept: each end moves back by the
  dropped time before it (an end inside a dropped slot moves to that slot's start).
* Markers are removed (a normal run has none). Metadata events (``ph`` ``M``) and the trace's
  other keys (``distributedInfo``, ``deviceProperties``, ``baseTimeNanoseconds``, ...) are kept.
  Step numbers keep their original values, so the kept steps are numbered with gaps.

:func:`split_run` does this for every rank of a run directory and writes one run directory per
configuration (``run.json`` plus ``rank<R>.kineto.json.gz``), atomically as a set.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs, atomic_write, read_bytes
from lumos.collect.manifest import MANIFEST_NAME, kineto_name, read_manifest
from lumos.errors import InputError

__all__ = [
    "ALTERNATE_FILE",
    "DEFAULT_MARKER",
    "SplitStats",
    "Step",
    "find_steps",
    "profiler_steps",
    "read_trace",
    "split_run",
    "split_trace",
    "write_trace",
]

DEFAULT_MARKER = "config:"
#: Side file of an alternating run: the configurations (written by the bundled workload).
ALTERNATE_FILE = "alternate.json"
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
_FLOW_PHASES = frozenset({"s", "t", "f"})


@dataclass(frozen=True, kw_only=True)
class Step:
    """One ``ProfilerStep#N`` of a trace: number, configuration label, span in ns."""

    number: int
    label: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True, kw_only=True)
class SplitStats:
    """What :func:`split_trace` did to one trace."""

    kept_steps: tuple[int, ...]
    dropped_steps: tuple[int, ...]
    events_in: int
    events_out: int
    markers_removed: int
    session_events: int
    shifted_ns: int  # total length of the dropped slots


def _ns(us: Any) -> int:
    return round(float(us) * 1000)


def _us(ns: int) -> float:
    return ns / 1000


def _events(doc: Any, where: str) -> list[dict[str, Any]]:
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise InputError(where, "not a Kineto trace: no traceEvents array")
    return [e for e in events if isinstance(e, dict)]


def _is_step(e: dict[str, Any]) -> bool:
    return (
        e.get("ph") == "X"
        and e.get("cat") not in _DEVICE_CATS
        and isinstance(e.get("name"), str)
        and _STEP_RE.match(e["name"]) is not None
    )


def profiler_steps(doc: dict[str, Any], *, where: str = "<trace>") -> list[tuple[int, int, int]]:
    """``(step number, start ns, duration ns)`` of each CPU-side ``ProfilerStep#N``, in time
    order (of two events of one name, the longer, as the trace reader does)."""
    best: dict[str, dict[str, Any]] = {}
    for e in _events(doc, where):
        if _is_step(e) and (e["name"] not in best or e["dur"] > best[e["name"]]["dur"]):
            best[e["name"]] = e
    rows = sorted((_ns(e["ts"]), int(n.split("#")[1]), _ns(e["dur"])) for n, e in best.items())
    return [(num, start, dur) for start, num, dur in rows]


def find_steps(
    doc: dict[str, Any], *, marker: str = DEFAULT_MARKER, where: str = "<trace>"
) -> list[Step]:
    """The trace's CPU-side ``ProfilerStep#N`` spans in time order, each labelled by the marker
    (``marker`` + label) that starts inside it.

    Raises :class:`~lumos.errors.InputError` (naming ``where``) when the trace has no steps, two
    steps overlap, a step has no marker, or a step holds markers of two configurations.
    """
    events = _events(doc, where)
    found_steps = profiler_steps(doc, where=where)
    if not found_steps:
        raise InputError(where, "no ProfilerStep#N events: cannot tell the iterations apart")
    spans = [(start, start + dur, f"ProfilerStep#{num}") for num, start, dur in found_steps]
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        if start < end:
            raise InputError(where, f"{a} and {b} overlap")
    starts = [s for s, _, _ in spans]
    labels: list[set[str]] = [set() for _ in spans]
    for e in events:
        name = e.get("name")
        if e.get("ph") == "X" and isinstance(name, str) and name.startswith(marker):
            i = bisect.bisect_right(starts, _ns(e["ts"])) - 1
            if i >= 0 and _ns(e["ts"]) < spans[i][1]:
                labels[i].add(name[len(marker) :])
    out = []
    for (start, end, name), found in zip(spans, labels, strict=True):
        if len(found) != 1:
            what = "no" if not found else f"{len(found)} different ({', '.join(sorted(found))})"
            raise InputError(where, f"{name} holds {what} {marker}LABEL annotation(s); is this "
                             "an alternating run (lumos.examples.gpt --alternate)?")  # fmt: skip
        out.append(Step(number=int(name.split("#")[1]), label=found.pop(), start_ns=start,
                        end_ns=end))  # fmt: skip
    return out


def split_trace(
    doc: dict[str, Any],
    label: str,
    *,
    marker: str = DEFAULT_MARKER,
    where: str = "<trace>",
    slot_ns: Sequence[int] | None = None,
) -> tuple[dict[str, Any], SplitStats]:
    """The trace with only configuration ``label``'s steps (see the module docstring).

    ``slot_ns[k]``, when given, is how much time a dropped slot ``k`` removes (at most its own
    length): :func:`split_run` passes the shortest over the ranks, so that every rank moves by
    the same amount and the ranks keep their offsets to each other (a pipeline stage that
    waited for its neighbour still waits as long); a rank whose slot was longer keeps the rest
    as idle time before its next step.

    ``doc`` is not modified; the result shares unchanged event dicts with it. Raises
    :class:`~lumos.errors.InputError` when ``label`` has no step in the trace.
    """
    steps = find_steps(doc, marker=marker, where=where)
    if not any(s.label == label for s in steps):
        found = sorted({s.label for s in steps})
        raise InputError(where, f"no step of configuration {label!r} (found: {', '.join(found)})")
    n = len(steps)
    ends = [s.end_ns for s in steps]
    lows = [steps[0].start_ns, *ends[:-1]]
    kept = [s.label == label for s in steps]
    # dropped[k]: total length of the dropped slots before slot k (dropped[n]: all of them)
    dropped = [0] * (n + 1)
    own = [ends[k] - lows[k] for k in range(n)]
    cut = (
        own
        if slot_ns is None or len(slot_ns) != n
        else [min(a, b) for a, b in zip(own, slot_ns, strict=True)]
    )
    for k in range(n):
        dropped[k + 1] = dropped[k] + (0 if kept[k] else cut[k])

    def slot(t: int) -> int:
        """Slot of time ``t``: -1 before the first step, ``n`` after the last."""
        return -1 if t < lows[0] else bisect.bisect_right(ends, t)

    def moved(t: int) -> int:
        k = slot(t)
        if k < 0:
            return t
        if k >= n:
            return t - dropped[n]
        return t - dropped[k] - (0 if kept[k] else min(t - lows[k], cut[k]))

    events = _events(doc, where)
    runtime_step: dict[Any, int] = {}
    flow_step: dict[tuple[Any, Any], int] = {}
    for e in events:
        if "ts" not in e:
            continue
        k = slot(_ns(e["ts"]))
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in _RUNTIME_CATS and corr is not None:
            runtime_step.setdefault(corr, k)
        if e.get("ph") == "s":
            flow_step.setdefault((e.get("cat"), e.get("id")), k)

    out: list[dict[str, Any]] = []
    markers = session = 0
    for e in events:
        ph = e.get("ph")
        if ph == "M" or "ts" not in e:
            out.append(e)
            continue
        name = e.get("name")
        if ph == "X" and isinstance(name, str) and name.startswith(marker):
            markers += 1
            continue
        ts = _ns(e["ts"])
        end = ts + _ns(e.get("dur", 0)) if ph == "X" else ts
        k = slot(ts)
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in _DEVICE_CATS and corr in runtime_step:
            k = runtime_step[corr]
        elif ph in _FLOW_PHASES and (e.get("cat"), e.get("id")) in flow_step:
            k = flow_step[(e.get("cat"), e.get("id"))]
        if k < 0 or k >= n or (k + 1 < n and end > ends[k + 1]):
            session += 1
            new = dict(e, ts=_us(moved(ts)))
            if ph == "X":
                new["dur"] = _us(moved(end) - moved(ts))
            out.append(new)
            continue
        if not kept[k]:
            continue
        out.append(e if dropped[k] == 0 else dict(e, ts=_us(ts - dropped[k])))
    result = {key: value for key, value in doc.items() if key != "traceEvents"}
    result["traceEvents"] = out
    stats = SplitStats(
        kept_steps=tuple(s.number for s, keep in zip(steps, kept, strict=True) if keep),
        dropped_steps=tuple(s.number for s, keep in zip(steps, kept, strict=True) if not keep),
        events_in=len(events),
        events_out=len(out),
        markers_removed=markers,
        session_events=session,
        shifted_ns=dropped[n],
    )
    return result, stats


def read_trace(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A Kineto trace file (json, or compressed) decoded; InputError naming it when it is not."""
    try:
        doc = json.loads(read_bytes(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    _events(doc, str(path))
    return doc


def write_trace(doc: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a trace atomically: gzip when the name ends in ``.gz``, else plain JSON."""
    p = Path(path)
    data = json.dumps(doc, separators=(",", ":")).encode()
    with atomic_write(p, "wb") as raw:
        if p.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                gz.write(data)
        else:
            raw.write(data)
    return p


def split_run(
    run_dir: str | os.PathLike[str],
    outputs: Mapping[str, str | os.PathLike[str]],
    *,
    marker: str = DEFAULT_MARKER,
) -> dict[str, dict[str, Any]]:
    """Split every rank of the alternating run ``run_dir`` into one run directory per label.

    ``outputs`` maps a configuration label (``"A"``) to its output directory. Each output gets
    ``rank<R>.kineto.json.gz`` per rank and a ``run.json`` copied from the source's, with the
    schedule's ``active`` set to the kept steps, no execution trace, and an ``alternate`` entry
    (label, source run, kept step numbers, and the configuration from ``alternate.json`` when
    the run has one, whose ``parallel`` then replaces the manifest's). Returns each label's
    manifest dict.
    """
    src = read_manifest(run_dir)
    side_path = src.run_dir / ALTERNATE_FILE
    side: dict[str, Any] = {}
    if side_path.is_file():
        try:
            side = json.loads(side_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(side_path, f"not valid JSON: {exc}") from None
    docs = {r.rank: read_trace(r.kineto) for r in src.ranks}
    # one cut per slot for every rank: the shortest, so the ranks keep their offsets
    slots = [
        [st.end_ns - lo for st, lo in zip(steps, [steps[0].start_ns] + [x.end_ns for x in steps[:-1]], strict=True)]
        for steps in (find_steps(doc, marker=marker, where=str(src.ranks[i].kineto))
                      for i, doc in enumerate(docs.values()))
    ]  # fmt: skip
    common = (
        [min(col) for col in zip(*slots, strict=True)]
        if len({len(x) for x in slots}) == 1
        else None
    )
    manifests: dict[str, dict[str, Any]] = {}
    for label, out_dir in outputs.items():
        split = {
            rank: split_trace(doc, label, marker=marker, where=str(src.ranks[i].kineto),
                              slot_ns=common)
            for i, (rank, doc) in enumerate(docs.items())
        }  # fmt: skip
        manifest = json.loads(json.dumps(src.data))
        kept = split[min(split)][1].kept_steps
        conf = (side.get("configs") or {}).get(label, {})
        manifest["schedule"] = dict(manifest.get("schedule") or {}, active=len(kept))
        manifest["execution_trace"] = False
        if "parallel" in conf:
            manifest["parallel"] = conf["parallel"]
        manifest["alternate"] = {
            "label": label,
            "source": str(src.run_dir.resolve()),
            "kept_steps": list(kept),
            **{k: conf[k] for k in ("config", "flags") if k in conf},
        }
        for entry in manifest["ranks"]:
            entry["kineto"] = kineto_name(int(entry["rank"]))
            entry["et"] = None
        with atomic_outputs(out_dir, MANIFEST_NAME) as tmp:
            for rank, (doc, _) in split.items():
                write_trace(doc, tmp / kineto_name(rank))
            with open(tmp / MANIFEST_NAME, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
                f.write("\n")
        manifests[label] = manifest
    return manifests
