"""Invariants of the replay engine on random valid graphs (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.graph.model import ExecGraph, WaitKind
from lumos.sim import simulate

from .strategies import exec_graphs, launcher_of

SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(exec_graphs())
def test_schedule_respects_processors_edges_and_waits(g: ExecGraph) -> None:
    r = simulate(g)  # no deadlock
    s, e = r.start_ns, r.end_ns
    assert (s >= 0).all()
    assert (e - s == g.tasks.dur_ns).all()
    _, perm = g.processor_order()
    same = np.diff(g.tasks.processor_idx[perm]) == 0
    assert (s[perm[1:]][same] >= e[perm[:-1]][same]).all(), "two tasks at once on a processor"
    ed = g.edges
    assert (s[ed.dst] >= e[ed.src] + ed.delay_ns).all(), "a task started before a dependency"
    launcher = launcher_of(g)
    w = g.waits
    for task, kind, stream in zip(
        w.task_idx.tolist(), w.kind.tolist(), w.target_processor_idx.tolist(), strict=True
    ):
        if kind != WaitKind.STREAM:
            continue
        on = np.flatnonzero(g.tasks.processor_idx == stream)
        # kernels launched by earlier tasks of the same thread (or never launched) are waited for
        early = on[(launcher[on] < task)]
        assert (e[early] <= s[task]).all()


@SETTINGS
@given(exec_graphs())
def test_same_input_gives_byte_identical_output(g: ExecGraph) -> None:
    a = simulate(g).to_json(include_tasks=True)
    copy = g.replace(tasks=g.tasks.replace(dur_ns=g.tasks.dur_ns.copy()))
    assert simulate(copy).to_json(include_tasks=True) == a


@SETTINGS
@given(exec_graphs(with_waits=False), st.data())
def test_removing_an_edge_never_delays_anything(g: ExecGraph, data: st.DataObject) -> None:
    if g.num_edges == 0:
        return
    drop = data.draw(st.integers(0, g.num_edges - 1))
    keep = np.ones(g.num_edges, dtype=bool)
    keep[drop] = False
    before = simulate(g)
    after = simulate(g.replace(edges=g.edges.take(keep)))
    assert (after.start_ns <= before.start_ns).all()


@SETTINGS
@given(exec_graphs(with_waits=False))
def test_shorter_tasks_never_delay_anything_without_waits(g: ExecGraph) -> None:
    half = g.with_durations(g.tasks.dur_ns // 2)
    assert (simulate(half).start_ns <= simulate(g).start_ns).all()


@SETTINGS
@given(exec_graphs())
def test_critical_path_adds_up_to_the_makespan(g: ExecGraph) -> None:
    from lumos.report.metrics import critical_path

    r = simulate(g)
    cp = critical_path(r)
    assert sum(cp.kind_ns.values()) == r.makespan_ns
    assert sum(cp.delay_ns.values()) == cp.kind_ns["delay"]
    assert all(v >= 0 for v in cp.delay_ns.values())
    if g.num_tasks:
        assert r.end_ns[cp.tasks[0]] == r.makespan_ns
