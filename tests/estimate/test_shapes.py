"""Shape re-timing and baseline detection: known answers on hand-made shapes and the bundled run."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.params import op_params
from lumos.estimate.reshape import reshape_workload
from lumos.estimate.shapes import (
    Dims,
    ShapeModel,
    _Mapper,
    fit_line,
    fit_shape_model,
    fitted_model,
    map_dims,
    retime,
    work_of,
)
from lumos.estimate.shapes_device import DeviceCalls, retime_device
from lumos.examples_data import example_run_dir
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

# the bundled run: micro-batch 8, sequence 64, hidden 128, FFN 512, 4 heads, vocabulary 512
OLD = Dims(microbatch_size=8, seq=64, hidden=128, ffn=512, heads=4, vocab=512)
WIDE = Dims(microbatch_size=8, seq=64, hidden=256, ffn=1024, heads=4, vocab=512)


@pytest.fixture(scope="module")
def example():
    workload, _ = build_workload([str(example_run_dir())])
    return workload


def test_work_of_matrix_products_attention_and_elementwise():
    assert work_of("aten::addmm", [[384], [512, 128], [128, 384], [], []]) == 2 * 512 * 128 * 384
    assert work_of("aten::mm", [[512, 512], [512, 128]]) == 2 * 512 * 512 * 128
    assert work_of("aten::bmm", [[32, 64, 32], [32, 32, 64]]) == 2 * 32 * 64 * 32 * 64
    attn = [[8, 4, 64, 32], [8, 4, 64, 32], [8, 4, 64, 32]]
    assert (
        work_of("aten::_scaled_dot_product_flash_attention_for_cpu", attn)
        == 4 * 8 * 4 * 64 * 64 * 32
    )
    assert work_of("aten::gelu", [[8, 64, 512], []]) == 8 * 64 * 512
    assert work_of("aten::_foreach_add_", [[[384, 128], [384]], []]) == 384 * 128 + 384
    assert work_of("aten::view", [[8, 64, 128], []]) == 0  # touches no data


def test_tokens_equal_to_ffn_are_told_apart_by_role():
    """Micro-batch x sequence = 512 = FFN = vocabulary: an activation's leading 512 is tokens
    (unchanged), a weight's 512 is the FFN inside a layer and the vocabulary outside."""
    m = _Mapper(OLD, WIDE)
    fc2 = map_dims("aten::addmm", [[128], [512, 512], [512, 128], [], []], m, inside=True)
    assert fc2[:3] == [[256], [512, 1024], [1024, 256]]
    head = map_dims("aten::mm", [[512, 128], [128, 512]], m, inside=False)
    assert head == [[512, 256], [256, 512]]
    act = map_dims("aten::gelu", [[8, 64, 512], []], m, inside=True)
    assert act[0] == [8, 64, 1024]
    scores = map_dims("aten::_softmax", [[8, 4, 64, 64], [], []], m, inside=True)
    assert scores[0] == [8, 4, 64, 64]
    longer = _Mapper(OLD, Dims(microbatch_size=8, seq=128, hidden=128, ffn=512, heads=4, vocab=512))
    assert map_dims("aten::_softmax", [[8, 4, 64, 64]], longer, True)[0] == [8, 4, 128, 128]


def test_an_addmm_record_that_is_not_two_matching_matrices_keeps_its_bias_a_weight():
    """An ``addmm`` whose record is cut short (the bias and the input, no weight) is mapped
    tensor by tensor: the bias (first) as a weight, every 512 of it the FFN inside a layer
    (-> 1024), the input as an activation (leading 512 tokens, kept; last 128 hidden -> 256)."""
    m = _Mapper(OLD, WIDE)
    assert map_dims("aten::addmm", [[512, 512], [512, 128]], m, inside=True) == [
        [1024, 1024],
        [512, 256],
    ]


