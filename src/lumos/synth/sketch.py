"""Quantile sketches: the fitted distributions of durations and delays in a synthetic model.

A sketch of a sample is its quantiles at the probabilities of :data:`GRID` (every 2 %, finer in
the upper tail; minimum and maximum included), the mean of the values between each two of them
(a *segment*), and the sample's count. A draw picks a probability ``u``, finds its segment
``[p_i, p_i+1]`` and returns a value inside it, distributed so that the segment's mean is the
sample's (``p_i + d t^k`` or ``p_i+1 - d (1 - t)^k`` with ``t`` uniform, ``k`` from the mean):
so a draw never leaves the observed range, zero-heavy and bimodal samples keep their shape
(a segment straddling a jump keeps its mass at the jump's two sides), negative values (a kernel
that starts before its launch call returns) are fine, and the mean of many draws is the
sample's mean, segment by segment.

Why quantiles and not a parametric family: durations of one kind of op are rarely lognormal
(cache-warm and cold calls, launch-queue stalls, two code paths under one name); a fixed grid
of order statistics and segment means is small (:data:`POINTS` + :data:`POINTS` - 1 integers)
and reproduces whatever shape the trace had.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["BINS", "GRID", "POINTS", "draw", "fit_sketches", "rank_bins"]

#: Probabilities a sketch keeps the quantiles at: every 2 %, then finer in the upper tail,
#: where a few long calls (a blocked launch, a data-loader stall) hold much of the time.
GRID = np.array([*np.linspace(0.0, 0.96, 49), 0.98, 0.99, 0.995, 0.998, 0.999, 1.0])
POINTS = len(GRID)
#: Equal-count slices a value's place in its distribution is kept at (see :func:`rank_bins`).
BINS = 32


def fit_sketches(
    keys: NDArray[np.int64], values: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Sketch ``values`` grouped by ``keys``: ``(unique keys, sketches[k, 2 POINTS - 1],
    counts[k])``; a sketch row is the :data:`POINTS` quantiles then the ``POINTS - 1`` segment
    means (integer nanoseconds), both of the sample taken as ``n`` values of probability
    ``1/n`` each."""
    if len(keys) == 0:
        return (np.zeros(0, np.int64), np.zeros((0, 2 * POINTS - 1), np.int64),
                np.zeros(0, np.int64))  # fmt: skip
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order].astype(np.float64)
    uniq, start, counts = np.unique(k, return_index=True, return_counts=True)
    # the sample as a distribution: each value holds 1/n of probability, in rank order, so
    # Q(u) = v[floor(u n)] and its integral C(u) = (sum of the first floor(u n) values
    # + the fraction of the next) / n
    n = counts[:, None].astype(np.float64)
    at = GRID[None, :] * n
    whole = np.minimum(np.floor(at).astype(np.int64), counts[:, None] - 1)
    pts = v[start[:, None] + whole]
    csum = np.concatenate([[0.0], np.cumsum(v)])
    full = np.minimum(np.floor(at).astype(np.int64), counts[:, None])
    part = at - full
    c = (csum[start[:, None] + full] - csum[start[:, None]] + part * pts) / n
    means = np.diff(c, axis=1) / np.diff(GRID)[None, :]
    lo, hi = np.minimum(pts[:, :-1], pts[:, 1:]), np.maximum(pts[:, :-1], pts[:, 1:])
    means = np.clip(means, lo, hi)
    return uniq, np.rint(np.hstack([pts, means])).astype(np.int64), counts.astype(np.int64)


def rank_bins(keys: NDArray[np.int64], values: NDArray[np.int64]) -> NDArray[np.int8]:
    """Per value, which of :data:`BINS` equal-count slices of its key's sample it falls in
    (by rank; ties are spread over the slices they span): where a task sat in its op's
    distribution, kept so that a draw can stay in the same slice (a long call just before a
    collective stays long there). Slices of a sample hold equal counts, so drawing each value
    inside its own slice of the sketch keeps the sketch's mean."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int8)
    order = np.lexsort((values, keys))
    k = keys[order]
    _, start, counts = np.unique(k, return_index=True, return_counts=True)
    group = np.repeat(np.arange(len(start)), counts)
    rank = np.arange(len(k)) - start[group]
    out = np.empty(len(keys), dtype=np.int8)
    out[order] = (rank * BINS // counts[group]).astype(np.int8)
    return out


def draw(
    sketches: NDArray[np.int64],
    which: NDArray[np.int64],
    rng: np.random.Generator,
    bins: NDArray[np.int8] | None = None,
    counts: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """One draw per entry of ``which`` (row indices into ``sketches``), vectorised; with
    ``bins`` (and each sketch's sample ``counts``), each draw stays in the part of the
    distribution its value held: its slice, or for a sample of ``n < BINS`` values the
    ``1/n`` of probability its rank spans."""
    if len(which) == 0:
        return np.zeros(0, dtype=np.int64)
    u = rng.random(len(which))
    if bins is not None:
        b = bins.astype(np.float64)
        lo, width = b / BINS, np.full(len(b), 1.0 / BINS)
        if counts is not None:
            # rank i of n < BINS values was stored as floor(i * BINS / n): i = ceil(b * n / BINS)
            n = np.maximum(counts[which], 1).astype(np.float64)
            small = n < BINS
            lo = np.where(small, np.ceil(b * n / BINS) / n, lo)
            width = np.where(small, 1.0 / n, width)
        u = np.minimum(lo + u * width, 1.0)
    i = np.clip(np.searchsorted(GRID, u, side="right") - 1, 0, POINTS - 2)
    t = np.clip((u - GRID[i]) / (GRID[i + 1] - GRID[i]), 0.0, 1.0)
    a = sketches[which, i].astype(np.float64)
    d = sketches[which, i + 1].astype(np.float64) - a
    m = sketches[which, POINTS + i].astype(np.float64)
    return np.rint(a + d * _shaped(t, a, d, m)).astype(np.int64)


def _shaped(
    t: NDArray[np.float64], a: NDArray[np.float64], d: NDArray[np.float64], m: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``f(t)`` in ``[0, 1]`` with ``E[a + d f(t)] = m`` for uniform ``t``: ``t^k`` when the
    mean sits in the lower half of ``[a, a + d]``, ``1 - (1 - t)^k`` in the upper half."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(d != 0, (m - a) / d, 0.5)  # the mean's place in the segment, 0..1
    r = np.clip(r, 1e-6, 1 - 1e-6)
    low = r <= 0.5
    k = np.where(low, 1 / r - 1, 1 / (1 - r) - 1)
    return np.where(low, t**k, 1 - (1 - t) ** k)
