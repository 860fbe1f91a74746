"""One rank of ``lumos bench`` in its own process: plan, join the group, run, write its traces.

:func:`run_rank` is what each spawned process runs (:mod:`lumos.bench.launch`); it takes a
picklable :class:`RankJob` and returns a picklable :class:`RankResult`. In order:

1. join the run's process group (gloo on CPU; on CUDA, NCCL for device tensors and gloo for
   host ones; a world of one is a group too, so
   a one-rank trace's collectives run) and read this rank's source into a plan;
2. agree with the other processes on the process groups to create (the union of every
   rank's, sorted) and create them;
3. run the plan ``warmup`` times unprofiled, then under ``torch.profiler`` (CPU and, on CUDA,
   GPU activities, shapes recorded; allocations and frees when ``memory`` is set; an Execution
   Trace observer too when ``et`` is set) with the schedule ``lumos collect`` uses: its first
   step once more in the profiler's warm-up (span :data:`WARMUP_SPAN`, discarded as the
   source's warm-up step was), then every step once, recorded, each a ``ProfilerStep#N`` span
   named as in the source;
4. write ``rank<r>.kineto.json.gz`` (and ``rank<r>.et.json``) into the job's folder.

Importing this module does not import torch; :func:`run_rank` does.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos.bench.plan import RankPlan, Skips
from lumos.collect.manifest import et_name, kineto_name

__all__ = ["WARMUP_SPAN", "RankJob", "RankResult", "read_plan", "run_rank"]

#: Name of the step run in the profiler's warm-up, before the recorded ones (not in the trace).
WARMUP_SPAN = "lumos bench: profiler warm-up"


@dataclass(frozen=True, kw_only=True)
class RankJob:
    """One process of the run. ``rank`` is the recorded rank, ``index`` its place among
    ``run_ranks`` (the process rank); ``source`` a path (``member`` inside a tar archive),
    ``kind`` ``pytorch_et`` or ``chakra``; ``out_dir`` the folder its traces go to."""

    rank: int
    index: int
    run_ranks: tuple[int, ...]
    kind: str
    source: str
    member: str | None
    out_dir: str
    device: str
    port: int
    warmup: int = 1
    et: bool = False
    memory: bool = False
    threads: int | None = None
    threads_from: str = "option"
    comms_only: bool = False
    emulate: bool = True
    source_ns: dict[str, int] = field(default_factory=dict)
    timeout_s: float = 600.0


@dataclass(kw_only=True)
class RankResult:
    """What one process did (see ``bench.json`` in :mod:`lumos.bench.report`)."""

    rank: int
    device: str
    ops_total: int
    ops_executed: int
    ops_emulated: int
    comms_total: int
    comms_executed: int
    skipped: Skips
    comm_skipped: Skips
    substituted: dict[str, str]
    replaced_outputs: int
    steps: list[str]
    source_ns: list[int | None]
    wall_ns: list[list[int]]
    kineto: str
    et: str | None
    notes: list[str]
    comm_samples: list[dict[str, Any]] = field(default_factory=list)
    #: torch intra-op threads the rank ran with, and where the number came from
    threads: int = 0
    threads_from: str = ""


def read_plan(job: RankJob) -> RankPlan:
    """The plan of the job's source (a PyTorch ET or a Chakra ET)."""
    if job.kind == "chakra":
        from lumos.bench.chakra_plan import plan_chakra_file

        return plan_chakra_file(job.source, rank=job.rank, run_ranks=job.run_ranks,
                                source_ns=job.source_ns)  # fmt: skip
    from lumos.bench.et_plan import plan_et
    from lumos.ingest.pytorch_et import read_pytorch_et

    trace = read_pytorch_et(job.source, job.member)
    return plan_et(trace, rank=job.rank, run_ranks=job.run_ranks, source_ns=job.source_ns)


def cuda_index(device: str, rank_index: int, gpus: int) -> int:
    """The GPU a rank runs on: the one ``device`` names (``cuda:1``), else (``cuda``) the
    machine's ``gpus`` taken in turn by rank.

    >>> cuda_index("cuda:1", 0, 8), cuda_index("cuda", 3, 2), cuda_index("cuda", 0, 1)
    (1, 1, 0)
    """
    _, _, index = device.partition(":")
    return int(index) if index else rank_index % max(gpus, 1)