def test_complete_derives_only_what_is_unknown():
    """``tokens = b x s``, ``s = tokens / b``, ``b = tokens / s`` where the third is unknown
    (``<= 0``) and the division is exact; a value given is kept even where the others
    disagree, and a zero token count derives nothing."""
    assert Dims(microbatch_size=8, seq=64).complete().tokens == 512
    assert Dims(microbatch_size=8, tokens=512).complete().seq == 64
    assert Dims(seq=64, tokens=512).complete().microbatch_size == 8
    assert Dims(microbatch_size=3, tokens=512).complete() == Dims(microbatch_size=3, tokens=512)
    given = Dims(microbatch_size=4, seq=1, tokens=8)  # a sequence of 1 is a value, not unknown
    assert given.complete() == given
    assert Dims(seq=64, tokens=0).complete() == Dims(seq=64, tokens=0)


def test_a_zero_or_unknown_size_is_no_quantity():
    """Only sizes > 0 are quantities a dimension can match: a zero token count (which
    ``complete`` keeps, above) and the unknown ``-1`` sizes are left out, so a dimension of 0
    (an empty tensor) is never read as the token count."""
    assert Dims(seq=64, tokens=0).quantities() == {"s": 64}
    assert Dims(microbatch_size=2, seq=8, hidden=64, heads=4).quantities() == {
        "tokens": 16, "b*heads": 8, "b": 2, "s": 8, "heads": 4, "h": 64, "3h": 192, "hd": 16,
    }  # fmt: skip


def test_quantities_of_a_complete_configuration():
    """Every quantity of b=2, s=8, h=64, f=256, 4 heads, vocabulary 192: tokens b*s = 16,
    b*heads = 8, 3h = 192, 2f = 512, head width h / heads = 16 (all integers)."""
    q = Dims(microbatch_size=2, seq=8, hidden=64, ffn=256, heads=4, vocab=192).quantities()
    assert q == {"tokens": 16, "b*heads": 8, "b": 2, "s": 8, "heads": 4, "h": 64, "3h": 192,
                 "f": 256, "2f": 512, "hd": 16, "vocab": 192}  # fmt: skip
    assert all(type(v) is int for v in q.values())


def test_a_leading_scalar_of_a_product_does_not_make_its_first_matrix_a_weight():
    """``b = 4, s = 16`` (64 tokens), hidden 64 -> 128. A product record led by a scalar
    (``[]``, kept as it is) then two ``[64, 64]`` matrices: the first matrix is still the
    activation (leading 64 = tokens, kept; last 64 = hidden -> 128), only the second is a
    weight (both 64s hidden -> 128)."""
    m = _Mapper(
        Dims(microbatch_size=4, seq=16, hidden=64), Dims(microbatch_size=4, seq=16, hidden=128)
    )
    assert map_dims("aten::bmm", [[], [64, 64], [64, 64]], m, inside=True) == [
        [],
        [64, 128],
        [128, 128],
    ]


def test_a_mask_broadcast_over_the_heads_keeps_its_one_head():
    """b 2, s 16, hidden 96, heads 4 -> 8 (head size 24 -> 12). Attention scores
    ``[b, heads, s, s]`` get the new heads: ``[2, 8, 16, 16]`` (the last 16 is ``s``, kept);
    a mask ``[b, 1, s, s]`` broadcast over the heads keeps its 1."""
    m = _Mapper(Dims(microbatch_size=2, seq=16, hidden=96, heads=4),
                Dims(microbatch_size=2, seq=16, hidden=96, heads=8))  # fmt: skip
    assert map_dims("aten::masked_fill", [[2, 4, 16, 16], [2, 1, 16, 16]], m, True) == [
        [2, 8, 16, 16],
        [2, 1, 16, 16],
    ]


def test_a_line_through_one_size_of_zero_work_has_no_slope():
    """One distinct work value, 0: no slope can be read (``y / 0``), so the line is flat at 0
    (not infinite); one value of 4 gives the slope through the origin, median 20 / 4 = 5."""
    assert fit_line(np.array([0.0, 0.0]), np.array([5.0, 7.0])) == (0.0, 0.0)
    assert fit_line(np.array([4.0, 4.0, 4.0]), np.array([10.0, 20.0, 30.0])) == (0.0, 5.0)


