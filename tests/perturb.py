"""Rewrite a Kineto trace as another recorder, clock or writer would have written it.

Each perturbation changes how a run was *recorded*, never what ran: a trace and its variants
describe the same execution, so lumos must replay them alike and answer a what-if alike. They
work on the parsed JSON document (``dict`` with ``traceEvents``, or a bare event list) and
return a new one; the input is never modified.

=====================  ======================================================================
name                   what another recorder would have written
=====================  ======================================================================
``no_cuda_sync``       no ``cuda_sync`` events (``enable_cuda_sync_events`` off: most traces)
``no_stream_args``     no ``stream`` argument on runtime calls or GPU activities (the stream
                       only as the GPU event's ``tid``)
``no_flows``           no flow events (``ac2g`` launch arrows, ``fwdbwd``): correlation ids only
``reordered``          the same events in another order in the file
``gpu_clock(us)``      GPU timestamps ``us`` microseconds off the CPU clock (+ lags, - leads)
``gpu_drift(us, ppm)`` GPU clock ``us`` off at the first event and drifting ``ppm`` parts per
                       million of elapsed time (clock crystals are specified to +-20-50 ppm)
``clock(us)``          every timestamp of the file moved (another rank's host clock)
``ranks_clock_offset`` rank ``i`` of a job (the ``i``-th file) moved by ``clock`` of
                       ``(-1)**i * 1.3 * (i + 1)`` ms: hosts whose clocks disagree
=====================  ======================================================================

``python -m tests.perturb TRACE OUTDIR`` writes every variant of one trace (gzip JSON).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["JOB_VARIANTS", "VARIANTS", "load", "perturb", "ranks_clock_offset", "variants", "write"]

Doc = dict[str, Any] | list[Any]
#: Categories CUPTI / roctracer time on the GPU clock.
GPU_CATS = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "Kernel",
     "Memcpy", "Memset"}
)  # fmt: skip
_FLOW_PH = frozenset({"s", "t", "f"})


def load(path: str | Path) -> Doc:
    """The JSON document of a (possibly gzipped) trace file."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc: Doc = json.loads(raw)
    return doc


def write(doc: Doc, path: str | Path) -> Path:
    """Write ``doc`` as gzipped JSON (``.json.gz``) or plain JSON."""
    p = Path(path)
    text = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(text, 1) if p.name.endswith(".gz") else text)
    return p


def _events(doc: Doc) -> list[Any]:
    return doc if isinstance(doc, list) else doc.get("traceEvents", [])


def _with_events(doc: Doc, events: list[Any]) -> Doc:
    if isinstance(doc, list):
        return events
    out = dict(doc)
    out["traceEvents"] = events
    return out


def _is_gpu(e: dict[str, Any], gpu_pids: set[Any]) -> bool:
    if e.get("cat") in GPU_CATS:
        return True
    # a flow end bound to a GPU activity sits on the device's track
    return e.get("ph") in _FLOW_PH and e.get("cat") == "ac2g" and e.get("pid") in gpu_pids


def _gpu_pids(events: list[Any]) -> set[Any]:
    return {e.get("pid") for e in events if isinstance(e, dict) and e.get("cat") in GPU_CATS}


def _shift(doc: Doc, gpu_only: bool, us: float, ppm: float = 0.0) -> Doc:
    """Timestamps moved, written at the resolution the recorder wrote them (whole microseconds
    in older traces, nanosecond fractions in newer ones)."""
    events = copy.deepcopy(_events(doc))
    dicts = [e for e in events if isinstance(e, dict) and isinstance(e.get("ts"), int | float)]
    gpu_pids = _gpu_pids(events)
    moved = [e for e in dicts if not gpu_only or _is_gpu(e, gpu_pids)]
    whole_us = all(float(e["ts"]).is_integer() for e in moved)
    t0 = min((float(e["ts"]) for e in moved), default=0.0)
    for e in moved:
        t = float(e["ts"])
        new = t + us + ppm * 1e-6 * (t - t0)
        e["ts"] = round(new) if whole_us else round(new, 3)
    return _with_events(doc, events)


def gpu_clock(us: float) -> Callable[[Doc], Doc]:
    """GPU timestamps ``us`` microseconds later (a GPU clock that leads; negative: lags)."""
    return lambda doc: _shift(doc, True, us)


def gpu_drift(us: float, ppm: float) -> Callable[[Doc], Doc]:
    """GPU timestamps ``us`` off at the first GPU event, plus ``ppm`` of the time since."""
    return lambda doc: _shift(doc, True, us, ppm)


def clock(us: float) -> Callable[[Doc], Doc]:
    """Every timestamp ``us`` microseconds later (a rank whose host clock is off)."""
    return lambda doc: _shift(doc, False, us)


def no_cuda_sync(doc: Doc) -> Doc:
    return _with_events(doc, [e for e in _events(doc) if e.get("cat") != "cuda_sync"])


def no_flows(doc: Doc) -> Doc:
    return _with_events(doc, [e for e in _events(doc) if e.get("ph") not in _FLOW_PH])


def no_stream_args(doc: Doc) -> Doc:
    events = copy.deepcopy(_events(doc))
    for e in events:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict):
            args.pop("stream", None)
    return _with_events(doc, events)


def reordered(doc: Doc, seed: int = 7) -> Doc:
    events = list(_events(doc))
    random.Random(seed).shuffle(events)
    return _with_events(doc, events)


#: The variants every real trace is checked with (name -> rewrite).
VARIANTS: dict[str, Callable[[Doc], Doc]] = {
    "no_cuda_sync": no_cuda_sync,
    "no_stream_args": no_stream_args,
    "no_flows": no_flows,
    "reordered": reordered,
    "gpu_lags_50us": gpu_clock(-50),
    "gpu_leads_50us": gpu_clock(50),
    "gpu_lags_2.5ms": gpu_clock(-2_500),
    "gpu_leads_20ms": gpu_clock(20_000),
    "gpu_lags_20ms": gpu_clock(-20_000),
    "gpu_drifts": gpu_drift(-1_000, 50),
}


def ranks_clock_offset(docs: list[Doc]) -> list[Doc]:
    """The files of one job, each rank's host clock off by its own amount (see the table)."""
    return [clock((-1) ** i * 1_300 * (i + 1))(d) for i, d in enumerate(docs)]


#: Variants of a whole job (several files at once).
JOB_VARIANTS: dict[str, Callable[[list[Doc]], list[Doc]]] = {
    "ranks_clock_offset": ranks_clock_offset,
}


def perturb(doc: Doc, name: str) -> Doc:
    """The variant ``name`` of ``doc`` (see :data:`VARIANTS`)."""
    return VARIANTS[name](doc)


def variants(doc: Doc) -> dict[str, Doc]:
    """Every variant of ``doc`` by name."""
    return {name: fn(doc) for name, fn in VARIANTS.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.perturb", description=__doc__)
    ap.add_argument("trace", type=Path)
    ap.add_argument("outdir", type=Path)
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    doc = load(a.trace)
    stem = a.trace.name.split(".json")[0]
    for name, fn in VARIANTS.items():
        print(write(fn(doc), a.outdir / f"{stem}.{name}.json.gz"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
