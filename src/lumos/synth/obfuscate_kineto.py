"""Obfuscate a Kineto (PyTorch profiler) trace: same events and timing, no names of the model.

What each part of the trace becomes (names: :mod:`lumos.synth.obfuscate_names`):

========================  =====================================================================
part                      output
========================  =====================================================================
event ``name``            renamed by its category's task kind (``cpu_op`` -> CPU op, runtime
                          and driver calls, ``kernel``, ``gpu_memcpy``/``gpu_memset``); user
                          annotations, python functions (module hierarchy, ``file.py(12):
                          f``) and GPU user annotations as host spans; flows and instant
                          events kept only when their name is vocabulary
``ph ts dur pid tid id``  kept (timing, processors, flows, correlation); a ``pid``/``tid``
``bp s``                  string that is not vocabulary (``stream 7`` is) gets a keyed hash
``cat``                   kept when Kineto defines it, else ``other`` (read the same way)
``args``                  only the keys lumos or Perfetto read are kept (ids, correlation,
                          stream, device, kernel launch geometry, sizes, CUDA sync fields,
                          collective metadata with process groups renamed by
                          :meth:`~lumos.synth.obfuscate_names.Namer.pg`); ``Input Dims`` and
                          ``Input Strides`` per ``--shapes`` (exact for collective ops:
                          their sizes are the message sizes); ``Input type``/``Concrete
                          Inputs`` entries kept only when vocabulary (dtypes, numbers), else
                          ``""``. Call stacks, module hierarchy, source files and every other
                          key are dropped
``M`` events              ``process_name``/``thread_name`` (program and thread names) dropped;
                          labels (``GPU 0``) and sort indices kept
top level                 ``schemaVersion``, ``displayTimeUnit``, ``baseTimeNanoseconds`` kept;
                          ``distributedInfo`` (backend, rank, world, groups with renamed
                          names/descriptions, ranks); ``deviceProperties`` numbers, with each
                          device ``name`` replaced by ``GPU (compute M.m)``. The exact SKU
                          string (``NVIDIA A100-PG509-200``, a board code) can single out a site
                          or a vendor's internal part and lumos reads nothing from it; the
                          compute capability, memory and SM counts a cost model needs stay.
                          ``traceName`` (a path), log lines (``INFO``) and unknown keys dropped
========================  =====================================================================

``--jitter`` multiplies the durations of GPU events (kernels, copies, sets) only: host events
nest, and scaling a parent and its children independently would break the nesting that
lumos reads. Deterministic: one seed, one input -> the same bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from lumos.graph.model import TaskKind
from lumos.ingest.kineto_schema import Category, category_of
from lumos.synth.obfuscate_names import Namer, bucket_dims, is_comm_op

__all__ = ["kineto_strings", "obfuscate_kineto"]

_TASK_OF = {
    Category.CPU_OP: TaskKind.CPU_OP,
    Category.RUNTIME: TaskKind.RUNTIME,
    Category.DRIVER: TaskKind.RUNTIME,
    Category.KERNEL: TaskKind.KERNEL,
    Category.MEMCPY: TaskKind.MEMCPY,
    Category.MEMSET: TaskKind.MEMSET,
}
_LITERAL = re.compile(rb'"([^"\\]*)"')
_SPANS = (Category.USER_ANNOTATION, Category.PYTHON_FUNCTION, Category.GPU_USER_ANNOTATION)
_JITTERED = (Category.KERNEL, Category.MEMCPY, Category.MEMSET)

#: Keys whose values are numbers (or lists of numbers): kept when they are.
_NUMBER_ARGS = frozenset("""
correlation|External id|external id|Record function id|Ev Idx|Sequence number|Fwd thread id|
device|context|queued|registers per thread|shared memory|blocks per SM|warps per SM|grid|block|
est. achieved occupancy %|bytes|memory bandwidth (GB/s)|Op count|Global rank stride|
Global rank start|Group size|In msg nelems|Out msg nelems|sort_index|cbid|Python id|
Python parent id|Device Type|Device Id|Addr|Bytes|Total Allocated|Total Reserved|
wait_on_stream|wait_on_cuda_event_record_corr_id|wait_on_cuda_event_id|Seq|p2p_seq
""".replace("\n", "").split("|"))  # fmt: skip
#: Keys whose string values are kept when vocabulary (else dropped).
_TEXT_ARGS = frozenset({"stream", "cuda_sync_kind", "Collective name", "dtype", "In split size",
                        "Out split size", "Process Group Ranks", "labels"})  # fmt: skip
_PG_ARGS = frozenset({"Process Group Name", "Process Group Description"})
_SHAPE_ARGS = ("Input Dims", "Input Strides")
_LIST_ARGS = ("Input type", "Concrete Inputs")
_TOP_NUMBERS = ("schemaVersion", "baseTimeNanoseconds")
_DIST_NUMBERS = ("rank", "world_size", "pg_count")
_PG_NUMBERS = ("pg_size", "group_size", "group_count")


def _is_num(v: Any) -> bool:
    t = type(v)
    if t is int or t is float:
        return True
    if t is list:
        return all(_is_num(x) for x in v)
    return isinstance(v, int | float) and not isinstance(v, bool)


class _Obfuscator:
    def __init__(self, namer: Namer, shapes: str, jitter_pct: float, seed: int) -> None:
        self.namer = namer
        self.shapes = shapes
        self.jitter = jitter_pct / 100.0
        self.rng = np.random.default_rng(seed)
        self.diag: Counter[str] = Counter()

    def proc(self, v: Any) -> Any:
        if isinstance(v, str) and not self.namer.safe(v):
            return f"thread {self.namer.digest('proc:' + v)}"
        return v

    def name(self, e: dict[str, Any], cat: Category) -> str:
        name = e.get("name", "")
        if not isinstance(name, str):
            return ""
        if cat in _TASK_OF:
            return self.namer.task(name, _TASK_OF[cat])
        if cat in _SPANS:
            return self.namer.span(name)
        if self.namer.safe(name):
            return name
        return self.namer.span(name)

    def args(self, name: str, args: dict[str, Any], comm: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        namer = self.namer
        for k, v in args.items():
            text_ok = k in _TEXT_ARGS and (_is_num(v) or (isinstance(v, str) and namer.safe(v)))
            if text_ok or (k in _NUMBER_ARGS and _is_num(v)):
                out[k] = v
            elif k in _PG_ARGS and isinstance(v, str):
                out[k] = namer.pg(v)
            elif k in _SHAPE_ARGS:
                if _is_num(v) and (comm or self.shapes == "keep"):
                    out[k] = v
                elif _is_num(v) and self.shapes == "bucket":
                    out[k] = bucket_dims(v)
            elif k in _LIST_ARGS and isinstance(v, list):
                out[k] = [x if _is_num(x) or (isinstance(x, str) and namer.safe(x)) else ""
                          for x in v]  # fmt: skip
            else:
                self.diag["arg_values_dropped"] += 1
        return out

    def event(self, e: dict[str, Any]) -> dict[str, Any] | None:
        ph = e.get("ph", "")
        if ph == "M":
            return self.meta_event(e)
        raw_cat = e.get("cat", "")
        raw_cat = raw_cat if isinstance(raw_cat, str) else ""
        cat = _category(raw_cat)
        out: dict[str, Any] = {}
        for k, v in e.items():
            if k == "name":
                out[k] = self.name(e, cat)
            elif k == "cat":
                out[k] = raw_cat if raw_cat.lower() in _KNOWN_CATS else "other"
            elif k in ("pid", "tid"):
                out[k] = self.proc(v)
            elif k == "id":
                out[k] = v if _is_num(v) else self.namer.digest(f"id:{v}")
            elif k in ("ph", "ts", "dur", "bp", "s"):
                out[k] = v if _is_num(v) or self.namer.safe(str(v)) else ""
            elif k == "args" and isinstance(v, dict):
                comm = isinstance(e.get("name"), str) and is_comm_op(e["name"])
                out[k] = self.args(out.get("name", ""), v, comm)
            else:
                self.diag["event_fields_dropped"] += 1
        if self.jitter and cat in _JITTERED and isinstance(out.get("dur"), int | float):
            f = 1.0 + self.rng.uniform(-self.jitter, self.jitter)
            out["dur"] = round(float(out["dur"]) * f, 3)
        return out

    def meta_event(self, e: dict[str, Any]) -> dict[str, Any] | None:
        name = e.get("name")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if name in ("process_name", "thread_name"):
            self.diag["process_and_thread_names_dropped"] += 1
            return None
        if not isinstance(name, str) or not self.namer.safe(name):
            self.diag["metadata_events_dropped"] += 1
            return None
        out = {k: (self.proc(v) if k in ("pid", "tid") else v)
               for k, v in e.items() if k in ("ph", "ts", "pid", "tid", "name")}  # fmt: skip
        out["args"] = self.args(name, args, False)  # type: ignore[arg-type]
        return out

    def top(self, doc: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in doc.items():
            unit_ok = k == "displayTimeUnit" and isinstance(v, str) and self.namer.safe(v)
            if unit_ok or (k in _TOP_NUMBERS and _is_num(v)):
                out[k] = v
            elif k == "deviceProperties" and isinstance(v, list):
                out[k] = [self.device(d) for d in v if isinstance(d, dict)]
            elif k == "distributedInfo" and isinstance(v, dict):
                out[k] = self.distributed(v)
            elif k != "traceEvents":
                self.diag["top_level_keys_dropped"] += 1
        events = doc.get("traceEvents")
        evs = (
            [self.event(e) for e in events if isinstance(e, dict)]
            if isinstance(events, list)
            else []
        )
        out["traceEvents"] = [e for e in evs if e is not None]
        return out

    def device(self, d: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in d.items() if k != "name" and _is_num(v) and self.namer.safe(k)}
        if "name" in d:
            major, minor = d.get("computeMajor", "?"), d.get("computeMinor", "?")
            out["name"] = f"GPU (compute {major}.{minor})"
        return out

    def distributed(self, d: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: d[k] for k in _DIST_NUMBERS if k in d and _is_num(d[k])}
        for k in ("backend", "nccl_version"):
            if isinstance(d.get(k), str) and self.namer.safe(d[k]):
                out[k] = d[k]
        pgs = d.get("pg_config")
        if isinstance(pgs, list):
            out["pg_config"] = [self.group(g) for g in pgs if isinstance(g, dict)]
        return out

    def group(self, g: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in g.items():
            if k in ("pg_name", "pg_desc") and isinstance(v, str | int):
                out[k] = self.namer.pg(str(v)) if isinstance(v, str) else v
            elif k in (*_PG_NUMBERS, "ranks", "backend_config") and (
                _is_num(v) or (isinstance(v, str) and self.namer.safe(v))
            ):
                out[k] = v
        return out


_KNOWN_CATS = frozenset({
    "cpu_op", "operator", "user_annotation", "python_function", "cuda_runtime", "hip_runtime",
    "runtime", "cuda_driver", "hip_driver", "driver", "kernel", "gpu_memcpy", "memcpy",
    "gpu_memset", "memset", "gpu_user_annotation", "cuda_sync", "trace", "ac2g", "fwdbwd",
    "async", "async_cpu_to_gpu", "cpu_instant_event", "overhead",
})  # fmt: skip


@lru_cache(maxsize=1024)
def _category(cat: str) -> Category:
    return category_of(cat, False)


def obfuscate_kineto(
    doc: dict[str, Any],
    namer: Namer,
    *,
    shapes: str = "keep",
    jitter_pct: float = 0.0,
    seed: int = 0,
) -> tuple[bytes, dict[str, int]]:
    """The obfuscated trace as JSON bytes, and counts of what was dropped (module docstring).

    ``doc`` is the decoded top-level object of one trace; ``namer`` carries the key (one per
    invocation, shared by every file of it).
    """  # fmt: skip
    ob = _Obfuscator(namer, shapes, jitter_pct, seed)
    out = ob.top(doc)
    return msgspec.json.encode(out), dict(sorted(ob.diag.items()))


def kineto_strings(doc: Any, payload: bytes | None = None) -> list[str] | set[str]:
    """Every object key and string value of a decoded JSON document, at any depth (the
    "strings of the input" of :mod:`lumos.synth.leaks`). Given the document's ``payload``
    without a backslash (no escapes: every string literal is its decoded string), they are read
    from it in one pass instead."""
    if payload is not None and b"\\" not in payload:
        return {s.decode("utf-8", "replace") for s in set(_LITERAL.findall(payload))}
    out: list[str] = []
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            out.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out
