"""Quantile sketches: the fitted distributions of durations and delays in a synthetic model.

A sketch of a sample is its quantiles at the probabilities of :data:`GRID` (every 2 %, finer in
the upper tail; minimum and maximum included), plus the sample's count.
Drawing from it inverts the piecewise-linear CDF through those points, so a draw never leaves
the observed range, zero-heavy and bimodal samples keep their shape, and negative values (a
kernel that starts before its launch call returns) are fine. Piecewise-linear interpolation
shifts the mean a little in the tails, so :func:`fit_sketches` rescales each nonnegative
sketch to the sample's exact mean: a sum of many draws (a step) then matches the source's sum
in expectation.

Why quantiles and not a parametric family: durations of one kind of op are rarely lognormal
(cache-warm and cold calls, launch-queue stalls, two code paths under one name); a fixed grid
of order statistics is small (:data:`POINTS` integers), mergeable across files
(:func:`merge_sketches`, weighted by count) and reproduces whatever shape the trace had.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["BINS", "POINTS", "draw", "fit_sketches", "merge_sketches", "rank_bins"]

#: Probabilities a sketch keeps the quantiles at: every 2 %, then finer in the upper tail,
#: where a few long calls (a blocked launch, a data-loader stall) hold much of the time.
GRID = np.array([*np.linspace(0.0, 0.96, 49), 0.98, 0.99, 0.995, 0.998, 0.999, 1.0])
POINTS = len(GRID)
#: Quantile bins a value's place in its distribution is kept at (see :func:`bin_of`).
BINS = 32


def fit_sketches(
    keys: NDArray[np.int64], values: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Sketch ``values`` grouped by ``keys``: ``(unique keys, points[k, POINTS], counts[k])``.

    Points are integer nanoseconds; a group's points are rescaled so their piecewise-linear
    mean equals the group's mean (when both are positive)."""
    if len(keys) == 0:
        return (np.zeros(0, np.int64), np.zeros((0, POINTS), np.int64), np.zeros(0, np.int64))
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order].astype(np.float64)
    uniq, start, counts = np.unique(k, return_index=True, return_counts=True)
    # position of each grid probability inside each group (linear interpolation, numpy's default)
    pos = start[:, None] + GRID[None, :] * (counts[:, None] - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, (start + counts - 1)[:, None])
    frac = pos - lo
    pts = v[lo] * (1 - frac) + v[hi] * frac
    sums = np.add.reduceat(v, start)
    return uniq, _to_mean(pts, sums / counts), counts.astype(np.int64)


def _mean(pts: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean of each row's piecewise-linear inverse CDF through ``(GRID, row)``."""
    return ((pts[:, :-1] + pts[:, 1:]) / 2 * np.diff(GRID)[None, :]).sum(axis=1)


def _to_mean(pts: NDArray[np.float64], mean: NDArray[np.float64]) -> NDArray[np.int64]:
    """Rescale nonnegative rows to their target mean (trapezoid mean of the inverse CDF)."""
    lin = _mean(pts)
    ok = (pts.min(axis=1) >= 0) & (lin > 0) & (mean > 0)
    scale = np.ones(len(pts))
    scale[ok] = mean[ok] / lin[ok]
    return np.rint(pts * scale[:, None]).astype(np.int64)


def merge_sketches(points: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """One sketch from several of the same quantity (rows of ``points``), weighted by
    ``counts``: the weighted quantiles of their points, rescaled to the pooled mean."""
    w = np.repeat(counts.astype(np.float64) / POINTS, POINTS)
    v = points.reshape(-1).astype(np.float64)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cdf = (np.cumsum(w) - w / 2) / w.sum()
    pts = np.interp(GRID, cdf, v)
    lin = _mean(points.astype(np.float64))
    mean = float((lin * counts).sum() / counts.sum())
    return _to_mean(pts[None, :], np.array([mean]))[0]


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
    points: NDArray[np.int64],
    which: NDArray[np.int64],
    rng: np.random.Generator,
    bins: NDArray[np.int8] | None = None,
    counts: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """One draw per entry of ``which`` (row indices into ``points``), vectorised; with
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
    frac = (u - GRID[i]) / (GRID[i + 1] - GRID[i])
    a = points[which, i].astype(np.float64)
    b = points[which, i + 1].astype(np.float64)
    return np.rint(a + (b - a) * frac).astype(np.int64)
