"""Quantile sketches: the fitted distributions of durations and delays in a synthetic model.

A sketch of a sample is its :data:`POINTS` quantiles at evenly spaced probabilities
``0, 1/(POINTS-1), ..., 1`` (minimum and maximum included), plus the sample's count and mean.
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

__all__ = ["BINS", "POINTS", "bin_of", "draw", "fit_sketches", "merge_sketches"]

#: Quantiles per sketch (every 5 %, both ends included).
POINTS = 21
#: Quantile bins a value's place in its distribution is kept at (see :func:`bin_of`).
BINS = 8
_GRID = np.linspace(0.0, 1.0, POINTS)


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
    pos = start[:, None] + _GRID[None, :] * (counts[:, None] - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, (start + counts - 1)[:, None])
    frac = pos - lo
    pts = v[lo] * (1 - frac) + v[hi] * frac
    sums = np.add.reduceat(v, start)
    return uniq, _to_mean(pts, sums / counts), counts.astype(np.int64)


def _to_mean(pts: NDArray[np.float64], mean: NDArray[np.float64]) -> NDArray[np.int64]:
    """Rescale nonnegative rows to their target mean (trapezoid mean of the inverse CDF)."""
    lin = (pts[:, :-1] + pts[:, 1:]).sum(axis=1) / (2 * (POINTS - 1))
    ok = (pts.min(axis=1) >= 0) & (lin > 0) & (mean > 0)
    scale = np.ones(len(pts))
    scale[ok] = mean[ok] / lin[ok]
    return np.rint(pts * scale[:, None]).astype(np.int64)


def merge_sketches(
    points: NDArray[np.int64], counts: NDArray[np.int64]
) -> NDArray[np.int64]:
    """One sketch from several of the same quantity (rows of ``points``), weighted by
    ``counts``: the weighted quantiles of their points, rescaled to the pooled mean."""
    w = np.repeat(counts.astype(np.float64) / POINTS, POINTS)
    v = points.reshape(-1).astype(np.float64)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cdf = (np.cumsum(w) - w / 2) / w.sum()
    pts = np.interp(_GRID, cdf, v)
    lin = (points[:, :-1] + points[:, 1:]).sum(axis=1) / (2 * (POINTS - 1))
    mean = float((lin * counts).sum() / counts.sum())
    return _to_mean(pts[None, :], np.array([mean]))[0]


def bin_of(
    points: NDArray[np.int64], which: NDArray[np.int64], values: NDArray[np.int64]
) -> NDArray[np.int8]:
    """Which of :data:`BINS` equal-probability slices of sketch ``points[which]`` each value
    falls in: where a task sat in its op's distribution (a long call just before a collective
    stays long there), kept so that a draw can stay in the same slice."""
    if len(which) == 0:
        return np.zeros(0, dtype=np.int8)
    p = points[which].astype(np.float64)
    v = values.astype(np.float64)[:, None]
    below = (p < v).sum(axis=1)
    i = np.clip(below - 1, 0, POINTS - 2)
    a, b = p[np.arange(len(p)), i], p[np.arange(len(p)), i + 1]
    frac = np.where(b > a, (values - a) / np.where(b > a, b - a, 1), 0.5)
    u = (i + np.clip(frac, 0, 1)) / (POINTS - 1)
    u = np.where(below == 0, 0.0, u)
    return np.minimum((u * BINS).astype(np.int64), BINS - 1).astype(np.int8)


def draw(
    points: NDArray[np.int64],
    which: NDArray[np.int64],
    rng: np.random.Generator,
    bins: NDArray[np.int8] | None = None,
) -> NDArray[np.int64]:
    """One draw per entry of ``which`` (row indices into ``points``), vectorised; with
    ``bins``, each draw stays inside its slice (uniform within it)."""
    if len(which) == 0:
        return np.zeros(0, dtype=np.int64)
    u = rng.random(len(which))
    if bins is not None:
        u = (bins.astype(np.float64) + u) / BINS
    pos = u * (POINTS - 1)
    i = np.minimum(pos.astype(np.int64), POINTS - 2)
    frac = pos - i
    a = points[which, i].astype(np.float64)
    b = points[which, i + 1].astype(np.float64)
    return np.rint(a + (b - a) * frac).astype(np.int64)
