"""Each model-size ``--set`` asks only for the baseline values its re-timing uses
(:mod:`lumos.estimate.needs`): exact keys on the bundled demo and on a recording whose
activations are flattened to (tokens, width) (``tests/data/flat_tokens_cpu``: the micro-batch
size and the sequence are not in its shapes, and its FFN equals its token count)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.needs import asks, missing, require
from lumos.estimate.reshape import reshape_workload
from lumos.estimate.shapes import Dims, _Mapper, map_dims
from lumos.examples_data import example_run_dir
from lumos.graph.model import Workload
from lumos.replay import build_workload

FLAT = Path(__file__).parents[1] / "data" / "flat_tokens_cpu" / "trace.kineto.json.gz"
KEYS = ("hidden", "ffn", "heads", "seq", "microbatch_size")


@pytest.fixture(scope="module")
def demo() -> Workload:
    return build_workload([str(example_run_dir())], workers=1)[0]


@pytest.fixture(scope="module")
def flat() -> Workload:
    return build_workload([str(FLAT)], workers=1)[0]


def _asked(w: Workload, key: str) -> list[str]:
    return [k for k, _ in asks(w, {key: 4096})]


def test_each_key_asks_for_what_it_uses_on_the_demo(demo):
    """The demo has attention (scaled dot product) and no batched products (bmm)."""
    assert {k: _asked(demo, k) for k in KEYS} == {
        "hidden": ["hidden", "ffn", "heads", "tokens"],
        "ffn": ["ffn", "tokens"],
        "heads": ["heads", "hidden", "tokens"],
        "seq": ["seq", "tokens"],
        "microbatch_size": ["microbatch_size", "tokens"],
    }
    base = detect_baseline(demo)
    assert all(missing(demo, base, {k: 4096}) == [] for k in KEYS)
    # a value set to the one recorded changes nothing and asks for nothing
    assert asks(demo, {"hidden": 128}, base) == []


def test_the_demo_says_where_each_size_came_from(demo):
    """The bundled GPT (its README: hidden 128, 4 heads, sequence 64, batch 8; the example's FFN
    is 4 x hidden): hidden is the last dimension of the layers' (b, s, hidden) activations, the
    FFN the widest other one, the heads the attention tensors' second dimension."""
    base = detect_baseline(demo)
    assert {k: base.values[k] for k in KEYS} == {
        "hidden": 128, "ffn": 512, "heads": 4, "seq": 64, "microbatch_size": 8}  # fmt: skip
    assert base.how["ffn"] == "widest other layer activation"
    assert base.how["heads"] == "attention tensors (b, heads, s, hidden/heads)"
    assert base.how["seq"] == "activations (b, s, hidden) = [8, 64]+[128]"


def test_a_flattened_trace_shows_tokens_hidden_and_ffn_not_seq(flat):
    base = detect_baseline(flat)
    assert {k: base.values.get(k, -1) for k in (*KEYS, "tokens", "vocab")} == {
        "hidden": 128, "ffn": 512, "heads": -1, "seq": -1, "microbatch_size": -1,
        "tokens": 512, "vocab": 1000}  # fmt: skip
    # the forward products are [512, 128] @ [128, 512] and [512, 512] @ [512, 128]: the token
    # rows are the left operand's, so the 512 tokens are not read as the 512-wide FFN
    assert base.how["tokens"] == "rows of 24 forward matrix products (tokens, K)"
    assert base.how["heads"] == "no attention tensor (b, heads, s, hidden / heads)"
    assert {k: [x for x, _ in missing(flat, base, {k: 4096})] for k in KEYS} == {
        "hidden": [], "ffn": [], "heads": ["heads"], "seq": ["seq"],
        "microbatch_size": ["microbatch_size"]}  # fmt: skip
    # no attention: hidden does not ask for heads
    assert _asked(flat, "hidden") == ["hidden", "ffn", "tokens"]
    given = detect_baseline(flat, {"seq": 64})
    assert (given.values["microbatch_size"], given.how["microbatch_size"]) == (8, "tokens / seq")


