"""The ranks of a bench run as processes: spawned, watched, and all gone when the run ends.

:func:`run_ranks` starts one process per :class:`~lumos.bench.worker.RankJob` (the ``spawn``
start method: a fresh interpreter, no state inherited from the caller), relays their progress,
and returns their results in job order. A process that fails ends the run: its error is raised
here (a :class:`~lumos.errors.LumosError` as itself, anything else as one naming the rank and
the exception), and the other processes, which may be waiting for it in a collective, are
terminated. Whatever happens (an error, Ctrl-C, SIGTERM), no process outlives the call.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from lumos.bench.worker import RankJob, RankResult, run_rank
from lumos.errors import LumosError

__all__ = ["run_ranks"]

#: Seconds between checks that every process is still alive.
_POLL_S = 0.5


def _entry(job: RankJob, q: Any) -> None:
    try:
        result = run_rank(job, lambda n, total=False: q.put(("progress", job.index, (n, total))))
        q.put(("done", job.index, result))
    except LumosError as exc:
        q.put(("error", job.index, exc))
    except BaseException as exc:  # reported to the parent, which raises it as a LumosError
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        q.put(("crash", job.index, (text, traceback.format_exc())))


def run_ranks(
    jobs: Sequence[RankJob], progress: Callable[[int, bool], None] | None = None
) -> list[RankResult]:
    """Run every job in its own process (see the module docstring); results in job order.
    ``progress(n, total)`` relays the ranks' progress: ``n`` more items known (``total``) or
    done."""
    ctx = mp.get_context("spawn")
    q: Any = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(job, q), name=f"lumos-bench-rank{job.rank}")
             for job in jobs]  # fmt: skip
    results: dict[int, RankResult] = {}
    try:
        for p in procs:
            p.start()
        while len(results) < len(jobs):
            what, index, payload = _next_message(q, procs, jobs, results)
            _handle(what, index, payload, jobs, results, progress)
        for p in procs:
            p.join()
    finally:
        _stop(procs)
        q.close()
        q.join_thread()
    return [results[i] for i in range(len(jobs))]


def _next_message(
    q: Any, procs: Sequence[Any], jobs: Sequence[RankJob], results: dict[int, RankResult]
) -> tuple[str, int, Any]:
    """The next message of a rank; raises when a rank died without one."""
    while True:
        try:
            msg: tuple[str, int, Any] = q.get(timeout=_POLL_S)
            return msg
        except queue_mod.Empty:
            pass
        dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in results]
        if dead:
            try:  # its last words may still be on their way
                late: tuple[str, int, Any] = q.get(timeout=1.0)
                return late
            except queue_mod.Empty:
                code = procs[dead[0]].exitcode
            raise LumosError(f"rank {jobs[dead[0]].rank} exited with status {code} "
                             "before finishing")  # fmt: skip


def _handle(
    what: str,
    index: int,
    payload: Any,
    jobs: Sequence[RankJob],
    results: dict[int, RankResult],
    progress: Callable[[int, bool], None] | None,
) -> None:
    if what == "progress":
        if progress is not None:
            progress(int(payload[0]), bool(payload[1]))
    elif what == "done":
        results[index] = payload
    elif what == "error":
        raise payload
    else:
        text, _tb = payload
        raise LumosError(f"rank {jobs[index].rank} failed: {text}")


def _stop(procs: Sequence[Any]) -> None:
    """Terminate, then kill, every process still running; reap them all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        if p.pid is None:
            continue
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
