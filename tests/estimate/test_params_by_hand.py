"""The forward's parameters (``lumos.estimate.params.forward_params``) on one hand-made rank whose
every op is a case of the rules: which ops count, which are the model's own and which a layer's,
and how each weight maps into a new configuration.

The rank, one thread, #1-#14 10 ns apart from 0 ns, where step 0 starts (``#``: task index):

==  ==================  =============================  =======================================
#   op                  Input Dims                     counts
==  ==================  =============================  =======================================
0   cudaLaunchKernel    (an ``aten::mm`` span over it  64, inside by shape, only when no step is
    at -1000 ns         with [6, 8], [8, 8])           marked (before step 0)
1   aten::embedding     [100, 8], [2, 3]               token table, 800 (outside)
2   aten::embedding     [3, 8], [2, 3]                 position table, 24 (outside by shape)
3   aten::layer_norm    [2, 3, 8], [], [8], [8]        16 (inside)
4   aten::addmm         [32], [6, 8], [8, 32]          8 x 32 + 32 = 288 (inside)
5   cudaLaunchKernel    (an ``aten::addmm`` span over  288 more, read off the span (inside)
                        it with #4's dims)
6   aten::mm            [6, 8], [8, 100]               LM head, 800 (outside: reads the vocab)
7   aten::mm            [6, 8], [8, 8]                 no: under an autograd (backward) span
8   aten::mm            [6, 8], [8, 8]                 no: under the optimizer's span
9   aten::mm            not JSON                       no
10  aten::mm            []                             no
11  aten::mm            [2, 3, 8]                      no: no 2-D input
12  aten::relu          [2, 3, 8]                      no: not a weight op
13  aten::mm            none recorded                  no
14  aten::mm            [6, 1], [1, 1]                 1 (inside)
15  aten::addmm         as #4, at 200 ns               288, only when no step is marked
==  ==================  =============================  =======================================

Step 0 is 0-200 ns, step 1 200-230 ns. Two more ``aten::addmm`` spans read nothing: one over no
task, one without dims. The old configuration: micro-batch 2, sequence 3 (6 tokens), hidden
8, FFN 32; the vocabulary, 100, is the largest table's rows that are not the sequence. The new
one: hidden 16, FFN 64. Mapped by hand (:func:`lumos.estimate.shapes.map_dims`): token table
[100, 16] = 1600, position table [3, 16] = 48, norm 2 x 16 = 32, FC [16, 64] + 64 = 1088, LM
head [16, 100] = 1600, #0's [16, 16] = 256, #14 (no dimension is a model size) 1.
"""

from __future__ import annotations

import numpy as np

from lumos.estimate.layers import Group, LayerMap
from lumos.estimate.params import ForwardParams, forward_params
from lumos.estimate.shapes import Dims
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import ExecGraph
from lumos.graph.synthetic import GraphBuilder

OLD = Dims(microbatch_size=2, seq=3, hidden=8, ffn=32)
NEW = Dims(microbatch_size=2, seq=3, hidden=16, ffn=64)
DIMS = (
    "[[32], [6, 8], [8, 32], [], []]",
    "[[100, 8], [2, 3], [], [], []]",
    "[[3, 8], [2, 3], [], [], []]",
    "[[2, 3, 8], [], [8], [8], [], []]",
    "[[6, 8], [8, 100]]",
    "not JSON",
    "[]",
    "[[2, 3, 8]]",
    "[[6, 1], [1, 1]]",
    "[[6, 8], [8, 8]]",
)
OPS = [("cudaLaunchKernel", -1), ("aten::embedding", 1), ("aten::embedding", 2),
       ("aten::layer_norm", 3), ("aten::addmm", 0), ("cudaLaunchKernel", -1), ("aten::mm", 4),
       ("aten::mm", 9), ("aten::mm", 9), ("aten::mm", 5), ("aten::mm", 6), ("aten::mm", 7),
       ("aten::relu", 7), ("aten::mm", -1), ("aten::mm", 8), ("aten::addmm", 0)]  # fmt: skip


def rank(steps: bool = True, shapes: bool = True) -> ExecGraph:
    """The rank of the module docstring (without its step annotations, or its shapes)."""
    b = GraphBuilder()
    th = b.thread(1)
    for k, (name, _) in enumerate(OPS):
        b.task(th, name, 10, ts_ns=-1000 if k == 0 else 200 if k == 15 else 10 * (k - 1))
    user = AnnotationKind.USER
    b.annotate("aten::mm", th, 0, 0, kind=user, ts_ns=-1000, dur_ns=10)  # dims 9
    b.annotate("autograd::engine::evaluate_function: MmBackward0", th, 7, 7, kind=user, ts_ns=60)
    b.annotate("Optimizer.step#SGD.step", th, 8, 8, kind=user, ts_ns=70)
    b.annotate("aten::addmm", th, 5, 5, kind=user, ts_ns=40, dur_ns=10)  # dims 0
    b.annotate("aten::addmm", th, -1, -1, kind=user, ts_ns=40, dur_ns=10)  # dims 0, no task
    b.annotate("aten::addmm", th, 5, 5, kind=user, ts_ns=40, dur_ns=10)  # no dims
    if steps:
        b.annotate("ProfilerStep#0", th, 1, 14, ts_ns=0, dur_ns=200)
        b.annotate("ProfilerStep#1", th, 15, 15, ts_ns=200, dur_ns=30)
    g = b.build()
    if not shapes:
        return g.validate()
    ann = np.array([9, -1, -1, 0, 0, -1] + [-1] * (len(g.annotations) - 6), dtype=np.int32)
    task = np.array([d for _, d in OPS], dtype=np.int32)
    return g.replace(dims=DIMS, task_dims_idx=task,
                     annotations=g.annotations.replace(dims_idx=ann)).validate()  # fmt: skip


