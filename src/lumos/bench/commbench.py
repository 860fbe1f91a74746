"""``--comms-only``: a trace's collectives and transfers re-issued alone, each timed.

The plan's :class:`~lumos.bench.plan.CommCall` s run in their recorded order, with their
recorded sizes and groups, on tensors of the recorded specs (made once), and nothing else
(the ranks meet in a barrier before the measured pass, none inside it: its trace holds the
recorded collectives only). Each collective is issued and waited for before the next, so its
time is its own and the ranks stay in step. Sends and receives in a row are issued
together and waited for as one batch (as ``batch_isend_irecv`` does), so that two ranks that
both send first do not wait for each other forever. One warm-up pass, then the measured pass
under the profiler, as for a full run.

Every call gives a sample (``kind``, ``size_bytes``, ``group_size``, ``dtype``, ``time_ns``,
``call``: its place in the run, the same on every rank). A collective's time differs by rank:
a rank that arrived early also waited for the others; ``bench.json`` keeps, per call, the
shortest over the ranks (the last to arrive waited least: the transfer), see
:func:`lumos.bench.report.comm_samples`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lumos.bench.plan import CommCall, RankPlan, Skips
from lumos.bench.tensors import make_tensor
from lumos.collect.manifest import et_name, kineto_name

__all__ = ["run_comms"]

_P2P = ("send", "recv")


def _group_size(call: CommCall, world: int) -> int:
    return len(call.group) if call.group is not None else world


def run_comms(job: Any, plan: RankPlan, torch: Any, comm: Any, out: Path, progress: Any) -> Any:
    """Run the collectives of ``plan`` alone (see the module docstring); a ``RankResult``."""
    import torch.distributed as dist

    from lumos.bench.worker import RankResult, _gzip, _profile

    report = progress or (lambda _n, _total=False: None)
    device = torch.device(job.device)
    host = device if plan.host_only else torch.device("cpu")
    tensors: dict[int, Any] = {}
    skipped = Skips()
    skipped.merge(plan.comm_skipped)
    steps: list[tuple[str, list[CommCall]]] = []
    for s in plan.steps:
        calls = []
        for it in s.items:
            if not isinstance(it, CommCall):
                continue
            reason = comm.check(it)
            if reason:
                skipped.add(reason, it.name)
            else:
                calls.append(it)
        steps.append((s.name, calls))
    n_calls = sum(len(c) for _, c in steps)
    report(n_calls * 2, True)

    def get(slot: int) -> Any:
        if slot not in tensors:
            tensors[slot] = make_tensor(plan.tensors[slot], device, host)
        return tensors[slot]

    def one_pass(annotate: Any = None) -> list[dict[str, Any]]:
        samples: list[dict[str, Any]] = []
        k = 0
        for name, calls in steps:
            ctx = annotate(name) if annotate is not None else None
            if ctx is not None:
                ctx.__enter__()
            try:
                i = 0
                while i < len(calls):
                    j = i + 1
                    if calls[i].kind in _P2P:
                        while j < len(calls) and calls[j].kind in _P2P:
                            j += 1
                    t0 = time.perf_counter_ns()
                    works = [w for c in calls[i:j] for w in comm.issue(
                        c, [get(s) for s in c.inputs], [get(s) for s in c.outputs])]  # fmt: skip
                    for w in works:
                        w.wait()
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    took = (time.perf_counter_ns() - t0) // (j - i)
                    for c in calls[i:j]:
                        samples.append({"call": k, "step": name, "kind": c.kind,
                                        "size_bytes": c.size_bytes, "dtype": c.dtype,
                                        "group_size": _group_size(c, len(job.run_ranks)),
                                        "time_ns": int(took), "rank": job.rank})  # fmt: skip
                        k += 1
                    report(j - i)
                    i = j
            finally:
                if ctx is not None:
                    ctx.__exit__(None, None, None)
        return samples

    with torch.no_grad():
        one_pass()
        dist.barrier()
        raw = out / f".{kineto_name(job.rank)}.json"
        et_path = out / et_name(job.rank) if job.et else None
        prof = _profile(torch, job, et_path, warm_up=False)
        with prof:
            samples = one_pass(torch.profiler.record_function)
        prof.export_chrome_trace(str(raw))
    _gzip(raw, out / kineto_name(job.rank))
    dist.barrier()
    return RankResult(
        rank=job.rank, device=job.device, ops_total=0, ops_executed=0, ops_emulated=0,
        comms_total=plan.comms_total, comms_executed=n_calls, skipped=Skips(),
        comm_skipped=skipped, substituted={}, replaced_outputs=0,
        steps=[name for name, _ in steps], source_ns=[None for _ in steps], wall_ns=[],
        kineto=kineto_name(job.rank),
        et=et_name(job.rank) if et_path is not None and et_path.is_file() else None,
        notes=[f"comms only: {plan.ops_total} compute op(s) of the source not run"],
        comm_samples=samples,
    )  # fmt: skip
