"""``run_bench``: a source's ranks executed on this machine, their traces, and ``bench.json``.

The order of work (the ranks themselves run in :mod:`lumos.bench.worker`):

1. resolve the source (:mod:`lumos.bench.source`) and read its timing: the recorded steps and
   their time per op class (:func:`lumos.bench.compare.step_classes`) from each rank's Kineto
   trace, or, for Chakra ETs, the steps of their replay;
2. run every rank in its own process, writing into a temporary folder inside ``DIR``;
3. read the executed traces back (they are Kineto traces lumos reads) and compare;
4. move ``rank<r>/`` and ``bench.json`` into ``DIR`` as one set (``bench.json`` last).

The device defaults to CUDA when torch sees a GPU, else the CPU. The executed run records an
Execution Trace too when the source's timing was recorded with one (``lumos collect --et``):
the observer's cost per op is then in both sides of the comparison (``et`` overrides); likewise
it records allocations and frees when the source did (``lumos collect``'s default; ``memory``
overrides).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs
from lumos.bench.compare import step_classes
from lumos.bench.report import BENCH_FILE, bench_document, write_document
from lumos.bench.source import BenchSource, resolve_source
from lumos.bench.worker import RankJob, RankResult
from lumos.collect._torch import import_torch
from lumos.errors import ConfigError

__all__ = ["BenchOptions", "default_device", "rank_threads", "run_bench", "source_timing"]


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """How to run: ``device`` (None: CUDA when available, else CPU), unprofiled ``warmup``
    passes before the measured one, ``et`` (None: as the source's timing was recorded),
    ``memory`` (record allocations and frees; None: as the source's timing was recorded),
    ``threads`` (torch intra-op threads per rank; None: see :func:`rank_threads`), ``comms_only``,
    ``emulate`` (hold a Chakra op with no recorded work for its recorded time; else skip it)."""

    device: str | None = None
    warmup: int = 1
    et: bool | None = None
    memory: bool | None = None
    threads: int | None = None
    comms_only: bool = False
    emulate: bool = True

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ConfigError(f"--warmup must be 0 or more, got {self.warmup}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"--threads must be 1 or more, got {self.threads}")


def default_device(torch: Any) -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _device(requested: str | None, torch: Any) -> str:
    dev = requested or default_device(torch)
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {dev}: this PyTorch sees no CUDA device")
    if dev not in ("cpu", "cuda") and not dev.startswith("cuda:"):
        raise ConfigError(f"--device {dev}: expected cpu or cuda")
    return dev


def source_timing(src: BenchSource) -> dict[int, dict[str, dict[str, Any]]]:
    """Rank -> step name -> ``{dur_ns, classes}`` of the source (empty without timing)."""
    if src.kind == "chakra":
        return _replayed(src)
    from lumos.ingest.kineto import trace_from_bytes

    out: dict[int, dict[str, dict[str, Any]]] = {}
    for r in src.ranks:
        if r.kineto is not None:
            out[r.rank] = step_classes(trace_from_bytes(r.kineto.payload(), r.kineto.where))
    return out


def _replayed(src: BenchSource) -> dict[int, dict[str, dict[str, Any]]]:
    """Chakra ETs: each step as lumos replays it (no class times: a replay has no kernels)."""
    from lumos.chakra.io import read_chakra
    from lumos.chakra.mapping import from_chakra
    from lumos.chakra.trace import ChakraTrace
    from lumos.graph.model import Workload
    from lumos.sim import simulate

    traces = [read_chakra(r.path) for r in src.ranks]
    world = max([len(traces), *(r.rank + 1 for r in src.ranks)])
    graphs = tuple(from_chakra(t, world_size=world) for t in traces if isinstance(t, ChakraTrace))
    result = simulate(Workload(graphs))
    return {r.rank: {s["name"]: {"dur_ns": int(s["predicted_ns"]), "classes": None}
                     for s in result.steps(gi)}
            for gi, r in enumerate(src.ranks)}  # fmt: skip


def rank_threads(option: int | None, recorded: int | None, world: int) -> tuple[int | None, str]:
    """The torch intra-op threads a rank runs with, and where the number comes from:
    ``option`` (``--threads``) when given; else what the source's rank ``recorded``; else, for
    a run of several ranks on this machine, 1 (``not recorded: one per rank``, as ``torchrun``
    starts several ranks per node: each rank with every core would oversubscribe them and time
    its ops unlike the source); else torch's default (None: ``OMP_NUM_THREADS`` or the cores).

    >>> rank_threads(4, 1, 2), rank_threads(None, 1, 2), rank_threads(None, None, 2)
    ((4, 'option'), (1, 'recorded'), (1, 'not recorded: one per rank'))
    >>> rank_threads(None, None, 1)
    (None, 'not recorded: torch default')
    """
    if option is not None:
        return option, "option"
    if recorded is not None:
        return recorded, "recorded"
    if world > 1:
        return 1, "not recorded: one per rank"
    return None, "not recorded: torch default"


def _jobs(src: BenchSource, tmp: Path, device: str, opts: BenchOptions, et: bool, memory: bool,
          timing: dict[int, dict[str, dict[str, Any]]]) -> list[RankJob]:  # fmt: skip
    from lumos.collect.launch import free_port

    port = free_port()
    ranks = src.rank_ids
    threads = [rank_threads(opts.threads, r.threads, len(ranks)) for r in src.ranks]
    return [RankJob(
        rank=r.rank, index=i, run_ranks=ranks, kind=src.kind, source=r.path, member=r.member,
        out_dir=str(tmp / f"rank{r.rank}"), device=device, port=port, warmup=opts.warmup,
        et=et, memory=memory, threads=threads[i][0], threads_from=threads[i][1],
        comms_only=opts.comms_only, emulate=opts.emulate,
        source_ns={n: s["dur_ns"] for n, s in timing.get(r.rank, {}).items()},
    ) for i, r in enumerate(src.ranks)]  # fmt: skip


def run_bench(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    options: BenchOptions | None = None,
    *,
    progress: Callable[[int, bool], None] | None = None,
    on_plan: Callable[[BenchSource], None] | None = None,
) -> dict[str, Any]:
    """Execute ``paths`` (see the module docstring); returns the ``bench.json`` document.
    ``on_plan(source)`` is called once the source is resolved, ``progress(n, total)`` as
    the ranks learn their items (``total``) and run them."""
    opts = options or BenchOptions()
    torch = import_torch("lumos bench")
    device = _device(opts.device, torch)
    src = resolve_source(paths)
    if on_plan is not None:
        on_plan(src)
    timing = source_timing(src)
    et = src.execution_trace if opts.et is None else opts.et
    memory = src.memory if opts.memory is None else opts.memory
    from lumos.bench.launch import run_ranks

    out = Path(out_dir)
    with atomic_outputs(out, BENCH_FILE) as tmp:
        results: list[RankResult] = run_ranks(_jobs(src, tmp, device, opts, et, memory, timing),
                                              progress)  # fmt: skip
        doc = bench_document(src, results, timing, tmp, device=device, options=opts, et=et,
                             memory=memory, torch_version=str(torch.__version__))  # fmt: skip
        write_document(doc, tmp / BENCH_FILE)
    return doc
