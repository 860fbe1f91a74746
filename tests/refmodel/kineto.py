"""Writing an :class:`~.runtime.Execution` as a Kineto (PyTorch profiler) JSON document.

The shape follows real traces (PyTorch 2.x, CUDA 12, NCCL 2.2x on A100):

- Top level: ``schemaVersion``, ``deviceProperties`` (one GPU), ``distributedInfo`` (nccl,
  rank 0 of 8, ``pg_config``), ``record_shapes``, ``traceEvents``, ``traceName``,
  ``displayTimeUnit``, ``baseTimeNanoseconds``.
- ``ph:"X"`` events, ``ts``/``dur`` in float microseconds with ns fractions. CPU events on
  the process pid, one tid per thread; GPU events on pid 0 (the device), tid = stream; GPU
  ``ts`` = true time - the program's ``gpu_clock_lag_ns`` - its ``gpu_clock_drift_ppm`` parts
  per million of the true time (a GPU clock that is off and drifts).
- cpu_op / user_annotation args: ``External id``, ``Record function id``, autograd
  ``Sequence number`` / ``Fwd thread id``, the op's own args (``Input Dims``, collective
  metadata), ``Ev Idx``. Runtime calls: ``External id`` (the enclosing op's, else their
  correlation), ``cbid``, ``correlation``. GPU activities: ``External id`` and ``correlation``
  of their launch (backlog work: a correlation with no runtime call, External id 0), device,
  stream, launch geometry or bytes; NCCL kernels repeat the collective metadata.
- ``ac2g`` flows (``s`` on the enqueuing call, ``f`` with ``bp:"e"`` on the activity, id =
  correlation), ``fwdbwd`` flows from a forward op to its backward op, ``gpu_user_annotation``
  per user annotation and stream (first to last activity launched inside it), process/thread
  metadata (``ph:"M"``) and the profiler's ``Trace`` span and instants.
- No ``cuda_sync`` events, as in most real traces.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .program import CBID, ENQUEUING, Call, Op, Work
from .runtime import CpuSpan, Execution, GpuSpan

__all__ = ["BASE_NS", "to_kineto", "write_trace"]

BASE_NS = 1_234_567_890_000  # the CPU clock's reading at true time 0 (ns)
BASE_TIME_NANOSECONDS = 1_717_171_717_000_000_000
NUM_SMS = 108
DEVICE = {
    "id": 0,
    "name": "NVIDIA A100-SXM4-80GB",
    "totalGlobalMem": 85_097_971_712,
    "computeMajor": 8,
    "computeMinor": 0,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "numSms": NUM_SMS,
    "regsPerMultiprocessor": 65536,
    "sharedMemPerBlockOptin": 166912,
    "sharedMemPerMultiprocessor": 167936,
}
WORLD = 8
PROCESS_NAME = "python3.11"


def _us(ns: int) -> float:
    return ns / 1000


def _op_event(span: CpuSpan, pid: int, ev_idx: int) -> dict[str, Any]:
    op = span.node
    assert isinstance(op, Op)
    args: dict[str, Any] = {"External id": span.ext_id, "Record function id": span.ext_id}
    if op.seq >= 0:
        args["Sequence number"] = op.seq
        args["Fwd thread id"] = op.fwd_thread
    args.update(op.args)
    args["Ev Idx"] = ev_idx
    return {
        "ph": "X",
        "cat": op.cat,
        "name": op.name,
        "pid": pid,
        "tid": span.tid,
        "ts": _us(BASE_NS + span.start_ns),
        "dur": _us(span.end_ns - span.start_ns),
        "args": args,
    }


def _call_event(span: CpuSpan, pid: int) -> dict[str, Any]:
    call = span.node
    assert isinstance(call, Call)
    ext = span.ext_id if span.ext_id >= 0 else span.corr
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": call.api,
        "pid": pid,
        "tid": span.tid,
        "ts": _us(BASE_NS + span.start_ns),
        "dur": _us(span.end_ns - span.start_ns),
        "args": {"External id": ext, "cbid": CBID[call.api], "correlation": span.corr},
    }


def _gpu_ext(g: GpuSpan) -> int:
    if g.launch is None:
        return 0
    return g.launch.ext_id if g.launch.ext_id >= 0 else g.launch.corr


def _kernel_args(w: Work) -> dict[str, Any]:
    blocks = w.grid[0] * w.grid[1] * w.grid[2]
    threads = w.block[0] * w.block[1] * w.block[2]
    warps = blocks * -(-threads // 32)
    args: dict[str, Any] = {
        "registers per thread": 96 if w.coll else 64,
        "shared memory": 87568 if w.coll else 16384,
        "blocks per SM": round(blocks / NUM_SMS, 6),
        "warps per SM": round(warps / NUM_SMS, 6),
        "grid": list(w.grid),
        "block": list(w.block),
        "est. achieved occupancy %": 0 if w.coll else min(100, round(100 * warps / NUM_SMS / 64)),
    }
    if w.coll is not None:
        c = w.coll
        args.update(
            {
                "Collective name": c.name,
                "In msg nelems": c.nelems,
                "Out msg nelems": c.nelems,
                "Group size": c.group_size,
                "dtype": c.dtype,
                "In split size": "[]",
                "Out split size": "[]",
                "Process Group Name": "0",
                "Process Group Description": "default_pg",
                "Process Group Ranks": str(list(range(c.group_size))),
            }
        )
    return args


def _gpu_clock(prog: Any) -> Callable[[int], int]:
    """True time (ns) -> the GPU clock's reading of it, as the trace writes it."""
    lag, ppm = prog.gpu_clock_lag_ns, prog.gpu_clock_drift_ppm
    return lambda t: t - lag - round(ppm * t / 1_000_000)


