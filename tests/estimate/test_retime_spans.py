"""``retime_spans``: which span owns each intra-thread gap, and by how much it scales.

Every case uses one op, ``aten::gelu`` on ``[3, 3]`` (work 9, the number of input elements),
and sizes where 3 is the token count, the FFN and the vocabulary at once: tokens 3 -> 3,
hidden 2 -> 4, FFN 3 -> 6, vocabulary 3 -> 9. Mapped by hand (module docstring of
:mod:`lumos.estimate.shapes`):

- outside the layers: the leading 3 is tokens (kept), the last is feature-like, where the
  vocabulary wins: ``[3, 9]``, work 27, ratio 3;
- inside a layer: the last 3 is the FFN: ``[3, 6]``, work 18, ratio 2;
- an optimizer op (its tensor a parameter, every dimension feature-like, the FFN first):
  ``[6, 6]``, work 36, ratio 4.

With no fitted line and a floor of 0 a span's time scales by the work ratio.
"""

from __future__ import annotations

import numpy as np

from lumos.estimate.shapes import Dims, ShapeModel, retime_spans
from lumos.graph.model import AnnotationKind, ExecGraph
from lumos.graph.synthetic import GraphBuilder

OLD = Dims(hidden=2, ffn=3, vocab=3, tokens=3)
NEW = Dims(hidden=4, ffn=6, vocab=9, tokens=3)
GELU = "[[3, 3]]"
USER = AnnotationKind.USER


def _with_dims(g: ExecGraph, span_dims: list[int], task_dims: list[int] | None) -> ExecGraph:
    return g.replace(
        dims=(GELU,),
        task_dims_idx=None if task_dims is None else np.array(task_dims, dtype=np.int32),
        annotations=g.annotations.replace(dims_idx=np.array(span_dims, dtype=np.int32)),
    )


def _nested() -> tuple[ExecGraph, np.ndarray, np.ndarray, np.ndarray]:
    """Thread ``th`` (processor 0): tasks at 0, 20, 40, 60, 80, 200, 300 (10 ns each), so the
    gaps' midpoints ``(src start + src dur + dst start) // 2`` are 15, 35, 55, 75, 145, 255;
    delays 100, 7, 5, 11, 13, 17. Spans (USER, shapes 0):

    - A ``[16, 116)``, first task -1: outside (though task 0 is in a layer and a parameter
      op: a span without a first task reads neither), ratio 3;
    - B ``[30, 70)``, first task 1 (in a layer): ratio 2;
    - C ``[32, 55)``, first task 0 (a parameter op): ratio 4;
    - E ``[240, 260)``, first task 5 (in a layer, ratio 2) but kept;
    - a STEP annotation with shapes over everything, and a USER span ``[140, 150)`` without
      shapes: neither owns a gap.

    Gap 15 is before every span (kept, 100); 35 is in C (7 x 4 = 28); 55 is past C (which
    ends there), in B (5 x 2 = 10); 75 is past C and B, in A (11 x 3 = 33); 145 is past all three (13, kept);
    255 is in the kept E (17). A stream (processor 1) has a gap at 15 too (19, not
    intra-thread: kept); thread 2 has a gap at 15 (delay 9) in its own span G ``[10, 30)``,
    first task on no layer: 9 x 3 = 27. Four gaps change."""
    b = GraphBuilder()
    th, st, th2 = b.thread(1), b.stream(7), b.thread(2)
    for ts, gap in ((0, 0), (20, 100), (40, 7), (60, 5), (80, 11), (200, 13), (300, 17)):
        b.task(th, "aten::gelu", 10, ts_ns=ts, gap_ns=gap)
    b.task(st, "kernel", 10, ts_ns=0)
    b.task(st, "kernel", 10, ts_ns=20, gap_ns=19)
    u0 = b.task(th2, "aten::gelu", 10, ts_ns=0)
    b.task(th2, "aten::gelu", 10, ts_ns=20, gap_ns=9)
    b.annotate("aten::gelu", th, -1, -1, kind=USER, ts_ns=16, dur_ns=100)  # A
    b.annotate("aten::gelu", th, 1, 1, kind=USER, ts_ns=30, dur_ns=40)  # B
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=32, dur_ns=23)  # C
    b.annotate("aten::gelu", th, 5, 5, kind=USER, ts_ns=240, dur_ns=20)  # E, kept
    b.annotate("step", th, 0, 6, kind=AnnotationKind.STEP, ts_ns=0, dur_ns=1000)
    b.annotate("aten::gelu", th, 4, 4, kind=USER, ts_ns=140, dur_ns=10)  # no shapes
    b.annotate("aten::gelu", th2, u0, u0, kind=USER, ts_ns=10, dur_ns=20)  # G
    g = _with_dims(b.build(), [0, 0, 0, 0, 0, -1, 0], [-1] * 11)
    layer = np.array([0, 0, -1, -1, 0, 0, 0, -1, -1, -1, -1], dtype=np.int32)
    params = np.zeros(11, dtype=bool)
    params[0] = True
    keep = np.array([False, False, False, True, False, False, False])
    return g, layer, params, keep


def test_each_gap_scales_like_the_innermost_span_around_its_middle():
    g, layer, params, keep = _nested()
    before = g.edges.delay_ns.copy()
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(), layer, params, keep)
    assert delay.tolist() == [100, 28, 10, 33, 13, 17, 19, 27]
    assert changed == 4
    assert g.edges.delay_ns.tolist() == before.tolist()  # the graph's own delays untouched