def test_hidden_without_seq_or_batch_is_the_estimate_with_them(flat, demo):
    """hidden=256 where only hidden, ffn and tokens are known: the same step time, to the ns,
    as with the micro-batch size and the sequence given; on the demo, with its (b, s)
    dropped, the same re-timed durations (its activations read by position from tokens)."""
    sets = [parse_scenario(["hidden=256"]), parse_scenario(["ffn=1024"])]
    alone = estimate(flat, sets)
    full = estimate(flat, sets, baseline={"microbatch_size": 8, "seq": 64, "heads": 4})
    assert [r.step_ns for r in alone.rows] == [r.step_ns for r in full.rows]
    assert alone.rows[1].step_ns > 2 * alone.rows[0].step_ns  # a real change
    base = detect_baseline(demo)
    part = replace(base, values={k: v for k, v in base.values.items()
                                 if k not in ("seq", "microbatch_size")})  # fmt: skip
    assert (part.dims().seq, part.dims().microbatch_size, part.dims().tokens) == (-1, -1, 512)
    for change in ({"hidden": 256}, {"ffn": 1024}, {"heads": 8}):
        a, _ = reshape_workload(demo, base, change)
        b, _ = reshape_workload(demo, part, change)
        for x, y in zip(a.graphs, b.graphs, strict=True):
            assert np.array_equal(x.tasks.dur_ns, y.tasks.dur_ns)
            assert np.array_equal(x.edges.delay_ns, y.edges.delay_ns)


