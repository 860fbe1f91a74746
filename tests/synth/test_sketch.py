"""Quantile sketches and slices: exact where they can be, mean-preserving where they draw."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.chakra.attrs import _encode_scalar, _packed_varints
from lumos.synth.sample import variant_order
from lumos.synth.sketch import BINS, POINTS, draw, fit_sketches, rank_bins


def test_a_sketch_is_the_quantiles_and_the_segment_means() -> None:
    values = np.arange(1, 101, dtype=np.int64) * 10  # 10..1000
    keys, sk, counts = fit_sketches(np.zeros(100, np.int64), values)
    assert keys.tolist() == [0] and counts.tolist() == [100] and sk.shape == (1, 2 * POINTS - 1)
    assert sk[0, 0] == 10 and sk[0, POINTS - 1] == 1000  # minimum and maximum
    assert sk[0, 25] == 510  # Q(0.5): the 51st value (each value holds 1 % of probability)
    # the first segment (probabilities 0-2 %) holds the two smallest values: mean 15
    assert sk[0, POINTS] == 15


def test_draws_keep_the_mean_and_the_range() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([np.full(900, 10), np.full(100, 5000)]).astype(np.int64)
    _, points, _ = fit_sketches(np.zeros(len(values), np.int64), values)
    got = draw(points, np.zeros(200_000, np.int64), rng)
    assert got.min() >= 10 and got.max() <= 5000
    assert abs(got.mean() / values.mean() - 1) < 0.02


def test_a_drawn_value_stays_in_its_slice() -> None:
    values = np.arange(1000, dtype=np.int64)
    keys = np.zeros(1000, np.int64)
    bins = rank_bins(keys, values)
    per = np.bincount(bins, minlength=BINS)
    assert per.sum() == 1000 and per.max() - per.min() <= 1
    _, points, counts = fit_sketches(keys, values)
    rng = np.random.default_rng(1)
    top = draw(points, np.zeros(5000, np.int64), rng, np.full(5000, BINS - 1, np.int8), counts)
    assert top.min() >= (BINS - 1) / BINS * 999 - 2


def test_few_values_keep_their_own_rank() -> None:
    """Three values of one op: each task draws within the third of the distribution its value
    held (mostly the value itself), not within the first 1/BINS of it."""
    values = np.array([100, 200, 9000], np.int64)
    keys = np.zeros(3, np.int64)
    _, sk, counts = fit_sketches(keys, values)
    rng = np.random.default_rng(2)
    for b, value in zip(rank_bins(keys, values), values, strict=True):
        got = draw(sk, np.zeros(1000, np.int64), rng, np.full(1000, b, np.int8), counts)
        assert np.median(got) == value
        assert got.min() >= 100 and got.max() <= 9000


@given(st.lists(st.integers(1, 50), min_size=1, max_size=6), st.integers(1, 40), st.integers(0, 9))
def test_variant_order_gives_each_variant_its_share(weights, steps, seed) -> None:
    order = variant_order(weights, steps, seed)
    assert len(order) == steps
    counts = np.bincount(order, minlength=len(weights))
    share = np.asarray(weights) / sum(weights) * steps
    assert (np.abs(counts - share) < 1).all()
    assert order == variant_order(weights, steps, seed)


@settings(max_examples=200)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50),
       st.sampled_from(["int64", "int32", "sint64", "sint32"]))  # fmt: skip
def test_packed_varints_are_the_scalar_encodings(values, base) -> None:
    if base.endswith("32"):
        values = [v % 2**31 * (1 if v >= 0 else -1) for v in values]
    assert _packed_varints(base, values) == b"".join(_encode_scalar(base, v) for v in values)