def test_without_parameters_or_kept_spans_a_span_reads_its_first_task_s_layer():
    """The same graph without ``params`` and ``keep``: C (first task 0, in a layer) is
    inside, ratio 2 (7 -> 14); E (first task 5, in a layer) scales its gap by 2 (17 -> 34);
    A still has no first task (outside, 3). Five gaps change."""
    g, layer, _, _ = _nested()
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(), layer)
    assert delay.tolist() == [100, 14, 10, 33, 13, 34, 19, 27]
    assert changed == 5


def test_spans_starting_together_nest_the_longer_outside():
    """P ``[15, 115)`` (first task 0, on no layer: ratio 3) and Q ``[15, 35)`` (first task 1,
    in a layer: ratio 2) start together. Gaps at 15 (tasks at 0 and 20, 10 ns: delay 5), the
    very start of both, and at 45 (tasks at 20 and 60: delay 7): the first is in Q, the inner
    one (5 x 2 = 10), the second past Q, in P (7 x 3 = 21)."""
    b = GraphBuilder()
    th = b.thread(1)
    for ts, gap in ((0, 0), (20, 5), (60, 7)):
        b.task(th, "aten::gelu", 10, ts_ns=ts, gap_ns=gap)
    b.annotate("aten::gelu", th, 1, 1, kind=USER, ts_ns=15, dur_ns=20)  # Q, recorded first
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=15, dur_ns=100)  # P
    g = _with_dims(b.build(), [0, 0], [-1, -1, -1])
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(), np.array([-1, 0, 0], np.int32))
    assert delay.tolist() == [10, 21]
    assert changed == 2


def test_a_span_keeps_its_dispatch_floor_and_delays_round_to_nearest():
    """Floor 10 ns, span ``[10, 50)`` of 40 ns outside the layers (work ratio 3): its new time
    is 10 + 30 x 3 = 100 ns, ratio 2.5; gaps of 7 and 5 ns in it become 17.5 -> 18 and
    12.5 -> 12 (to the nearest, ties to even)."""
    b = GraphBuilder()
    th = b.thread(1)
    for ts, gap in ((0, 0), (20, 7), (30, 5)):
        b.task(th, "aten::gelu", 5, ts_ns=ts, gap_ns=gap)
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=10, dur_ns=40)
    g = _with_dims(b.build(), [0], [-1, -1, -1])
    layer = np.full(3, -1, np.int32)
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(floor_ns=10.0), layer)
    assert delay.tolist() == [18, 12]
    assert changed == 2


def test_nothing_to_scale_leaves_every_delay():
    """No intra-thread gap (one task per thread), no shapes at all, or no USER span with
    shapes and a duration (a zero-length one, one without shapes): delays as recorded, 0
    changed. A 1 ns span in a layer around the gap's middle does scale it (6 x 2)."""
    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "aten::gelu", 10)
    b.task(b.thread(2), "aten::gelu", 10)
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=0, dur_ns=50)
    g = _with_dims(b.build(), [0], [-1, -1])
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(), np.zeros(2, np.int32))
    assert delay.tolist() == [] and changed == 0

    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "aten::gelu", 10, ts_ns=0)
    b.task(th, "aten::gelu", 10, ts_ns=20, gap_ns=6)
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=0, dur_ns=50)
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=12, dur_ns=0)
    b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=15, dur_ns=1)
    layer = np.zeros(2, np.int32)
    g = b.build()
    no_shapes = _with_dims(g, [0, 0, 0], None)
    assert [x.tolist() if hasattr(x, "tolist") else x for x in
            retime_spans(no_shapes, OLD, NEW, ShapeModel(), layer)] == [[6], 0]  # fmt: skip
    unusable = _with_dims(g, [-1, 0, -1], [-1, -1])
    delay, changed = retime_spans(unusable, OLD, NEW, ShapeModel(), layer)
    assert delay.tolist() == [6] and changed == 0
    usable = _with_dims(g, [-1, -1, 0], [-1, -1])  # the 1 ns span at the gap's middle, 15
    delay, changed = retime_spans(usable, OLD, NEW, ShapeModel(), layer)
    assert delay.tolist() == [12] and changed == 1


def test_a_gap_past_any_depth_of_ended_spans_scales_like_the_span_that_holds_it():
    """Tasks at 0 and 1000 (10 ns each): one gap, midpoint (0 + 10 + 1000) // 2 = 505, delay
    10. Span A ``[0, 2000)`` (no first task: outside the layers, ratio 3) holds it; inside A,
    66 spans ``[1 + i, 400 - i)`` nest (first task 0, in a layer: ratio 2) and all end before
    the gap. The gap's owner is A however deep the nesting: 10 x 3 = 30 (a walk up the span
    tree cut at 64 levels left it in an inner span: 20)."""
    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "aten::gelu", 10, ts_ns=0)
    b.task(th, "aten::gelu", 10, ts_ns=1000, gap_ns=10)
    b.annotate("aten::gelu", th, -1, -1, kind=USER, ts_ns=0, dur_ns=2000)  # A
    for i in range(66):
        b.annotate("aten::gelu", th, 0, 0, kind=USER, ts_ns=1 + i, dur_ns=399 - 2 * i)
    g = _with_dims(b.build(), [0] * 67, [-1, -1])
    delay, changed = retime_spans(g, OLD, NEW, ShapeModel(), np.array([0, -1], np.int32))
    assert delay.tolist() == [30]
    assert changed == 1
