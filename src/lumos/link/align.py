"""Order-preserving alignment of two symbol sequences (interned op names), domain-free.

:func:`align` returns matched index pairs ``(ia, ib)``, strictly increasing in both, with
``a[ia] == b[ib]``. It is built to link an ET iteration to the Kineto ops of one thread:

1. common prefix and suffix are matched outright;
2. a problem small enough (``len(a) * len(b) <= MAX_LCS_CELLS``) is solved exactly: a longest
   common subsequence by compiled dynamic programming;
3. a larger one is split at symbols that occur exactly once in both (patience anchors, along
   their longest increasing run) and the gaps are aligned recursively; a large gap with no
   anchor falls back to recursive longest-common-block matching (difflib without its "autojunk"
   heuristic, which discards frequent ops such as ``aten::empty`` and is why plain difflib links
   only ~88 % of the DLRM ops).

:func:`best_window` picks, in a much longer ``b`` (many iterations), the start of the stretch that
best matches ``a``, so that one iteration is linked to one iteration.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left

import numpy as np

from lumos.link._lcs import lcs

__all__ = ["align", "best_window"]

MAX_LCS_CELLS = 4_000_000  # int32 DP table of at most 16 MB


def align(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Matched positions ``(ia, ib)`` (int64, increasing) of an order-preserving alignment.

    >>> ia, ib = align(np.array([1, 2, 3, 2]), np.array([2, 1, 2, 3, 2]))
    >>> ia.tolist(), ib.tolist()
    ([0, 1, 2, 3], [1, 2, 3, 4])
    """
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    out_a: list[int] = []
    out_b: list[int] = []
    _align(a, b, 0, len(a), 0, len(b), out_a, out_b)
    order = np.argsort(np.asarray(out_a, dtype=np.int64), kind="stable")
    return (
        np.asarray(out_a, dtype=np.int64)[order],
        np.asarray(out_b, dtype=np.int64)[order],
    )


def _align(
    a: np.ndarray,
    b: np.ndarray,
    a0: int,
    a1: int,
    b0: int,
    b1: int,
    out_a: list[int],
    out_b: list[int],
) -> None:
    # Explicit stack instead of recursion: gaps can nest deeply on long traces.
    stack = [(a0, a1, b0, b1)]
    while stack:
        a0, a1, b0, b1 = stack.pop()
        while a0 < a1 and b0 < b1 and a[a0] == b[b0]:
            out_a.append(a0)
            out_b.append(b0)
            a0 += 1
            b0 += 1
        while a0 < a1 and b0 < b1 and a[a1 - 1] == b[b1 - 1]:
            a1 -= 1
            b1 -= 1
            out_a.append(a1)
            out_b.append(b1)
        if a0 >= a1 or b0 >= b1:
            continue
        if (a1 - a0) * (b1 - b0) <= MAX_LCS_CELLS:
            la, lb = _lcs(a[a0:a1], b[b0:b1])
            out_a.extend((la + a0).tolist())
            out_b.extend((lb + b0).tolist())
            continue
        anchors = _patience_anchors(a[a0:a1], b[b0:b1])
        if anchors:
            pa, pb = a0, b0
            for ia, ib in anchors:
                out_a.append(a0 + ia)
                out_b.append(b0 + ib)
                stack.append((pa, a0 + ia, pb, b0 + ib))
                pa, pb = a0 + ia + 1, b0 + ib + 1
            stack.append((pa, a1, pb, b1))
        else:
            sm = difflib.SequenceMatcher(None, a[a0:a1].tolist(), b[b0:b1].tolist(), False)
            for blk in sm.get_matching_blocks():
                out_a.extend(range(a0 + blk.a, a0 + blk.a + blk.size))
                out_b.extend(range(b0 + blk.b, b0 + blk.b + blk.size))


def _patience_anchors(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """Pairs of symbols unique in both, reduced to their longest increasing run."""
    ua, ia, ca = np.unique(a, return_index=True, return_counts=True)
    ub, ib, cb = np.unique(b, return_index=True, return_counts=True)
    sa, sb = ua[ca == 1], ub[cb == 1]
    common, xa, xb = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
    if common.size == 0:
        return []
    pos_a = ia[ca == 1][xa]
    pos_b = ib[cb == 1][xb]
    order = np.argsort(pos_a, kind="stable")
    return _lis(pos_a[order].tolist(), pos_b[order].tolist())


def _lis(pa: list[int], pb: list[int]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in ``pb`` (``pa`` is already increasing)."""
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(pb)
    for i, v in enumerate(pb):
        k = bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_idx.append(i)
        else:
            tails[k] = v
            tail_idx[k] = i
        prev[i] = tail_idx[k - 1] if k else -1
    out: list[tuple[int, int]] = []
    i = tail_idx[-1] if tail_idx else -1
    while i >= 0:
        out.append((pa[i], pb[i]))
        i = prev[i]
    out.reverse()
    return out


def _lcs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, m = len(a), len(b)
    ia = np.empty(min(n, m), dtype=np.int64)
    ib = np.empty(min(n, m), dtype=np.int64)
    k = lcs(
        np.ascontiguousarray(a, dtype=np.int64), np.ascontiguousarray(b, dtype=np.int64), ia, ib
    )
    return ia[:k], ib[:k]


def best_window(a: np.ndarray, b: np.ndarray, head: int = 3, max_candidates: int = 512) -> int:
    """Start in ``b`` of the ``len(a)``-long stretch most like ``a`` (0 if nothing stands out).

    Candidates are the positions where ``b`` repeats the first ``head`` symbols of ``a`` (fewer
    if none do). Each is scored by multiset overlap with ``a``, then by positional agreement;
    the earliest of equal scores wins, so the choice is deterministic.
    """
    n, m = len(a), len(b)
    if n == 0 or m <= n:
        return 0
    starts = np.arange(m - n + 1)
    for h in range(min(head, n), 0, -1):
        ok = np.ones(starts.shape[0], dtype=bool)
        for k in range(h):
            ok &= b[starts + k] == a[k]
        if ok.any():
            starts = starts[ok]
            break
    else:
        return 0
    starts = starts[:max_candidates]
    syms, a_inv = np.unique(a, return_inverse=True)
    a_counts = np.bincount(a_inv, minlength=syms.shape[0])
    best, best_key = 0, (-1, -1)
    for s in starts.tolist():
        w = b[s : s + n]
        pos = np.searchsorted(syms, w).clip(0, syms.shape[0] - 1)
        hit = syms[pos] == w
        w_counts = np.bincount(pos[hit], minlength=syms.shape[0])
        key = (int(np.minimum(a_counts, w_counts).sum()), int((w == a[: w.shape[0]]).sum()))
        if key > best_key:
            best, best_key = s, key
    return best