def _gpu_event(g: GpuSpan, clock: Callable[[int], int]) -> dict[str, Any]:
    w = g.work
    args: dict[str, Any] = {"External id": _gpu_ext(g)}
    if w.cat == "kernel":
        args["queued"] = 0
    args.update({"device": 0, "context": 1, "stream": g.stream, "correlation": g.corr})
    if w.cat == "kernel":
        args.update(_kernel_args(w))
    else:
        dur = max(1, g.end_ns - g.start_ns)
        args["bytes"] = w.nbytes
        args["memory bandwidth (GB/s)"] = w.nbytes / dur
    return {
        "ph": "X",
        "cat": w.cat,
        "name": w.name,
        "pid": 0,
        "tid": g.stream,
        "ts": _us(BASE_NS + clock(g.start_ns)),
        "dur": _us(g.end_ns - g.start_ns),
        "args": args,
    }


def _gpu_annotations(ex: Execution, clock: Callable[[int], int]) -> list[dict[str, Any]]:
    """One ``gpu_user_annotation`` per (user annotation, stream): its launched activities' span."""
    spans: dict[tuple[int, int], list[int]] = {}
    anns: dict[int, tuple[str, int]] = {}  # id(span) -> (name, External id)
    for g in ex.gpu:
        s = g.launch.parent if g.launch else None
        while s is not None:
            if isinstance(s.node, Op) and s.node.cat == "user_annotation":
                key = (id(s), g.stream)
                anns[id(s)] = (s.node.name, s.ext_id)
                cur = spans.setdefault(key, [g.start_ns, g.end_ns])
                cur[0], cur[1] = min(cur[0], g.start_ns), max(cur[1], g.end_ns)
            s = s.parent
    out = []
    order = {id(s): i for i, s in enumerate(ex.cpu)}
    for (sid, stream), (a, b) in sorted(spans.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        name, ext = anns[sid]
        out.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": _us(BASE_NS + clock(a)),
                "dur": _us(b - a),
                "args": {"External id": ext},
            }
        )
    return out


def _flow(ph: str, fid: int, pid: int, tid: int, ts: float, cat: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts, "cat": cat}
    ev["name"] = cat
    if ph == "f":
        ev["bp"] = "e"
    return ev


def _fwdbwd_flows(ex: Execution, pid: int) -> list[dict[str, Any]]:
    fwd: dict[int, CpuSpan] = {}
    out: list[dict[str, Any]] = []
    for s in ex.cpu:
        if isinstance(s.node, Op) and s.node.seq >= 0 and s.node.fwd_thread == 0:
            fwd.setdefault(s.node.seq, s)
    fid = 0
    for s in ex.cpu:
        if isinstance(s.node, Op) and s.node.fwd_thread == 1 and s.node.seq in fwd:
            f = fwd[s.node.seq]
            fid += 1
            out.append(_flow("s", fid, pid, f.tid, _us(BASE_NS + f.start_ns), "fwdbwd"))
            out.append(_flow("f", fid, pid, s.tid, _us(BASE_NS + s.start_ns), "fwdbwd"))
    return out


