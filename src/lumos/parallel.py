"""Run per-rank work in parallel: local processes by default, a Dask cluster when given one.

``map_ranks(fn, items)`` keeps results in input order, shows progress through an optional
callback, and runs in-process when there is a single item or ``workers == 1`` (no pickling,
easy debugging). ``dask_address`` sends the work to a running ``dask.distributed`` scheduler
(the ``dask`` extra). Worker exceptions propagate unchanged, so a ``LumosError`` in a worker
is still one clear line on the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from lumos.errors import ConfigError, LumosError, MissingDependencyError

__all__ = ["DASK_CONNECT_TIMEOUT_S", "check_dask", "default_workers", "map_ranks"]

#: How long to try reaching a Dask scheduler before giving up with one line.
DASK_CONNECT_TIMEOUT_S = 10.0

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """Worker processes used by default: the CPUs this process may use, at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def map_ranks(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, in parallel; ``on_done(i)`` is called as item ``i`` ends."""
    if dask_address:
        return _map_dask(fn, items, dask_address, on_done)
    n = default_workers() if workers is None else max(1, workers)
    if n == 1 or len(items) <= 1:
        out = []
        for i, x in enumerate(items):
            out.append(fn(x))
            if on_done:
                on_done(i)
        return out
    results: list[Any] = [None] * len(items)
    with ProcessPoolExecutor(max_workers=min(n, len(items))) as pool:
        futures = {pool.submit(fn, x): i for i, x in enumerate(items)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except BrokenProcessPool:
                raise LumosError(
                    f"a worker process died while processing {items[i]} (out of memory?); "
                    "rerun with --workers 1 to see the error"
                ) from None
            if on_done:
                on_done(i)
    return results


def _client(address: str) -> Any:
    """A connected ``dask.distributed.Client``; ConfigError (one line) when the scheduler cannot
    be reached within :data:`DASK_CONNECT_TIMEOUT_S`."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise MissingDependencyError("dask", "dask", "running on a Dask cluster") from None
    try:
        return Client(address, timeout=f"{DASK_CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"--dask {address}: cannot reach the Dask scheduler ({reason})") from None


def check_dask(address: str) -> None:
    """Raise ConfigError unless a Dask scheduler answers at ``address`` (checked before the
    work starts, so a wrong address costs seconds, not the work)."""
    _client(address).close()


def _map_dask(
    fn: Callable[[T], R], items: Sequence[T], address: str, on_done: Callable[[int], None] | None
) -> list[R]:
    client = _client(address)  # first: it says so when dask is missing
    from dask.distributed import as_completed

    with client:
        futures = client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            if on_done:
                on_done(index[fut.key])
        return list(client.gather(futures))
