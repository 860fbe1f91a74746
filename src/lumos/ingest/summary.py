"""``summarize_kineto``: the facts ``lumos info`` prints about a Kineto trace, as plain data."""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.ingest.comm_names import is_comm_kernel, kernel_collective
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["summarize_kineto"]

_GPU_WORK = (int(Category.KERNEL), int(Category.MEMCPY), int(Category.MEMSET))


def summarize_kineto(trace: KinetoTrace) -> dict[str, Any]:
    """A JSON-ready summary: rank/world, device, steps, streams, collectives and flags.

    Keys: ``path``, ``kind``, ``rank``, ``world_size``, ``backend``, ``device``,
    ``num_events`` (every entry of ``traceEvents``), ``num_duration_events``,
    ``categories`` (raw ``cat`` counts), ``steps`` [{name, dur_ns, gpu_dur_ns}],
    ``streams`` [{device, stream, num_kernels, num_memcpy, num_memset, busy_ns}],
    ``threads`` [{pid, tid, label, num_events}], ``collectives`` {kind: count},
    ``collective_bytes`` {kind: total ``size_bytes``} (over the calls whose size is known;
    ``collective_size_unknown`` {kind: calls without one}), ``comm_kernels`` {kind: count} and
    ``comm_kernel_ns`` {kind: total kernel time}: the kernels ``is_comm_kernel`` names (the
    same test that makes a graph task COMM: NCCL/RCCL, DeepEP, NVSHMEM, custom all-reduces),
    by the kind their name gives (``kernel_collective``),
    ``process_groups`` [{name, desc, ranks}], ``flags`` [str], ``diagnostics`` {code: count}.
    """
    ev = trace.events
    procs = trace.processors
    streams: list[dict[str, Any]] = []
    threads: list[dict[str, Any]] = []
    for p, (lo, hi) in enumerate(trace.processor_slices()):
        cats = ev.cat[lo:hi]
        if procs.kind[p] == 1:
            work = np.isin(cats, _GPU_WORK)
            if not work.any() and not (cats == int(Category.GPU_USER_ANNOTATION)).any():
                continue
            streams.append(
                {
                    "device": int(procs.device[p]),
                    "stream": int(procs.tid[p]),
                    "num_kernels": int((cats == int(Category.KERNEL)).sum()),
                    "num_memcpy": int((cats == int(Category.MEMCPY)).sum()),
                    "num_memset": int((cats == int(Category.MEMSET)).sum()),
                    "busy_ns": int(ev.dur_ns[lo:hi][work].sum()),
                }
            )
        else:
            threads.append(
                {
                    "pid": int(procs.pid[p]),
                    "tid": int(procs.tid[p]),
                    "label": procs.label[p],
                    "num_events": hi - lo,
                }
            )
    comm_kernels: dict[str, int] = {}
    comm_kernel_ns: dict[str, int] = {}
    kind_of_name = {n: kernel_collective(n) for n in trace.names if is_comm_kernel(n)}
    for i in np.flatnonzero(ev.cat == int(Category.KERNEL)).tolist():
        k = kind_of_name.get(trace.names[int(ev.name_idx[i])])
        if k is not None:
            comm_kernels[k] = comm_kernels.get(k, 0) + 1
            comm_kernel_ns[k] = comm_kernel_ns.get(k, 0) + int(ev.dur_ns[i])
    coll = trace.collectives
    coll_bytes: dict[str, int] = {}
    unknown: dict[str, int] = {}
    for k, b in zip(coll.kind, coll.size_bytes.tolist(), strict=True):
        coll_bytes[k] = coll_bytes.get(k, 0) + max(b, 0)
        if b < 0:
            unknown[k] = unknown.get(k, 0) + 1
    flags: list[str] = []
    if not (ev.cat == int(Category.CUDA_SYNC)).any() and streams:
        flags.append("no cuda_sync events: inter-stream dependencies inferred from runtime calls")
    if not len(trace.steps):
        flags.append("no ProfilerStep spans: iterations cannot be measured")
    big = trace.diagnostics.get("step_number_out_of_range", 0)
    if big:
        flags.append(f"{big} ProfilerStep number(s) beyond 64 bits: kept as steps, numbers unknown")
    if trace.meta.rank < 0:
        flags.append("no distributedInfo: rank and world size unknown")
    if not streams and not len(coll):
        flags.append("CPU-only trace")
    return {
        "path": trace.path,
        "kind": "kineto",
        "rank": trace.meta.rank,
        "world_size": trace.meta.world_size,
        "backend": trace.meta.backend,
        "device": trace.meta.device_name,
        "num_events": trace.num_raw_events,
        "num_duration_events": len(ev),
        "categories": trace.category_counts,
        "steps": [
            {"name": n, "dur_ns": int(d), "gpu_dur_ns": int(g)}
            for n, d, g in zip(
                trace.steps.name,
                trace.steps.dur_ns.tolist(),
                trace.steps.gpu_dur_ns.tolist(),
                strict=True,
            )
        ],
        "streams": streams,
        "threads": threads,
        "collectives": coll.counts_by_kind(),
        "collective_bytes": dict(sorted(coll_bytes.items())),
        "collective_size_unknown": dict(sorted(unknown.items())),
        "comm_kernels": dict(sorted(comm_kernels.items())),
        "comm_kernel_ns": dict(sorted(comm_kernel_ns.items())),
        "process_groups": [
            {"name": g.name, "desc": g.desc, "ranks": list(g.ranks)}
            for g in trace.meta.process_groups
        ],
        "flags": flags,
        "diagnostics": dict(sorted(trace.diagnostics.items())),
    }