MM = "[[512, 128], [128, 512]]"  # the LM head's product (or an FFN one inside a layer)
SOFTMAX = "[[8, 4, 64, 64], [], []]"


def _with_dims(g: ExecGraph, dims: tuple[str, ...], task_dims: list[int], span_dims=()):
    return g.replace(
        dims=dims,
        task_dims_idx=np.array(task_dims, dtype=np.int32),
        annotations=g.annotations.replace(dims_idx=np.array(span_dims, dtype=np.int32)),
    )


def test_retime_maps_inside_and_outside_a_layer_apart_and_counts_what_it_kept():
    """hidden 128 -> 256, FFN 512 -> 1024 (vocabulary 512 kept), no fitted lines (floor 0: time
    in proportion to work). ``[512, 128] @ [128, 512]`` outside the layers is the LM head
    (512 = vocabulary): 2 x 512 x 256 x 512, twice the work, 1000 -> 2000 ns; inside a layer
    the 512 is the FFN: 2 x 512 x 256 x 1024, four times, 1000 -> 4000 ns. Each product's
    512 also reads as FFN and vocabulary (2 resolved by role, one per distinct op). A view
    touches no data (kept), a task without shapes is kept."""
    b = GraphBuilder()
    th = b.thread(1)
    for name, dur in (("aten::view", 50), ("aten::mm", 1000), ("aten::mm", 1000),
                      ("aten::relu", 70)):  # fmt: skip
        b.task(th, name, dur)
    g = _with_dims(b.build(), (MM, "[[8, 64, 128], []]"), [1, 0, 0, -1])
    inside = np.array([True, False, True, True])
    dur, stats = retime(g, OLD, WIDE, ShapeModel(), inside)
    assert dur.tolist() == [50, 2000, 4000, 70]
    assert stats == {"retimed": 2, "kept_no_shapes": 1, "kept_no_data": 1, "ambiguous_dims": 2}


def test_fit_shape_model_fits_each_name_on_its_own_instances():
    """Two ``mm`` sizes, work 2 x 2 x 3 x 4 = 48 and 2 x 4 x 3 x 4 = 96, recorded 44 and 68 ns:
    the line 20 + 0.5 x work through both; two views (4 and 6 ns) make the floor their median,
    5 ns. ``aten::view`` is the graph's first name, ``mm`` its second."""
    b = GraphBuilder()
    th = b.thread(1)
    for name, dur in (("aten::view", 4), ("aten::view", 6), ("aten::mm", 44), ("aten::mm", 44),
                      ("aten::mm", 68)):  # fmt: skip
        b.task(th, name, dur)
    dims = ("[[2, 3], [3, 4]]", "[[4, 3], [3, 4]]", "[[8, 8]]")
    g = _with_dims(b.build(), dims, [2, 2, 0, 0, 1])
    model = fit_shape_model([g])
    assert list(model.fits) == ["aten::mm"]
    assert model.fits["aten::mm"] == pytest.approx((20.0, 0.5))
    assert model.floor_ns == 5.0


def test_fitted_model_fits_only_names_seen_at_sizes_far_enough_apart_that_slope_up():
    """``mm`` at work 2 and 3 (exactly 1.5x apart), 10 and 10.5 ns: the line 9 + 0.5 x work.
    ``bmm`` at 2 and 2.5 (1.25x: too close to tell a slope from noise), ``addmm`` at one size,
    ``baddbmm`` slowing down with work (20 ns at 2, 10 at 4: slope clipped to 0): no line,
    the floor for them. The floor is the one given."""
    model = fitted_model(
        {
            "aten::mm": [(2.0, 10.0), (3.0, 10.5)],
            "aten::bmm": [(2.0, 10.0), (2.5, 12.0)],
            "aten::addmm": [(4.0, 10.0), (4.0, 30.0)],
            "aten::baddbmm": [(2.0, 20.0), (4.0, 10.0)],
        },
        7.5,
    )
    assert list(model.fits) == ["aten::mm"]
    assert model.fits["aten::mm"] == pytest.approx((9.0, 0.5))
    assert model.floor_ns == 7.5
    assert fitted_model({}, 0.0) == ShapeModel()


