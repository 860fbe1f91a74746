"""``--scale`` by the name of a span (:func:`lumos.graph.edits.scale_by_name`): which spans
count as CPU-only, and exactly what scaling one re-times.

A hand-built graph: thread 1 runs ``aten::a`` (0-100 ns) and, 50 ns later, ``aten::b``
(150-250 ns); thread 2 runs ``aten::c`` (300-400 ns) and a launch call (400-410 ns). Spans
(user annotations): ``inner`` on thread 1 over a..b (0-250 ns); ``outer`` on thread 1 from a to
c on thread 2 (a span that ends on another processor); ``launches`` on thread 2 over c and the
launch call.
"""

from __future__ import annotations

import pytest

from lumos.errors import ConfigError
from lumos.graph.edits import ScaleRecord, scale_by_name
from lumos.graph.model import AnnotationKind, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder


def _graph() -> ExecGraph:
    b = GraphBuilder()
    th1, th2 = b.thread(1), b.thread(2)
    a = b.task(th1, "aten::a", 100, ts_ns=0)
    bb = b.task(th1, "aten::b", 100, gap_ns=50, ts_ns=150)
    c = b.task(th2, "aten::c", 100, ts_ns=300)
    launch = b.task(th2, "cudaLaunchKernel", 10, TaskKind.RUNTIME, ts_ns=400)
    user = AnnotationKind.USER
    b.annotate("inner", th1, a, bb, kind=user, ts_ns=0, dur_ns=250)
    b.annotate("outer", th1, a, c, kind=user, ts_ns=0, dur_ns=400)
    b.annotate("launches", th2, c, launch, kind=user, ts_ns=300, dur_ns=110)
    return b.build().validate()


def test_a_cpu_only_span_scales_its_tasks_and_the_gap_inside_it():
    """``inner`` x2: a and b take 200 ns, the 50 ns gap between them (inside the span) 100 ns;
    thread 2 is untouched."""
    g = _graph()
    out, records = scale_by_name(g, [("^inner$", 2.0)])
    assert records == (ScaleRecord("^inner$", 2.0, tasks=2, spans=1, delays=1),)
    assert out.tasks.dur_ns.tolist() == [200, 200, 100, 10]
    assert out.edges.delay_ns.tolist() == [100, 0]  # a -> b; c -> launch


@pytest.mark.parametrize("name", ["outer", "launches"])
def test_spans_that_end_elsewhere_or_launch_are_not_cpu_only(name):
    """``outer`` ends on another thread (what it covers there is unknown) and ``launches``
    holds a launch call: neither is a CPU-only span, so a pattern naming only it matches
    nothing (a :class:`ConfigError`, not an unchanged run) and one naming it with ``inner``
    re-times what ``inner`` alone does."""
    g = _graph()
    with pytest.raises(ConfigError, match=rf"--scale '\^{name}\$' matches no task of rank 0"):
        scale_by_name(g, [(f"^{name}$", 2.0)])
    out, records = scale_by_name(g, [(f"^(inner|{name})$", 2.0)])
    assert records == (ScaleRecord(f"^(inner|{name})$", 2.0, tasks=2, spans=1, delays=1),)
    assert out.tasks.dur_ns.tolist() == [200, 200, 100, 10]