def _metadata(ex: Execution, ts: float) -> list[dict[str, Any]]:
    pid = ex.program.pid
    out: list[dict[str, Any]] = []

    def m(name: str, p: int, tid: int, args: dict[str, Any]) -> None:
        out.append({"name": name, "ph": "M", "ts": ts, "pid": p, "tid": tid, "args": args})

    m("process_name", pid, 0, {"name": PROCESS_NAME})
    m("process_labels", pid, 0, {"labels": "CPU"})
    m("process_sort_index", pid, 0, {"sort_index": pid})
    m("process_name", 0, 0, {"name": PROCESS_NAME})
    m("process_labels", 0, 0, {"labels": "GPU 0"})
    m("process_sort_index", 0, 0, {"sort_index": 16777216})
    for stream in sorted({g.stream for g in ex.gpu}):
        m("thread_name", 0, stream, {"name": f"stream {stream} "})
        m("thread_sort_index", 0, stream, {"sort_index": stream})
    for th in ex.program.threads:
        m("thread_name", pid, th.tid, {"name": f"thread {th.tid} ({th.label})"})
        m("thread_sort_index", pid, th.tid, {"sort_index": th.tid})
    return out


def to_kineto(ex: Execution) -> dict[str, Any]:
    """The Kineto JSON document of ``ex`` (see the module docstring)."""
    prog = ex.program
    pid, clock = prog.pid, _gpu_clock(prog)
    events: list[dict[str, Any]] = []
    ev_idx = 0
    for s in ex.cpu:
        if isinstance(s.node, Op):
            events.append(_op_event(s, pid, ev_idx))
            ev_idx += 1
        else:
            events.append(_call_event(s, pid))
            if s.node.api in ENQUEUING:
                events.append(_flow("s", s.corr, pid, s.tid, _us(BASE_NS + s.start_ns), "ac2g"))
    for g in sorted(ex.gpu, key=lambda g: (g.start_ns, g.stream)):
        events.append(_gpu_event(g, clock))
        if g.launch is not None:
            ts = _us(BASE_NS + clock(g.start_ns))
            events.append(_flow("f", g.corr, 0, g.stream, ts, "ac2g"))
    events += _gpu_annotations(ex, clock)
    events += _fwdbwd_flows(ex, pid)
    first = min([s.start_ns for s in ex.cpu] + [clock(g.start_ns) for g in ex.gpu] + [0])
    last = max([s.end_ns for s in ex.cpu] + [clock(g.end_ns) for g in ex.gpu])
    events += _metadata(ex, _us(BASE_NS + first))
    events += [
        {
            "ph": "X",
            "cat": "Trace",
            "ts": _us(BASE_NS + first),
            "dur": _us(last - first),
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "name": "PyTorch Profiler (0)",
            "args": {"Op count": 0},
        },
        {
            "name": "process_sort_index",
            "ph": "M",
            "ts": _us(BASE_NS + first),
            "pid": "Spans",
            "tid": 0,
            "args": {"sort_index": 536870912},
        },
        {
            "name": "Iteration Start: PyTorch Profiler",
            "ph": "i",
            "s": "g",
            "pid": "Traces",
            "tid": "Trace PyTorch Profiler",
            "ts": _us(BASE_NS + first),
        },
        {
            "name": "Record Window End",
            "ph": "i",
            "s": "g",
            "pid": "",
            "tid": "",
            "ts": _us(BASE_NS + last),
        },
    ]
    ranks = list(range(WORLD))
    return {
        "schemaVersion": 1,
        "deviceProperties": [dict(DEVICE)],
        "distributedInfo": {
            "backend": "nccl",
            "rank": 0,
            "world_size": WORLD,
            "pg_count": 1,
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": WORLD,
                    "ranks": ranks,
                }
            ],
            "nccl_version": "2.21.5",
        },
        "record_shapes": 1,
        "traceEvents": events,
        "traceName": f"refmodel/{prog.name}.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_TIME_NANOSECONDS,
    }


def write_trace(doc: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``doc`` as JSON to ``path`` (gzipped, with a fixed header, when it ends in ``.gz``),
    atomically; returns the path."""
    path = Path(path)
    data = json.dumps(doc).encode()
    if path.suffix == ".gz":
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
            gz.write(data)
        data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a trace is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
