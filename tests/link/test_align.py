"""align(): order-preserving matching of equal symbols; exact LCS on small inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.link.align import align, best_window


def _lcs_len(a: list[int], b: list[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


seqs = st.lists(st.integers(0, 5), max_size=40)


@settings(max_examples=200, deadline=None)
@given(seqs, seqs)
def test_alignment_is_monotone_equal_and_optimal(a: list[int], b: list[int]) -> None:
    ia, ib = align(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64))
    assert ia.shape == ib.shape
    assert np.all(np.diff(ia) > 0) and np.all(np.diff(ib) > 0)
    assert all(a[i] == b[j] for i, j in zip(ia.tolist(), ib.tolist(), strict=True))
    assert ia.size == _lcs_len(a, b)  # small inputs are solved exactly


@given(seqs)
def test_identical_sequences_match_completely(a: list[int]) -> None:
    arr = np.array(a, dtype=np.int64)
    ia, ib = align(arr, arr)
    assert ia.tolist() == ib.tolist() == list(range(len(a)))


def test_insertion_and_deletion() -> None:
    a = np.array([1, 2, 3, 4, 5, 6])
    b = np.array([1, 2, 9, 3, 5, 6, 7])
    ia, ib = align(a, b)
    assert list(zip(ia.tolist(), ib.tolist(), strict=True)) == [
        (0, 0),
        (1, 1),
        (2, 3),
        (4, 4),
        (5, 5),
    ]


def test_large_inputs_use_anchors_and_stay_valid(monkeypatch) -> None:
    import lumos.link.align as mod

    monkeypatch.setattr(mod, "MAX_LCS_CELLS", 16)
    rng = np.random.default_rng(7)
    a = rng.integers(0, 50, 300)
    b = np.concatenate([a[:100], rng.integers(0, 50, 20), a[100:]])
    ia, ib = mod.align(a, b)
    assert np.all(np.diff(ia) > 0) and np.all(np.diff(ib) > 0)
    assert np.array_equal(a[ia], b[ib])
    assert ia.size >= 290


def test_best_window_picks_the_matching_iteration() -> None:
    it = [10, 11, 12, 13, 14]
    warmup = [10, 11, 12, 99, 99]  # starts like an iteration but is not one
    b = np.array(warmup + it + it + it)
    assert best_window(np.array(it), b) == 5
    assert best_window(np.array(it), np.array(it)) == 0