def _init_group(job: RankJob, torch: Any) -> Any:
    import datetime

    import torch.distributed as dist

    # on a GPU, host tensors' collectives (a GPU job's gloo groups, objects) go through gloo
    backend = "cpu:gloo,cuda:nccl" if job.device.startswith("cuda") else "gloo"
    if job.device.startswith("cuda"):
        torch.cuda.set_device(cuda_index(job.device, job.index, torch.cuda.device_count()))
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{job.port}", rank=job.index,
        world_size=len(job.run_ranks), timeout=datetime.timedelta(seconds=job.timeout_s),
    )  # fmt: skip
    return dist


def _agree_groups(dist: Any, plan: RankPlan) -> list[tuple[int, ...]]:
    got: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(got, list(plan.groups))
    return sorted({tuple(g) for part in got for g in part})


def _profile(torch: Any, job: RankJob, et_path: Path | None, *, warm_up: bool = True) -> Any:
    """The run's profiler; with ``warm_up`` the first step it sees is its warm-up (discarded,
    ``prof.step()`` ends it), else it records from the start."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    experimental = None
    if job.device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
        experimental = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    observer = None
    if et_path is not None:
        from torch.profiler import ExecutionTraceObserver

        observer = ExecutionTraceObserver().register_callback(str(et_path))
    from torch.profiler import schedule

    plan = schedule(wait=0, warmup=1, active=1, repeat=1) if warm_up else None
    prof = profile(activities=activities, record_shapes=True, profile_memory=job.memory,
                   schedule=plan, experimental_config=experimental,
                   execution_trace_observer=observer)  # fmt: skip
    # the steps are our own spans, named as in the source: none of the schedule's
    prof.record_steps = False
    return prof


def _gzip(src: Path, dst: Path) -> None:
    with (
        open(src, "rb") as f,
        open(dst, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz,
    ):
        shutil.copyfileobj(f, gz, 1 << 20)
    src.unlink()


def run_rank(job: RankJob, progress: Any = None) -> RankResult:
    """Run one rank (see the module docstring); ``progress(n, total)`` hears of the items to
    run (``total`` true) and of those done."""
    from lumos.collect._torch import import_torch

    torch = import_torch("lumos bench")
    if job.threads:
        torch.set_num_threads(job.threads)
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dist = _init_group(job, torch)
    try:
        plan = read_plan(job)
        from lumos.bench.comms import CommRunner

        comm = CommRunner(dist, job.run_ranks, job.index)
        comm.make_groups(_agree_groups(dist, plan))
        if job.comms_only:
            from lumos.bench.commbench import run_comms

            result = run_comms(job, plan, torch, comm, out, progress)
        else:
            result = _run_plan(job, plan, torch, dist, comm, out, progress)
        result.threads, result.threads_from = int(torch.get_num_threads()), job.threads_from
        return result
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _run_plan(
    job: RankJob, plan: RankPlan, torch: Any, dist: Any, comm: Any, out: Path, progress: Any
) -> RankResult:
    from lumos.bench.execute import Executor

    report = progress or (lambda _n, _total=False: None)
    ex = Executor(plan, torch, job.device, comm, report, emulate=job.emulate)
    ex.prefill()
    first = len(plan.steps[0].items) if plan.steps else 0
    report(len(ex.items) * (job.warmup + 1) + first, True)
    walls = []
    with torch.no_grad():
        for _ in range(job.warmup):
            walls.append(ex.run_pass())
        dist.barrier()
        et_path = out / et_name(job.rank) if job.et else None
        raw = out / f".{kineto_name(job.rank)}.json"
        prof = _profile(torch, job, et_path)
        with prof:
            # the profiler's start-up lands in a warm-up step it discards, as the source's
            # schedule discarded its own
            ex.run_pass(torch.profiler.record_function, steps=[0][: len(plan.steps)],
                        label=WARMUP_SPAN)  # fmt: skip
            prof.step()
            walls.append(ex.run_pass(torch.profiler.record_function))
        prof.export_chrome_trace(str(raw))
    _gzip(raw, out / kineto_name(job.rank))
    dist.barrier()
    ops, emulated, comms = ex.executed()
    return RankResult(
        rank=job.rank, device=job.device, ops_total=plan.ops_total, ops_executed=ops, ops_emulated=emulated,
        comms_total=plan.comms_total, comms_executed=comms, skipped=ex.skipped,
        comm_skipped=ex.comm_skipped,
        substituted=dict(sorted(ex.substituted.items())), replaced_outputs=len(ex.replace),
        steps=[s.name for s in plan.steps], source_ns=[s.source_ns for s in plan.steps],
        wall_ns=walls, kineto=kineto_name(job.rank),
        et=et_name(job.rank) if job.et and (out / et_name(job.rank)).is_file() else None,
        notes=list(plan.notes),
    )  # fmt: skip