def blocks(phase: str, *tasks: list[int]) -> Group:
    return Group(0, tuple(np.array(t, dtype=np.int64) for t in tasks), "layer", phase, 0)


def test_without_recorded_shapes_the_forward_reads_no_parameters():
    g = rank(shapes=False)
    assert g.task_dims_idx is None
    assert forward_params(g, None, OLD, NEW) == ForwardParams(0, 0, 0, 0)


def test_by_shape_tables_and_vocabulary_wide_weights_are_the_model_s_own():
    """Outside: 800 + 24 + 800; inside: 16 + 288 + 288 + 1 (see the module docstring).
    Mapped: 1600 + 48 + 1600 and 32 + 1088 + 1088 + 1. Without a new configuration, or
    without the old one (the vocabulary is then the largest table's rows: 100 again),
    nothing is mapped."""
    g = rank()
    assert forward_params(g, None, OLD, NEW) == ForwardParams(1624, 593, 3248, 2209)
    assert forward_params(g, None, OLD) == ForwardParams(1624, 593, 1624, 593)
    assert forward_params(g, None) == ForwardParams(1624, 593, 1624, 593)


def test_without_a_marked_step_the_whole_run_is_read():
    """#0 and #15 count too: 64 + 288 more inside (256 + 1088 mapped)."""
    g = rank(steps=False)
    assert forward_params(g, None, OLD, NEW) == ForwardParams(1624, 945, 3248, 3553)


def test_with_forward_layer_blocks_a_weight_inside_one_is_a_layer_s():
    """A forward block over #2-#5: the position table (24, mapped 48), the norm, the FC and the
    span's FC are a layer's; the token table, the LM head and #14 (1) the model's own. A
    backward block over the LM head changes nothing; a map with only backward blocks falls
    back to shapes."""
    g = rank()
    lm = LayerMap((blocks("forward", [2, 3, 4, 5]), blocks("backward", [6])), 1, 1, "")
    assert forward_params(g, lm, OLD, NEW) == ForwardParams(1601, 616, 3201, 2256)
    only_back = LayerMap((blocks("backward", [2, 3, 4, 5]),), 1, 1, "")
    assert forward_params(g, only_back, OLD, NEW) == ForwardParams(1624, 593, 3248, 2209)


def test_without_a_vocabulary_no_dimension_reads_as_one():
    """No embedding, so no vocabulary: a [6, 1] x [1, 1] product (1 weight) is a layer's."""
    b = GraphBuilder()
    b.task(b.thread(1), "aten::mm", 10)
    g = b.build()
    g = g.replace(dims=("[[6, 1], [1, 1]]",), task_dims_idx=np.zeros(1, dtype=np.int32))
    assert forward_params(g.validate(), None, OLD, NEW) == ForwardParams(0, 1, 0, 1)


def test_an_ffn_as_wide_as_the_vocabulary_is_a_layer_s_only_by_the_layer_map():
    """FFN 100 = vocabulary 100 (given), one [6, 8] x [8, 100] product: by shape it reads the
    vocabulary, so it is the model's own and keeps its 100 (800 both ways); inside a forward
    layer block it is a layer's FC1, and FFN 200 makes it [8, 200] (1600)."""
    b = GraphBuilder()
    b.task(b.thread(1), "aten::mm", 10)
    g = b.build()
    g = g.replace(dims=("[[6, 8], [8, 100]]",), task_dims_idx=np.zeros(1, dtype=np.int32))
    g = g.validate()
    old = Dims(microbatch_size=2, seq=3, hidden=8, ffn=100, vocab=100)
    new = Dims(microbatch_size=2, seq=3, hidden=8, ffn=200, vocab=100)
    assert forward_params(g, None, old, new) == ForwardParams(800, 0, 800, 0)
    lm = LayerMap((blocks("forward", [0]),), 1, 1, "")
    assert forward_params(g, lm, old, new) == ForwardParams(0, 800, 0, 1600)


def test_without_a_marked_step_the_window_is_2_62_ns_either_side_of_0():
    """No step marked: the forward is whatever starts in [-2**62, 2**62) ns. Three
    ``aten::mm`` reading a [8, 8] weight (64 parameters each, inside by shape) start at
    -2**62 - 1, 0 and 2**62 ns: only the one at 0 counts (hand-made times, 146 years out)."""
    b = GraphBuilder()
    th = b.thread(1)
    for ts in (-(2**62) - 1, 0, 2**62):
        b.task(th, "aten::mm", 10, ts_ns=ts)
    g = b.build()
    g = g.replace(dims=("[[6, 8], [8, 8]]",), task_dims_idx=np.zeros(3, dtype=np.int32))
    assert forward_params(g.validate(), None, OLD) == ForwardParams(0, 64, 0, 64)
