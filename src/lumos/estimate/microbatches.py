"""A pipeline stage's micro-batch blocks on a thread, from its point-to-point messages.

A stage sends or receives once per micro-batch, so a run of two or more identical messages marks
the blocks (:func:`microbatch_blocks`); a middle stage receives, then sends, per micro-batch
(:func:`_pair_run`). Forward and backward blocks of a middle stage look alike and are told
apart by what they hold (:func:`by_phase`). Used by :mod:`lumos.estimate.layers`.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import ExecGraph

__all__ = ["by_phase", "microbatch_blocks", "phase_of"]

_P2P = re.compile(r"(^|[:_])(send|recv|isend|irecv)\b|SendRecv")


def microbatch_blocks(
    g: ExecGraph, tasks: NDArray[np.int64], seq: NDArray[np.int64]
) -> list[tuple[list[int], list[int]]]:
    """``(starts, ends)`` of the micro-batch blocks of one step (positions in ``tasks``).

    A pipeline stage sends or receives once per micro-batch, so a run of two or more identical
    point-to-point ops (same name and shapes, nothing else of that kind between them) marks
    the blocks: a block starts at a receive and runs to the next one, or ends with a send,
    beginning after the previous one; the open end of the first (last) block is as long as
    its neighbour.
    """
    p2p = np.fromiter((bool(_P2P.search(s)) for s in g.names), bool, len(g.names))
    pos = np.flatnonzero(p2p[g.tasks.name_idx[tasks]])
    out: list[tuple[list[int], list[int]]] = []
    i = 0
    while i < len(pos):
        j = i
        while j + 1 < len(pos) and seq[pos[j + 1]] == seq[pos[i]]:
            j += 1
        run = pos[i : j + 1].tolist()
        if len(run) < 2:
            pairs = _pair_run(g, tasks, seq, pos, i)
            if pairs:
                out.append(pairs)
                i += 2 * len(pairs[0])
                continue
        i = j + 1
        if len(run) < 2:
            continue
        if "recv" in g.task_name(int(tasks[run[0]])):
            starts = run
            ends = [*run[1:], min(len(tasks), run[-1] + run[-1] - run[-2])]
        else:
            ends = [r + 1 for r in run]
            starts = [max(0, run[0] + 1 - (run[1] - run[0])), *ends[:-1]]
        out.append((starts, ends))
    # open ends stop where the neighbouring run's blocks begin or end, but a block keeps at
    # least its own message (the next run's open first block yields to it)
    for k in range(len(out)):
        starts, ends = out[k]
        if k + 1 < len(out):
            ends[-1] = max(min(ends[-1], out[k + 1][0][0]), starts[-1] + 1)
        if k > 0:
            starts[0] = max(starts[0], out[k - 1][1][-1])
    return out


def _pair_run(
    g: ExecGraph, tasks: NDArray[np.int64], seq: NDArray[np.int64], pos: NDArray[np.int64], i: int
) -> tuple[list[int], list[int]] | None:
    """Blocks of a middle pipeline stage, which receives and then sends once per micro-batch:
    two or more repeats of one (receive, send) pair from ``pos[i]`` on, each block from its
    receive to its send (inclusive)."""
    if i + 3 >= len(pos) or "recv" not in g.task_name(int(tasks[pos[i]])):
        return None
    if "send" not in g.task_name(int(tasks[pos[i + 1]])):
        return None
    first = (seq[pos[i]], seq[pos[i + 1]])
    k = i
    while k + 1 < len(pos) and (seq[pos[k]], seq[pos[k + 1]]) == first:
        k += 2
    if k - i < 4:
        return None
    starts = pos[i:k:2].tolist()
    return starts, [int(e) + 1 for e in pos[i + 1 : k : 2].tolist()]


def by_phase(
    blocks: tuple[NDArray[np.int64], ...], marks: tuple[NDArray[np.bool_], ...]
) -> list[tuple[int, int, str]]:
    """``(first, end, phase)`` of the runs of blocks of one phase (a middle stage's forward
    and backward messages look alike)."""
    phases = [phase_of(b, marks) for b in blocks]
    out: list[tuple[int, int, str]] = []
    for b, ph in enumerate(phases):
        if out and out[-1][2] == ph:
            out[-1] = (out[-1][0], b + 1, ph)
        else:
            out.append((b, b + 1, ph))
    return out


def phase_of(block: NDArray[np.int64], marks: tuple[NDArray[np.bool_], ...]) -> str:
    """``backward`` / ``optimizer`` when most of the block is, else ``forward``."""
    back, opt = marks
    if len(block) and back[block].mean() > 0.5:
        return "backward"
    if len(block) and opt[block].mean() > 0.5:
        return "optimizer"
    return "forward"