def test_kernels_are_re_timed_by_the_call_that_launched_them():
    """Inside a layer, hidden 128 -> 256 and FFN 512 -> 1024, no fitted lines: the ``mm``
    call (``[512, 128] @ [128, 512]``, the 512 the FFN) does four times the work, so both of
    its kernels (600 + 400 ns) take four times as long; the softmax keeps its shape
    ``(b, heads, s, s)`` (ratio 1: kept, not counted as re-timed); a kernel whose launch the
    trace does not show is kept and counted; the host tasks are not this function's."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    calls = [b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=10 * i) for i in range(3)]
    kernels = [b.task(st, name, dur, TaskKind.KERNEL, ts_ns=ts) for name, dur, ts in
               (("gemm_a", 600, 100), ("gemm_b", 400, 700), ("softmax", 300, 1100),
                ("orphan", 80, 1400))]  # fmt: skip
    for c, k in zip(calls, kernels, strict=False):
        b.edge(c, k, DepKind.LAUNCH)
    b.annotate("aten::mm", th, calls[0], calls[1], kind=AnnotationKind.USER, dur_ns=20)
    b.annotate("aten::_softmax", th, calls[2], calls[2], kind=AnnotationKind.USER, ts_ns=20,
               dur_ns=8)  # fmt: skip
    g = _with_dims(b.build(), (MM, SOFTMAX), [-1] * 7, [0, 1])
    dur, stats = retime_device(g, g.tasks.dur_ns.astype(np.int64), OLD, WIDE, ShapeModel(),
                               np.zeros(7, dtype=np.int32))  # fmt: skip
    assert dur.tolist() == [5, 5, 5, 2400, 1600, 300, 80]
    assert stats == {"device_retimed": 2, "device_kept": 1}


def test_cost_lines_and_the_dispatch_floor():
    a, c = fit_line(np.array([1.0, 2.0, 4.0, 4.0]), np.array([15.0, 25.0, 45.0, 45.0]))
    assert a == pytest.approx(5.0) and c == pytest.approx(10.0)
    model = ShapeModel(fits={"aten::mm": (5.0, 10.0)}, floor_ns=2.0)
    assert model.scaled("aten::mm", 45.0, 4.0, 8.0) == pytest.approx(85.0)
    # no fit: the floor stays, the rest scales with work
    assert model.scaled("aten::gelu", 12.0, 100.0, 200.0) == pytest.approx(22.0)


def test_parameters_of_ops():
    assert op_params("aten::addmm", [[384], [512, 128], [128, 384], [], []]) == 128 * 384 + 384
    assert op_params("aten::mm", [[512, 128], [128, 512]]) == 128 * 512
    assert op_params("aten::embedding", [[512, 128], [8, 64], [], [], []]) == 512 * 128
    assert op_params("aten::layer_norm", [[8, 64, 128], [], [128], [128], [], []]) == 256


def test_the_bundled_run_configuration_is_found(example):
    base = detect_baseline(example)
    assert base.values == {"layers": 2, "hidden": 128, "ffn": 512, "heads": 4, "seq": 64,
                           "microbatch_size": 8, "tokens": 512, "vocab": 512,
                           "microbatches": 1, "pp": 1, "dp": 2}  # fmt: skip
    assert base.dims() == OLD.complete() and OLD.complete().tokens == 512
    given = detect_baseline(example, {"hidden": 96})
    assert given.values["hidden"] == 96 and given.how["hidden"] == "given (--baseline)"
    with pytest.raises(ConfigError, match="--baseline"):
        detect_baseline(example, {"depth": 3})


def test_reshape_records_its_edits_and_rejects_what_it_cannot_do(example):
    base = detect_baseline(example)
    wide, edits = reshape_workload(example, base, {"hidden": 256})
    names = [e.name for e in edits]
    assert names == ["hidden 128 -> 256", "communication re-sized"]
    assert edits[0].tasks_retimed > 1000
    # every rank's parameters: layers 2 x (4h^2 + 2hf + 9h + 2f... ) grow about 4x with h and f
    assert "gradient bytes x3." in edits[1].detail
    assert sum(g.tasks.dur_ns.sum() for g in wide.graphs) > sum(
        g.tasks.dur_ns.sum() for g in example.graphs
    )
    deeper, edits = reshape_workload(example, base, {"layers": 4})
    assert sum(g.num_tasks for g in deeper.graphs) == example.num_tasks + edits[0].tasks_added
    assert edits[0].name == "layers 2 -> 4" and edits[0].tasks_removed == 0
    assert edits[0].tasks_added == (62 + 132 + 180) * 2 * 3 * 2  # 2 layers x 3 steps x 2 ranks
    with pytest.raises(ConfigError, match="pp=2"):
        reshape_workload(example, base, {"pp": 2})
    with pytest.raises(ConfigError, match="micro-batch blocks"):
        reshape_workload(example, base, {"microbatches": 4})


def test_a_wider_model_re_times_the_first_layers_ffn_activation_as_the_seconds(example):
    """hidden 128 -> 256 on the bundled run (the FFN follows: 512 -> 1024): inside a layer,
    layer 0 as much as layer 1, ``aten::gelu`` on ``[8, 64, 512]`` is the FFN activation, its
    512 the FFN width, so its work (elements) doubles and, gelu having no fitted line, its time
    above the dispatch floor doubles: ``a + 2 (dur - a)``, ``a = min(floor, dur)``. Read outside a layer
    the 512 would be the (unchanged) vocabulary and the op kept: 3 steps x 2 layers x (forward
    + ``gelu_backward``, which has no ``aten::gelu`` name) = 6 gelus per rank."""
    from lumos.estimate.layers import find_layers

    base = detect_baseline(example)
    wide, _ = reshape_workload(example, base, {"hidden": 256})
    model = example._cache["shape_model"]
    assert "aten::gelu" not in model.fits
    for g, g2 in zip(example.graphs, wide.graphs, strict=True):
        layer = find_layers(g).task_layer(g.num_tasks)
        gelu = (np.array(g.names)[g.tasks.name_idx] == "aten::gelu") & (g.task_dims_idx >= 0)
        gelu &= np.array([d == "[[8, 64, 512], []]" for d in g.dims])[
            np.maximum(g.task_dims_idx, 0)
        ]
        assert sorted(layer[gelu].tolist()) == [0, 0, 0, 1, 1, 1]
        old = g.tasks.dur_ns[gelu]
        a = np.minimum(model.floor_ns, old)
        expected = np.rint(a + 2 * (old - a)).astype(np.int64)
        assert g2.tasks.dur_ns[gelu].tolist() == expected.tolist()


def test_a_longer_sequence_re_times_only_the_optimizer_ops_on_the_position_table(example):
    """seq 64 -> 128 on the bundled run: the optimizer's tensors are parameters (every
    dimension feature-like), so of its ops exactly those on the position embedding
    ``[64, 128]`` (its 64 is the sequence) change: Adam's ``lerp_``, ``addcmul_``, ``sqrt`` and
    ``addcdiv_`` on it, once per step, 4 x 3 = 12 per rank. Read as activations, the FFN
    weights' ``[512, 128]`` would be 512 tokens (8 x 64) and double with the sequence."""
    import json

    from lumos.estimate.layers import OPTIMIZER_PATTERN, marked

    base = detect_baseline(example)
    longer, _ = reshape_workload(example, base, {"seq": 128})
    for g, g2 in zip(example.graphs, longer.graphs, strict=True):
        indptr, perm = g.processor_order()
        opt = marked(g, OPTIMIZER_PATTERN, indptr, perm)
        has_seq = np.array([any(64 in t for t in json.loads(d) if t) for d in g.dims])
        di = g.task_dims_idx
        on_table = opt & (di >= 0) & has_seq[np.maximum(di, 0)]
        changed = g.tasks.dur_ns != g2.tasks.dur_ns
        assert int(on_table.sum()) == 12
        assert (changed & opt).tolist() == on_table.tolist()