def test_the_one_line_errors_name_the_trace_the_key_and_why(flat, tmp_path, capsys):
    from lumos.cli.main import main

    assert main(["estimate", str(FLAT), "--set", "seq=128", "-o", str(tmp_path / "e")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"lumos: error: {FLAT}: seq=128: needs the baseline's seq (the micro-batch size "
        "follows as tokens / seq), which the trace does not show (activations flattened to "
        "(tokens, width), 512 tokens: the sequence and the micro-batch size are not shown "
        "apart); give --baseline seq=N"
    )
    argv = ["estimate", str(FLAT), "--set", "seq=128", "--baseline", "seq=64", "-o",
            str(tmp_path / "e")]  # fmt: skip
    assert main(argv) == 0
    found = detect_baseline(flat)  # as if no product had shown the token rows
    base = replace(found, values={k: v for k, v in found.values.items() if k != "tokens"},
                   how={**found.how, "tokens": "not found"})  # fmt: skip
    with pytest.raises(ConfigError) as err:
        require(flat, base, {"hidden": 256})
    assert str(err.value) == (
        "needs the baseline's tokens (tokens per micro-batch (micro-batch size x sequence), "
        "which tells a token dimension from a feature dimension of the same size), which the "
        "trace does not show (not found); give --baseline tokens=N (or both "
        "--baseline microbatch_size=N and --baseline seq=N)"
    )


def test_a_trace_without_shapes_says_so(demo):
    bare = demo.replace_graphs(g.replace(dims=(), task_dims_idx=None) for g in demo.graphs)
    with pytest.raises(ConfigError) as err:
        estimate(bare, [parse_scenario(["hidden=256"])])
    assert str(err.value) == (
        "hidden=256: the trace records no tensor shapes (Input Dims), which re-timing ops for "
        "other model sizes reads: record it with the profiler's record_shapes=True"
    )


def test_a_vllm_inference_trace_reads_hidden_from_its_products_and_names_what_it_lacks(
    tmp_path, capsys
):
    """TraceLens's GPT-OSS inference trace (vLLM, 8-way tensor parallel) flattens its 888
    tokens: its 3-D tensors are attention's (tokens, heads, head width) = (888, 8, 64), which
    read as (b, s, hidden) gave hidden 64. Its forward products (``linear``: [888, 2880] x
    [640, 2880]...) give hidden 2880; its experts' FFN runs inside ``vllm::moe_forward`` and
    no tensor shows the heads, so hidden=4096 names ffn (and heads after it)."""
    from tests.realdata import trace

    from lumos.cli.main import main

    path = str(trace("allgather_b200"))
    w, _ = build_workload([path], workers=1)
    base = detect_baseline(w)
    assert {k: base.values.get(k, -1) for k in (*KEYS, "tokens")} == {
        "hidden": 2880, "ffn": -1, "heads": -1, "seq": -1, "microbatch_size": -1,
        "tokens": 888}  # fmt: skip
    assert main(["estimate", path, "--set", "hidden=4096", "-o", str(tmp_path / "e")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"lumos: error: {path}: hidden=4096: needs the baseline's ffn (the FFN width follows "
        "hidden unless --set ffn=N is given), which the trace does not show (no layer "
        "activation or product output wider than hidden); give --baseline ffn=N (then also "
        "heads)"
    )


def _layer_ops(b: int, s: int, h: int, f: int, n: int) -> list[tuple[str, list]]:
    """A transformer layer's ops as a trace records them: (b, s, x) activations, attention's
    (b, heads, s, x), 2-D products forward and backward, weights."""
    t, d = b * s, h // n
    return [
        ("aten::layer_norm", [[b, s, h], [], [h], [h], [], []]),
        ("aten::addmm", [[3 * h], [t, h], [h, 3 * h], [], []]),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", [[b, n, s, d]] * 3),
        ("aten::_softmax", [[b, n, s, s], [], []]),
        ("aten::gelu", [[b, s, f], []]),
        ("aten::addmm", [[h], [t, f], [f, h], [], []]),
        ("aten::mm", [[t, h], [h, f]]),  # input gradient
        ("aten::mm", [[f, t], [t, h]]),  # weight gradient
        ("aten::add", [[b, s, h], [b, s, h], []]),
    ]


@settings(max_examples=150, deadline=None)
@given(b=st.sampled_from([3, 4, 6, 8, 12]), s=st.sampled_from([20, 48, 64, 96, 100, 128]),
       n=st.sampled_from([2, 3, 4, 6]), d=st.sampled_from([16, 24, 32, 48, 64]),
       mult=st.sampled_from([1, 3, 4]), key=st.sampled_from(["hidden", "ffn"]),
       k=st.integers(2, 4))  # fmt: skip
def test_knowing_b_and_s_changes_nothing_for_hidden_or_ffn(b, s, n, d, mult, key, k):
    """A hidden or FFN change maps every tensor of a layer the same with or without the
    micro-batch size and the sequence: the token count is enough, activations being read by
    position (``(b, s)`` or any pair whose product is the token count), including where the
    sequence or the micro-batch size equals a feature size (sequence 64 = hidden 64). Only
    the token count, the heads and ``b x heads`` must differ from the feature sizes (the
    mapper's role rule); the weight gradient ``[f, tokens] @ [tokens, h]`` is compared
    where ``b`` and ``s`` do too (where they do not, knowing them misreads ``f == s`` as a
    token count)."""
    h = n * d
    f = mult * h
    features = {h, 3 * h, f, 2 * f, d}
    assume(not {b * s, n, b * n} & features and len({b, s, b * s, n, b * n}) == 5)
    full = Dims(microbatch_size=b, seq=s, hidden=h, ffn=f, heads=n)
    part = Dims(hidden=h, ffn=f, heads=n, tokens=b * s)
    changed = {"hidden": {"hidden": k * h, "ffn": k * f}, "ffn": {"ffn": k * f}}[key]
    with_bs = _Mapper(full, replace(full, **changed))
    without = _Mapper(part, replace(part, **changed))
    ops = _layer_ops(b, s, h, f, n)
    if {b, s} & features:
        ops = [op for op in ops if op[1] != [[f, b * s], [b * s, h]]]
    for name, dims in ops:
        assert map_dims(name, dims, with_bs, True) == map_dims(name, dims, without, True), name


def test_an_unknown_model_key_is_named_with_the_known_ones(demo) -> None:
    """The first unknown key in sorted order is named ("alpha" before "zeta"), then every
    model key in :data:`~lumos.estimate.reshape.MODEL_KEYS` order; a single one is named too."""
    base = detect_baseline(demo)
    known = "layers, hidden, ffn, heads, seq, microbatches, microbatch_size, pp"
    for changes, name in (({"zeta": 1, "alpha": 2}, "alpha"), ({"depth": 3}, "depth")):
        with pytest.raises(ConfigError) as err:
            reshape_workload(demo, base, changes)
        assert str(err.value) == f"unknown model key {name!r} (known: {known})"
