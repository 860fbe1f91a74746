"""``detect_baseline``: every value it finds and every ``how`` it says, on hand-built jobs whose
shapes are chosen so that each branch of the shape reading shows, and on the recorded 4-stage
pipeline (``tests/data/pipeline_4_stages``, its README gives the configuration)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate.baseline import KEYS, detect_baseline
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

FOUR = Path(__file__).parents[1] / "data" / "pipeline_4_stages"

#: The 8 ops of one forward layer block (distinct names; the product first).
FWD = ("aten::mm", "aten::gelu", "aten::add", "aten::mul", "aten::sub", "aten::div",
       "aten::neg", "aten::exp")  # fmt: skip
NO_FFN = "no layer activation or product output wider than hidden"
NO_HEADS = "no attention tensor (b, heads, s, hidden / heads)"
LOGITS = "last dimension of the logits (log-softmax input)"


def job(shapes: dict[str, str], *, world_size: int = 1, module: str = "") -> Workload:
    """One rank, 2 marked steps; per step: an embedding, 2 forward blocks of :data:`FWD`, 2
    backward blocks of 8 ops, ``aten::_log_softmax`` and the loss. ``shapes`` gives an op name
    its recorded input shapes (the others have none); a ``module`` class wraps each forward block
    in an ``nn.Module: <module>_<i>`` span (``i`` = 0, 1 in each step)."""
    b = GraphBuilder(world_size=world_size)
    th = b.thread(1)
    clock = 0

    def op(name: str, dur: int) -> int:
        nonlocal clock
        t = b.task(th, name, dur, ts_ns=clock, gap_ns=1)
        clock += dur + 1
        return t

    for s in range(2):
        start = clock
        first = op("aten::embedding", 200)
        for i in range(2):
            at = clock
            ops = [op(name, 10) for name in FWD]
            if module:
                b.annotate(f"nn.Module: {module}_{i}", th, ops[0], ops[-1], kind=AnnotationKind.USER,
                           ts_ns=at, dur_ns=clock - at)  # fmt: skip
        for _ in range(2):
            for k in range(8):
                op(f"Op{k}Backward0", 20)
        op("aten::_log_softmax", 5)
        last = op("aten::nll_loss", 5)
        b.annotate(f"ProfilerStep#{s}", th, first, last, ts_ns=start, dur_ns=clock - start)
    g = b.build().validate()
    dims = tuple(dict.fromkeys(shapes.values()))
    idx = [dims.index(shapes[g.names[i]]) if g.names[i] in shapes else -1
           for i in g.tasks.name_idx.tolist()]  # fmt: skip
    return Workload((g.replace(dims=dims, task_dims_idx=np.array(idx, dtype=np.int32)),))


def test_decode_activations_of_one_token_are_b_s_hidden_not_flattened_tokens():
    """A decode step: the layers' activations are (b, s, hidden) = (4, 1, 64) and the product
    ``[4, 64] @ [64, 256]`` has 4 rows. The rows equal b, but also b x s (s = 1), so the
    activations are kept as (b, s, hidden): hidden 64, the most common last dimension (6 ops
    x 2 blocks x 2 steps = 24 of them), b 4, s 1, tokens 4. The other widths 96, 128, 160
    and 192 (= 3 x hidden, a fused QKV, left out): the FFN is the widest of the rest, 160
    (the product's 256 is not read on this path). The 4-D tensor (4, 2, 1, 32) has 2 x 32 =
    hidden: 2 heads; (4, 4, 1, 8) does not (4 x 8 != 64). The logits (4, 1, 1000) give the
    vocabulary, their last dimension. Layers: 2 forward and 2 backward blocks per step."""
    base = detect_baseline(job({
        "aten::mm": "[[4, 64], [64, 256]]",
        "aten::gelu": "[[4, 1, 64], [4, 1, 192]]",
        "aten::add": "[[4, 1, 64], [4, 1, 96]]",
        "aten::mul": "[[4, 1, 64], [4, 1, 128], [4, 1, 160]]",
        "aten::sub": "[[4, 1, 64]]",
        "aten::div": "[[4, 2, 1, 32], [4, 4, 1, 8]]",
        "aten::neg": "[[4, 1, 64]]",
        "aten::exp": "[[4, 1, 64]]",
        "aten::_log_softmax": "[[4, 1, 1000], [], []]",
    }))  # fmt: skip
    assert base.values == {"hidden": 64, "microbatch_size": 4, "seq": 1, "tokens": 4,
                           "ffn": 160, "heads": 2, "vocab": 1000, "pp": 1, "layers": 2,
                           "microbatches": 1}  # fmt: skip
    lead = "activations (b, s, hidden) = [4, 1]+[64]"
    assert base.how == {
        "hidden": "last dimension of 24 layer activations",
        "microbatch_size": lead,
        "seq": lead,
        "tokens": "b x s of the activations",
        "ffn": "widest other layer activation",
        "heads": "attention tensors (b, heads, s, hidden/heads)",
        "vocab": LOGITS,
        "pp": "no point-to-point messages",
        "dp": "the trace states no world size or process group",
        "layers": "2 repeated blocks per rank x pp 1",
        "microbatches": "no micro-batch blocks",
    }
    assert base.withheld == ()


def test_activations_without_products_or_logits_give_b_s_hidden_alone():
    """Only (b, s, hidden) = (2, 8, 32) activations: hidden 32 (7 ops x 4 blocks = 28 of
    them), b 2, s 8, tokens 16; no FFN, heads or vocabulary, each ``how`` saying why."""
    base = detect_baseline(job({n: "[[2, 8, 32]]" for n in FWD[1:]}))
    assert base.values == {"hidden": 32, "microbatch_size": 2, "seq": 8, "tokens": 16,
                           "pp": 1, "layers": 2, "microbatches": 1}  # fmt: skip
    assert (base.how["hidden"], base.how["seq"], base.how["ffn"], base.how["heads"]) == (
        "last dimension of 28 layer activations", "activations (b, s, hidden) = [2, 8]+[32]",
        NO_FFN, NO_HEADS)  # fmt: skip
    assert "vocab" not in base.how


def test_3d_tensors_led_by_the_product_rows_are_flattened_tokens_not_b_s_hidden():
    """vLLM-style attention tensors (tokens, heads, head width) = (6, 2, 32) and products
    ``[6, 64] @ [64, 128]``: the tensors' first dimension alone is the products' row count
    (6 != 6 x 2), so they are not (b, s, hidden); the products give 6 tokens (their rows, 1
    product per block x 2 blocks x 2 steps = 4 of them),
    hidden 64 (their inner dimension) and the FFN 128 (their widest output); no 4-D tensor, so
    the sequence and micro-batch size are not told apart."""
    base = detect_baseline(job({
        **{n: "[[6, 2, 32]]" for n in FWD[2:]},
        "aten::mm": "[[6, 64], [64, 128]]",
    }))  # fmt: skip
    flat = ("activations flattened to (tokens, width), 6 tokens: the sequence and the "
            "micro-batch size are not shown apart")  # fmt: skip
    assert base.values == {"tokens": 6, "hidden": 64, "ffn": 128, "pp": 1, "layers": 2,
                           "microbatches": 1}  # fmt: skip
    assert base.how == {
        "tokens": "rows of 4 forward matrix products (tokens, K)",
        "hidden": "inner dimension of 4 forward matrix products",
        "ffn": "widest output (not 3 x hidden) of a product from hidden",
        "seq": flat,
        "microbatch_size": flat,
        "heads": NO_HEADS,
        "pp": "no point-to-point messages",
        "dp": "the trace states no world size or process group",
        "layers": "2 repeated blocks per rank x pp 1",
        "microbatches": "no micro-batch blocks",
    }


def test_the_recorded_four_stage_pipeline_gives_its_whole_configuration():
    """The README's configuration: 8 layers (2 per stage) on pp 4, hidden 64, 2 heads,
    sequence 16, vocabulary 128, batch 4 in 2 micro-batches (so micro-batch size 2, 32 tokens),
    FFN 4 x hidden = 256; world size 4 over pp 4 leaves dp 1. Two micro-batch blocks, exactly
    the smallest count that is more than one, are named as micro-batch blocks. The 320
    activations: 10 (b, s, hidden) tensors per layer block x 2 layers x 2 micro-batches x 2
    steps x 4 ranks."""
    w, _ = build_workload([str(FOUR)], workers=1)
    base = detect_baseline(w)
    assert base.values == {"hidden": 64, "microbatch_size": 2, "seq": 16, "tokens": 32,
                           "ffn": 256, "heads": 2, "vocab": 128, "pp": 4, "dp": 1, "layers": 8,
                           "microbatches": 2}  # fmt: skip
    lead = "activations (b, s, hidden) = [2, 16]+[64]"
    assert base.how == {
        "hidden": "last dimension of 320 layer activations",
        "microbatch_size": lead,
        "seq": lead,
        "tokens": "b x s of the activations",
        "ffn": "widest other layer activation",
        "heads": "attention tensors (b, heads, s, hidden/heads)",
        "vocab": LOGITS,
        "pp": "4 ranks exchange point-to-point messages",
        "dp": "world size 4 / pp 4",
        "layers": "2, 2, 2, 2 repeated blocks per rank x pp 4",
        "microbatches": "micro-batch blocks (one send/receive each) per step",
    }


#: The (b, s, hidden) = (2, 8, 32) activations of :func:`test_activations_without_products_or_logits_give_b_s_hidden_alone`.
ACTS = {n: "[[2, 8, 32]]" for n in FWD[1:]}


def test_unknown_baseline_keys_are_refused_naming_the_first_in_order_and_the_known_ones():
    """Two unknown keys: the error names the first in sorted order (``alpha`` before
    ``zeta``), then lists :data:`KEYS` in their order, comma-separated."""
    with pytest.raises(ConfigError) as err:
        detect_baseline(job(ACTS), {"zeta": 1, "alpha": 2, "seq": 4})
    assert str(err.value) == (
        "--baseline alpha=...: unknown key (known: layers, hidden, ffn, heads, seq, "
        "microbatch_size, tokens, microbatches, vocab, pp, dp)"
    )
    assert len(KEYS) == 11


def test_given_values_override_found_ones_and_the_tokens_follow_from_them():
    """``seq=4`` and ``microbatch_size=3`` given over the found 8 and 2: both are taken and
    said to be given; ``tokens`` (found 16 = 2 x 8) is derived again from the given two,
    3 x 4 = 12; the found hidden (32) stays."""
    base = detect_baseline(job(ACTS), {"seq": 4, "microbatch_size": 3})
    assert (base.values["seq"], base.values["microbatch_size"], base.values["tokens"]) == (4, 3, 12)
    assert (base.how["seq"], base.how["microbatch_size"], base.how["tokens"]) == (
        "given (--baseline)", "given (--baseline)", "microbatch_size x seq")  # fmt: skip
    assert base.values["hidden"] == 32


def test_a_given_pp_divides_the_world_size_for_the_recorded_dp():
    """World size 8, no point-to-point messages (so pp 1 found) and no process groups: with
    nothing given dp is 8 / 1 = 8; with ``pp=4`` given, dp is 8 / 4 = 2 and pp is 4 (given).
    The layer count still multiplies the found pp, 1: 2 blocks per rank x 1."""
    found = detect_baseline(job(ACTS, world_size=8))
    assert (found.values["pp"], found.values["dp"]) == (1, 8)
    assert found.how["dp"] == "world size 8 / pp 1"
    base = detect_baseline(job(ACTS, world_size=8), {"pp": 4})
    assert (base.values["pp"], base.how["pp"]) == (4, "given (--baseline)")
    assert (base.values["dp"], base.how["dp"]) == (2, "world size 8 / pp 4")
    assert (base.values["layers"], base.how["layers"]) == (2, "2 repeated blocks per rank x pp 1")


@pytest.mark.parametrize("cls", ["Block", "BlockX", "Odd(X"])
def test_layers_from_module_annotations_name_the_module_class_in_their_how(cls):
    """Each forward block wrapped in ``nn.Module: <cls>_0`` / ``<cls>_1``: the layer class
    is ``cls`` (2 instances), 2 forward calls per step, so the ``how`` reads "2 forward calls
    of nn.Module: <cls> per rank x pp 1": the map's "module annotations (nn.Module: <cls>)"
    less its prefix and closing parenthesis, the class name whole (one ending in ``X``, one
    holding an opening parenthesis: Kineto names are free text)."""
    base = detect_baseline(job(ACTS, module=cls))
    assert base.layer_maps[0].how == f"module annotations (nn.Module: {cls})"
    assert (base.values["layers"], base.how["layers"]) == (
        2, f"2 forward calls of nn.Module: {cls} per rank x pp 1")  # fmt: skip


def test_flattened_layers_read_heads_batch_and_sequence_from_their_attention_tensors():
    """The flattened layers of the vLLM-style test (products ``[6, 64] @ [64, 128]``, 3-D
    tensors (6, 2, 32) led by the 6 product rows), now with 4-D tensors on ``aten::gelu``:
    (2, 4, 3, 16) has b x s = 2 x 3 = 6 = tokens and heads x width = 4 x 16 = 64 = hidden, so
    it gives heads 4, micro-batch size 2 and sequence 3; (2, 2, 3, 16) fails the width test
    (2 x 16 = 32) and (1, 4, 3, 16) the token test (1 x 3 = 3), so neither counts. Tokens 6
    are already b x s: nothing is derived."""
    base = detect_baseline(job({
        **{n: "[[6, 2, 32]]" for n in FWD[2:]},
        "aten::gelu": "[[2, 4, 3, 16], [2, 2, 3, 16], [1, 4, 3, 16]]",
        "aten::mm": "[[6, 64], [64, 128]]",
    }))  # fmt: skip
    att = "attention tensors (b, heads, s, hidden/heads) = [2, 4, 3, 16]"
    assert base.values == {"tokens": 6, "hidden": 64, "ffn": 128, "heads": 4,
                           "microbatch_size": 2, "seq": 3, "pp": 1, "layers": 2,
                           "microbatches": 1}  # fmt: skip
    assert (base.how["heads"], base.how["microbatch_size"], base.how["seq"]) == (att, att, att)
    assert base.how["tokens"] == "rows of 4 forward matrix products (tokens, K)"


def test_only_flat_lists_of_integers_are_activation_shapes():
    """As the (b, s, hidden) = (2, 8, 32) job, but ``aten::exp`` also records a tensor list (a
    list of three shapes, which is no shape) and a scalar (``[]``) beside its (2, 8, 32): only
    the flat lists of integers count, so hidden is still read from 7 ops x 4 blocks = 28
    activations and every value is the plain job's."""
    base = detect_baseline(job({
        **{n: "[[2, 8, 32]]" for n in FWD[1:-1]},
        "aten::exp": "[[[2, 8, 32], [2, 8, 32], [2, 8, 32]], [], [2, 8, 32]]",
    }))  # fmt: skip
    assert base.values == {"hidden": 32, "microbatch_size": 2, "seq": 8, "tokens": 16,
                           "pp": 1, "layers": 2, "microbatches": 1}  # fmt: skip
    assert base.how["hidden"] == "last dimension of 28 layer activations"


def test_need_returns_a_found_value_and_names_the_flag_for_a_missing_or_withheld_one():
    """``need`` returns a positive value as is; a missing one (absent or <= 0) is a ConfigError
    quoting its evidence (``how``, else ``no evidence``) and ``--baseline key=N``; a value
    withheld with the declined layers also names ``--baseline layers=N``."""
    from lumos.estimate.baseline import Baseline

    base = Baseline(values={"hidden": 64, "ffn": 0}, how={"ffn": "no 3-D activation"},
                    withheld=("seq",))  # fmt: skip
    assert base.need("hidden") == 64
    messages = []
    for key in ("ffn", "vocab", "seq"):
        with pytest.raises(ConfigError) as err:
            base.need(key)
        messages.append(str(err.value))
    assert messages == [
        "the baseline's ffn could not be found in the trace (no 3-D activation); "
        "give --baseline ffn=N",
        "the baseline's vocab could not be found in the trace (no evidence); "
        "give --baseline vocab=N",
        "the baseline's seq could not be found in the trace (no evidence); give --baseline "
        "layers=N to accept the repeated blocks `lumos layers` lists, or --baseline seq=N",
    ]