def test_lumos_layers_and_estimate_with_model_keys(tmp_path, capsys):
    import json

    from lumos.cli.main import main

    run = str(example_run_dir())
    assert main(["layers", run, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["layers"] == {"value": 2, "how": "2, 2 repeated blocks per rank x pp 1"}
    phases = doc["ranks"][0]["phases"]
    assert {k: (v["layers"], v["ops_per_layer"]) for k, v in phases.items()} == {
        "forward": (2, 62), "backward": (2, 132), "optimizer": (2, 180)}  # fmt: skip
    assert main(["layers", run]) == 0
    text = capsys.readouterr().out
    assert "hidden          128" in text and "outside the layers" in text

    out = tmp_path / "est"
    assert main(["estimate", run, "-o", str(out), "--sweep", "layers=1,4"]) == 0
    doc = json.loads((out / "estimate.json").read_text())
    assert [r["config"]["label"] for r in doc["rows"]] == ["baseline", "layers=1", "layers=4"]
    base, one, four = (r["step_ns"] for r in doc["rows"])
    assert one < base < four
    assert doc["baseline"]["hidden"]["value"] == 128
    assert doc["rows"][2]["edits"][0]["edit"] == "layers 2 -> 4"
    csv = (out / "estimate.csv").read_text().splitlines()
    assert csv[0].startswith("config,step_ns,change_pct") and len(csv) == 4
    assert main(["estimate", run, "-o", str(out), "--set", "layers=x"]) == 1
    assert "expected an integer" in capsys.readouterr().err


def test_lumos_report_of_an_estimate_directory_shows_the_rows_and_a_chart(tmp_path):
    from lumos.cli.main import main

    out = tmp_path / "est"
    assert main(["estimate", str(example_run_dir()), "-o", str(out), "--sweep", "layers=1,4"]) == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    section = html[html.index("What-if estimates") :]
    assert "layers=4" in section and "layers 2 -&gt; 4" in section
    assert section.count("<svg") == 1  # the stacked breakdown per scenario
    assert "Where the time goes, per scenario" in section


def test_an_op_of_one_element_is_retimed_and_counted():
    """``aten::add`` on ``[[1]]``: work 1 element (any op with data has work >= 1). A 1 matches
    no quantity, so the new work is 1 too; with no fitted line the time stays 30 ns, but the
    op had data to scale: it counts as re-timed, not as kept for lack of data."""
    b = GraphBuilder()
    b.task(b.thread(1), "aten::add", 30)
    g = _with_dims(b.build(), ("[[1]]",), [0])
    dur, stats = retime(g, OLD, WIDE, ShapeModel(), np.array([False]))
    assert dur.tolist() == [30]
    assert stats == {"retimed": 1, "kept_no_shapes": 0, "kept_no_data": 0, "ambiguous_dims": 0}


def test_one_head_has_the_whole_hidden_width():
    """hidden 64 and one head: the head width ``hd`` is 64 // 1 = 64; ``3h`` = 192; nothing
    else is known (no micro-batch size, sequence, FFN or vocabulary), so nothing else is
    listed."""
    assert Dims(hidden=64, heads=1).quantities() == {"heads": 1, "h": 64, "3h": 192, "hd": 64}


def test_a_graph_without_device_work_has_no_calls_and_nothing_unattributed():
    """A CPU-only graph: no GPU task, so no call, and no GPU task left unattributed (0)."""
    b = GraphBuilder()
    b.task(b.thread(1), "aten::add", 30)
    calls = DeviceCalls(b.build())
    assert calls.unattributed == 0
    assert [len(calls.tasks), len(calls.inv), len(calls.name_idx), len(calls.device_ns)] == [0] * 4
