"""Progress display for long CLI work: a rich bar on a terminal, nothing otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["growing_bar", "progress_bar"]


def _bar() -> Any:
    """The bar both helpers draw: description, bar, done of total, time elapsed; gone when done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress("[progress.description]{task.description}", BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), transient=True)  # fmt: skip


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield an ``advance(i)`` callback; draws a bar on stderr only when it is a TTY."""
    if not sys.stderr.isatty() or total <= 1:
        yield lambda _i: None
        return
    with _bar() as bar:
        task = bar.add_task(description, total=total)
        yield lambda _i: bar.advance(task)


@contextmanager
def growing_bar(description: str) -> Iterator[Callable[[int, bool], None]]:
    """Yield ``update(n, total)``: with ``total`` true, ``n`` more units of work became known,
    else ``n`` units were done. A bar on stderr only when it is a TTY (the total starts
    unknown: the work is learnt as it is planned)."""
    if not sys.stderr.isatty():

        def ignore(n: int, total: bool = False) -> None:
            return None

        yield ignore
        return
    with _bar() as bar:
        task = bar.add_task(description, total=None)
        known = [0]

        def update(n: int, total: bool = False) -> None:
            if total:
                known[0] += n
                bar.update(task, total=known[0])
            else:
                bar.advance(task, n)

        yield update
