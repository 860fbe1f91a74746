"""The forward's parameters (:func:`lumos.estimate.params.forward_params`), counted by hand
from the recordings' model configurations, and the edits that scale with them agreeing.

The bundled GPT (``lumos.examples.gpt``; tests/data/*/README.md give each recording's flags):
outside the layers the token table (vocab x h), the position table (seq x h), the final norm
(2h) and the LM head (h x vocab, no bias); a layer holds two norms (4h), QKV (h x 3h + 3h),
the projection (h x h + h), FC1 (h x f + f) and FC2 (f x h + h)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.params import ForwardParams, forward_params
from lumos.estimate.reshape import reshape_workload
from lumos.estimate.shapes import Dims
from lumos.replay import build_workload
from lumos.synth.fit import fit_rank

DATA = Path(__file__).parents[1] / "data"


def _outside(vocab: int, seq: int, h: int) -> int:
    return vocab * h + seq * h + 2 * h + h * vocab


def _layer(h: int, f: int) -> int:
    return 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)


def _details(workload, changes: list[str]) -> list[dict[str, str]]:
    rows = estimate(workload, [parse_scenario([c]) for c in changes]).to_dict()["rows"][1:]
    return [{e["edit"]: e["detail"] for e in row["edits"]} for row in rows]


def test_the_hand_counts() -> None:
    # H200: vocabulary 8192, sequence 512, hidden 1024, FFN 4096, 4 layers
    assert (_outside(8192, 512, 1024), _layer(1024, 4096)) == (17_303_552, 12_596_224)
    assert _outside(8192, 512, 1024) + 4 * _layer(1024, 4096) == 67_688_448
    # hidden 2048 (FFN follows: 8192, the vocabulary's size); FFN 8192 alone
    assert (_outside(8192, 512, 2048), _layer(2048, 8192)) == (34_607_104, 50_358_272)
    assert _layer(1024, 8192) == 20_988_928
    # CPU DDP pair: vocabulary 512, sequence 32, hidden 128, FFN 512 (== vocabulary), 4 layers
    assert (_outside(512, 32, 128), _layer(128, 512)) == (135_424, 198_272)


@pytest.mark.parametrize(
    ("scenario", "layers", "hidden", "ffn", "figure"),
    [("layers=8", 8, 1024, 4096, "1.744"), ("hidden=2048", 4, 2048, 8192, "3.487"),
     ("ffn=8192", 4, 1024, 8192, "1.496"), ("hidden=512", 4, 512, 2048, "0.314")],
)  # fmt: skip
def test_the_gpu_gpt_whose_products_are_launches(scenario, layers, hidden, ffn, figure):
    """``memory_gpt_h200`` (one H200). Every ``aten::addmm`` of its forward is a span whose
    only task is its kernel launch, which the layer search leaves out of its blocks: a
    layer's weights all the same. Its baseline finds no vocabulary; the 8192-row tables are
    the vocabulary, not 2 x FFN. By hand: layers 4 -> 8 x 118,073,344 / 67,688,448 = 1.744;
    hidden 2048 x 236,040,192 / 67,688,448 = 3.487; FFN 8192 x 101,259,264 / 67,688,448 =
    1.496; hidden 512 (FFN 2048) x 0.314."""
    w, _ = build_workload([DATA / "memory_gpt_h200" / "base"])
    base = detect_baseline(w)
    old = base.dims()
    assert old.vocab == -1  # filled in from the token table
    new = Dims(microbatch_size=8, seq=512, hidden=hidden, ffn=ffn, heads=16, tokens=4096)
    (g,), (lm,) = w.graphs, base.layer_maps
    got = forward_params(g, lm, old, new)
    want = ForwardParams(_outside(8192, 512, 1024), 4 * _layer(1024, 4096),
                         _outside(8192, 512, hidden), 4 * _layer(hidden, ffn))  # fmt: skip
    assert got == want
    total = _outside(8192, 512, hidden) + layers * _layer(hidden, ffn)
    assert got.ratio(layers / 4) == total / 67_688_448
    (detail,) = _details(w, [scenario])
    # the gradients' figure and resident memory's are one count
    assert detail["communication re-sized"].startswith(f"gradient bytes x{figure},")
    assert detail["resident memory"] == f"parameters x{figure}"
    # a synthesized job grows its gradients with the same split
    assert fit_rank(g).params == (want.outside_old, want.inside_old)


def test_the_cpu_ddp_pair_whose_ffn_is_its_vocabulary() -> None:
    """``whatif_pairs/ddp_layers_x2`` (2 CPU ranks, gloo DDP): 135,424 outside the layers,
    198,272 per layer, 928,512 in all; 8 layers 1,721,600 (x 1.854), the bytes its gradient
    all-reduces grow by. FC1 and FC2 read a 512, the vocabulary's size, and are a layer's
    all the same."""
    w, _ = build_workload([DATA / "whatif_pairs" / "ddp_layers_x2"])
    base = detect_baseline(w)
    want = ForwardParams(135_424, 4 * 198_272, 135_424, 4 * 198_272)
    for g, lm in zip(w.graphs, base.layer_maps, strict=True):
        assert forward_params(g, lm, base.dims()) == want
        assert forward_params(g, lm, base.dims()).ratio(2.0) == 1_721_600 / 928_512
        assert fit_rank(g).params == (135_424, 793_088)
    _, edits = reshape_workload(w, base, {"layers": 8})
    detail = {e.name: e.detail for e in edits}
    assert detail["communication re-sized"].startswith("gradient bytes x1.854,")
