"""Resident memory's parameter ratio (:func:`lumos.estimate.memory_edit.resident_ratio`):
which weights are a layer's, counted by hand on a built graph and on the recorded GPTs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layers import Group, LayerMap, forward_layer_spans
from lumos.estimate.memory_edit import resident_ratio
from lumos.estimate.shapes import Dims
from lumos.graph.model import AnnotationKind, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

DATA = Path(__file__).parent.parent / "data"

# micro-batch 2 x sequence 3 = 6 tokens, hidden 4, one head, FFN 16 == vocabulary 16
DIMS = Dims(microbatch_size=2, seq=3, hidden=4, ffn=16, heads=1, vocab=16, tokens=6)
EMBED = "[[16, 4], [2, 3], [], [], []]"  # the token table: 16 x 4 = 64
NORM = "[[2, 3, 4], [], [4], [4], [], []]"  # weight and bias: 8
FC1 = "[[16], [6, 4], [4, 16], [], []]"  # 4 x 16 + 16 = 80
FC2 = "[[4], [6, 16], [16, 4], [], []]"  # 16 x 4 + 4 = 68
HEAD = "[[6, 4], [4, 16]]"  # the LM head, no bias: 4 x 16 = 64


def _two_layer_model() -> tuple[ExecGraph, LayerMap]:
    """Embedding, 2 layers (norm, FC1, FC2, residual add), LM head on one thread, and the
    forward layer group the layer search would report: each layer's CPU ops. FC2 is recorded
    as on a GPU: a span over the one ``cudaLaunchKernel`` it made, a task the search leaves
    out of the blocks."""
    b = GraphBuilder()
    th = b.thread(1)
    dims = (EMBED, NORM, FC1, FC2, HEAD)
    task_dims = [0]
    spans: list[tuple[int, int]] = []
    blocks = []
    b.task(th, "aten::embedding", 10)
    for _ in range(2):
        norm = b.task(th, "aten::layer_norm", 10)
        fc1 = b.task(th, "aten::addmm", 10)
        launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
        b.annotate("aten::addmm", th, launch, launch, kind=AnnotationKind.USER)
        spans.append((launch, 3))
        add = b.task(th, "aten::add", 10)
        task_dims += [1, 2, -1, -1]
        blocks.append(np.array([norm, fc1, add], dtype=np.int64))
    b.task(th, "aten::mm", 10)
    task_dims.append(4)
    g = b.build()
    g = g.replace(
        dims=dims,
        task_dims_idx=np.array(task_dims, dtype=np.int32),
        annotations=g.annotations.replace(dims_idx=np.array([d for _, d in spans], np.int32)),
    )
    group = Group(th, tuple(blocks), "layer", "forward", 0)
    return g, LayerMap((group,), 2, 1, "by hand")


def test_an_ffn_as_wide_as_the_vocabulary_is_a_layers_when_the_layers_are_known() -> None:
    """By hand: outside the layers the table and the head, 64 + 64 = 128; each layer 8 + 80 +
    68 = 156, 312 for two; 440 in all. Layers 2 -> 4 (``layers_ratio`` 2): 128 + 2 x 312 =
    752, x 752/440. FFN 16 -> 32 (vocabulary kept): a layer holds 8 + (4 x 32 + 32) +
    (32 x 4 + 4) = 300, 128 + 600 = 728, x 728/440.

    Told apart by the vocabulary instead (no layer map): FC1 and FC2 read a 16, so only the
    norms (16) are a layer's: (424 + 2 x 16) / 440 = 456/440, and FFN 16 -> 32 keeps the 16s
    as the vocabulary: x 1. Taking FC2 as a layer's only if its first task (the launch) were in
    a block: (128 + 136 + 2 x 176) / 440 = 616/440."""
    g, lm = _two_layer_model()
    wide = Dims(microbatch_size=2, seq=3, hidden=4, ffn=32, heads=1, vocab=16, tokens=6)
    assert resident_ratio(g, DIMS, DIMS, 2.0, lm) == 752 / 440
    assert resident_ratio(g, DIMS, wide, 1.0, lm) == 728 / 440
    # without layers found, the vocabulary test (which takes the FFN for the model's own)
    no_forward = LayerMap((), 0, 1, "no repeated layers found")
    for layers in (None, no_forward):
        assert resident_ratio(g, DIMS, DIMS, 2.0, layers) == 456 / 440
        assert resident_ratio(g, DIMS, wide, 1.0, layers) == 1.0
    # the launch FC2 consists of lies between its layer's first and last task: inside
    inside = forward_layer_spans(g, lm)
    assert inside is not None
    assert np.flatnonzero(inside).tolist() == [1, 2, 3, 4, 5, 6, 7, 8]


# the recordings' models by hand (tests/data/*/README.md; the bundled GPT's modules): outside
# the layers the token table (vocab x h), the position table (seq x h), the final norm (2h) and
# the LM head (h x vocab, no bias); a layer holds two norms (4h), QKV (h x 3h + 3h), the
# projection (h x h + h), FC1 (h x f + f), FC2 (f x h + h).
def _params(layers: int, vocab: int, seq: int, h: int, f: int) -> int:
    outside = vocab * h + seq * h + 2 * h + h * vocab
    layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
    return outside + layers * layer


def test_the_recorded_gpt_whose_ffn_is_its_vocabulary() -> None:
    """``memory_gpt_cpu``: vocabulary 256, sequence 32, hidden 64, FFN 4 x 64 = 256, 2 layers:
    34,944 outside the layers, 49,984 per layer, 134,912 in all; 4 layers hold 234,880
    (x 1.741, the gradient all-reduces' figure: the same parameters)."""
    assert (_params(2, 256, 32, 64, 256), _params(4, 256, 32, 64, 256)) == (134_912, 234_880)
    w, _ = build_workload([DATA / "memory_gpt_cpu" / "base"])
    base = detect_baseline(w)
    dims = base.dims()
    for g, lm in zip(w.graphs, base.layer_maps, strict=True):
        assert resident_ratio(g, dims, dims, 2.0, lm) == 234_880 / 134_912
    edits = estimate(w, [parse_scenario(["layers=4"])]).to_dict()["rows"][1]["edits"]
    detail = {e["edit"]: e["detail"] for e in edits}
    assert detail["resident memory"] == "parameters x1.741, x1.741"
    assert detail["communication re-sized"].startswith("gradient bytes x1.741,")


@pytest.mark.parametrize(("layers", "hidden", "ffn"), [(8, 1024, 4096), (4, 2048, 8192),
                                                       (4, 1024, 8192)])  # fmt: skip
def test_the_recorded_gpu_gpt_whose_products_are_launches(layers: int, hidden: int, ffn: int):
    """``memory_gpt_h200``: vocabulary 8192, sequence 512, hidden 1024, FFN 4096, 4 layers
    (67,688,448 parameters). Its ``addmm`` spans hold only their kernel launches, which the
    layer search leaves out of its blocks; they are a layer's all the same. Hidden 2048 takes
    the FFN to 8192, the vocabulary's size."""
    w, _ = build_workload([DATA / "memory_gpt_h200" / "base"])
    base = detect_baseline(w)
    old = base.dims()
    changes = {"hidden": hidden, "ffn": ffn}
    new = Dims(**{**{k: getattr(old, k) for k in ("microbatch_size", "seq", "heads", "vocab",
                                                    "tokens")}, **changes})  # fmt: skip
    (g,), (lm,) = w.graphs, base.layer_maps
    want = _params(layers, 8192, 512, hidden, ffn) / _params(4, 8192, 512, 1024, 4096)
    assert resident_ratio(g, old, new, layers / 4, lm) == pytest.approx(want, rel=1e-12)
