"""gloo's spans are collectives wherever gloo records them (two recordings lumos made).

``tests/data/gloo_fsdp2_2rank`` (FSDP2): ``_allgather_base_`` runs as a ``gloo:all_gather``
span on the gloo worker thread that copies the gathered buffer out inside the span, and
``_reduce_scatter_base_`` as a ``gloo:all_reduce`` span. Split into its copies, such a span left
the transfer as an unexplained gap: no communication in the breakdown, nothing matched across
ranks, and a faster network predicted almost no change.

``tests/data/gloo_pipelining_2stage`` (``torch.distributed.pipelining``, GPipe): gloo records
``gloo:send``/``gloo:recv`` on the calling thread, and an ``isend`` stays in flight while the
thread goes on, so the thread's next send starts inside the previous one's span. Such spans go
onto lanes beside the thread; before, they were no task and a replay of both ranks deadlocked.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import DATA

from lumos.graph.build import build_graph
from lumos.graph.build_gloo import (
    CPU_CANDIDATES,
    gloo_lanes,
    gloo_spans,
    inside_gloo_workers,
    on_lanes,
)
from lumos.graph.build_tasks import GLOO_LEFT_OUT
from lumos.graph.model import CommType, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.ingest.kineto import read_kineto, trace_from_bytes
from lumos.replay import build_workload, parse_scale, replay

FSDP = sorted((DATA / "gloo_fsdp2_2rank").glob("rank*.kineto.json.gz"))
PIPE = sorted((DATA / "gloo_pipelining_2stage").glob("rank*.kineto.json.gz"))


def _spans(path: Path):
    trace = read_kineto(path)
    ev, names = trace.events, trace.names
    spans = [i for i in range(len(ev)) if names[int(ev.name_idx[i])].startswith("gloo:")]
    return trace, spans


def _alone_on_their_processor(g, tasks) -> bool:
    """No other task of a span's processor starts inside it."""
    for t in tasks.tolist():
        p, s = g.tasks.processor_idx[t], g.tasks.ts_ns[t]
        e = s + g.tasks.dur_ns[t]
        inside = (g.tasks.processor_idx == p) & (g.tasks.ts_ns >= s) & (g.tasks.ts_ns < e)
        if np.flatnonzero(inside).tolist() != [t]:
            return False
    return True


@pytest.mark.parametrize("path", FSDP, ids=lambda p: p.name[:5])
def test_fsdp_every_gloo_span_is_one_comm_task_joined_to_its_call(path):
    trace, spans = _spans(path)
    names = trace.names
    assert Counter(names[int(trace.events.name_idx[i])] for i in spans) == {
        "gloo:all_gather": 12,
        "gloo:all_reduce": 6,
    }
    coll = trace.collectives
    assert Counter(coll.kind) == {"all_gather": 12, "reduce_scatter": 6}
    assert sorted(coll.work_event_idx.tolist()) == spans  # every span serves one call
    calls = Counter(names[int(trace.events.name_idx[i])] for i in coll.event_idx.tolist())
    assert calls == {"c10d::_allgather_base_": 12, "c10d::_reduce_scatter_base_": 6}
    g = build_graph(trace)
    comm = np.flatnonzero(g.tasks.kind == int(TaskKind.CPU_COMM))
    assert sorted(g.tasks.event_idx[comm].tolist()) == spans
    # the copies inside a span are the collective's own time, no tasks of their own, and the
    # spans stay on the gloo worker threads that ran them (no lane: none was in flight)
    assert _alone_on_their_processor(g, comm)
    assert not on_lanes(g).any()


@pytest.mark.parametrize("path", PIPE, ids=lambda p: p.name[:5])
def test_pipelining_sends_in_flight_go_onto_lanes_beside_their_thread(path):
    trace, spans = _spans(path)
    g = build_graph(trace)
    comm = np.flatnonzero(g.tasks.kind == int(TaskKind.CPU_COMM))
    assert sorted(g.tasks.event_idx[comm].tolist()) == spans and len(spans) == 16
    assert g.diagnostics.count(GLOO_LEFT_OUT) == 0
    labels = g.processors.label
    lanes = [p for p in range(len(labels)) if " gloo p2p " in labels[p]]
    on_lane = comm[np.isin(g.tasks.processor_idx[comm], lanes)]
    # per step the first three of the four sends are still in flight at the next send: three
    # lanes, each send on the first free one; the fourth send and every receive block
    assert len(lanes) == 3 and on_lane.size == 6
    assert _alone_on_their_processor(g, comm)


@pytest.mark.parametrize("ranks", [FSDP, PIPE], ids=["fsdp2", "pipelining"])
def test_both_ranks_rendezvous_and_a_faster_network_shortens_the_steps(ranks):
    w, _ = build_workload(ranks, workers=1)
    groups = w.collective_groups()
    n = int((w.graphs[0].tasks.kind == int(TaskKind.CPU_COMM)).sum())
    assert groups.num_groups == n and (groups.sizes() == 2).all()
    base = replay(w)
    assert max(abs(st["error"]) for s in base.summaries for st in s["steps"]) < 0.001
    fast = replay(w, scale=parse_scale(["^gloo:=0.5"]))
    for k, g in enumerate(w.graphs):
        exposed = base.summaries[k]["breakdown"]["measured"]["exposed_comm_ns"]
        spans = int(g.tasks.dur_ns[g.tasks.kind == int(TaskKind.CPU_COMM)].sum())
        before = sum(st["predicted_ns"] for st in base.summaries[k]["steps"])
        after = sum(st["predicted_ns"] for st in fast.summaries[k]["steps"])
        # at most half of the spans' time can go; the steps spend much of theirs waiting on
        # these transfers, so at least a quarter of the exposed communication goes
        assert 0.25 * exposed <= before - after <= 0.5 * spans


def test_pipeline_what_ifs_refuse_sends_in_flight_until_they_can_move_them():
    from lumos.errors import ConfigError
    from lumos.estimate import estimate, parse_scenario

    w, _ = build_workload(PIPE, workers=1)
    for setting in (["microbatches=8"], ["schedule=1f1b"]):
        with pytest.raises(ConfigError) as err:
            estimate(w, [parse_scenario(setting)])
        assert str(err.value) == (
            "micro-batch, schedule and stage what-ifs move a pipeline's blocking "
            "sends and receives; rank(s) 0, 1 sent or received while going on (asynchronous "
            "isend/irecv, as torch.distributed.pipelining issues them), which these edits do "
            "not move yet"
        )


def _cpu(cat: str, name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_a_lone_send_in_flight_gets_a_lane_and_a_blocking_one_none():
    """One thread, one ``gloo:send`` span (0-100 us, the trace's first event, a send call of its
    own whose work event it is: one SEND comm, nothing without a call), ``aten::add`` at 150 us
    (outside it: the thread is no gloo worker, whose other work all lies inside its spans).
    When ``aten::mul``
    starts inside the span (20 us) the send was in flight: it goes onto one lane appended
    after the thread (row 1: tid 2**40 + 1, the thread's pid and device, labelled after it),
    the ops stay on the thread. When ``aten::mul`` starts after it (110 us) the send blocked:
    no lane, the trace's processors unchanged."""
    for op_at, lanes in ((20, 1), (110, 0)):
        doc = {"traceEvents": [_cpu("user_annotation", "gloo:send", 0, 100),
                               _cpu("cpu_op", "aten::mul", op_at, 10),
                               _cpu("cpu_op", "aten::add", 150, 10)]}  # fmt: skip
        trace = trace_from_bytes(json.dumps(doc).encode(), "t.json")
        send = trace.names.index("gloo:send")
        out, lane_of = gloo_lanes(trace)
        want = [1 if trace.events.name_idx[i] == send and lanes else -1 for i in range(3)]
        assert lane_of.tolist() == want
        p = out.processors
        assert p.label == ("thread 1 (pid 1)", "thread 1 (pid 1) gloo p2p 0")[: 1 + lanes]
        assert p.tid.tolist() == [1, (1 << 40) + 1][: 1 + lanes]
        assert p.pid.tolist() == [1] * (1 + lanes) and p.device.tolist() == [-1] * (1 + lanes)
        g = build_graph(trace)
        comm = g.tasks.kind == int(TaskKind.CPU_COMM)
        assert [g.names[i] for i in g.tasks.name_idx[comm]] == ["gloo:send"]
        # the span (the trace's event 0) is its own call's work event: tied to that call
        assert trace.collectives.work_event_idx.tolist() == [0]
        assert g.comms.kind.tolist() == [int(CommType.SEND)]
        assert g.diagnostics.count("comm_task_without_collective_call") == 0
        lane_tasks = [g.names[i] for i in g.tasks.name_idx[on_lanes(g)]]
        assert lane_tasks == ["<start>", "gloo:send"][: 2 * lanes]  # a lane opens like a thread


@pytest.mark.parametrize(
    ("copy2", "worker"),
    [((60, 40), True), ((60, 41), False), ((5, 3), False)],
    ids=["ends-with-the-span", "ends-1us-after", "before-the-first-span"],
)
def test_a_gloo_worker_runs_only_work_that_lies_inside_its_spans(copy2, worker):
    """Thread 2 runs a ``gloo:all_reduce`` span (10-100 us), ``aten::copy_`` at 20-30 us and a
    second ``aten::copy_`` at ``copy2`` (start, duration). Ending at 100 us, the span's own end,
    the second copy lies inside it: thread 2 is a gloo worker, both copies are the
    collective's own time (nested), and the span stays on its thread (no lane). Ending 1 us
    after the span, or starting before any span, it is work of its own: the thread is no
    worker, nothing is nested, and the span, with a copy starting inside it, goes onto a
    lane (row 1, labelled after thread 2)."""
    doc = {"traceEvents": [
        {**_cpu("user_annotation", "gloo:all_reduce", 10, 90), "tid": 2},
        {**_cpu("cpu_op", "aten::copy_", 20, 10), "tid": 2},
        {**_cpu("cpu_op", "aten::copy_", *copy2), "tid": 2},
    ]}  # fmt: skip
    trace = trace_from_bytes(json.dumps(doc).encode(), "t.json")
    ev = trace.events
    gloo = gloo_spans(trace)
    nested = inside_gloo_workers(trace, gloo, np.isin(ev.cat, CPU_CANDIDATES))
    copies = np.flatnonzero(ev.name_idx == trace.names.index("aten::copy_"))
    assert nested[copies].tolist() == [worker, worker]
    assert not nested[gloo].any()
    out, lane_of = gloo_lanes(trace)
    assert lane_of[gloo].tolist() == [-1 if worker else 1]
    assert out.processors.label[1:] == (() if worker else ("thread 2 (pid 1) gloo p2p 0",))


def test_lanes_are_the_processors_whose_thread_ids_start_at_2_to_the_40():
    """Lane thread ids are 2**40 + the lane's row, in ``[2**40, 2**40 + 2**32)``, a range
    kept clear of OS thread ids: one task on each of threads 2**40 - 1, 2**40, 2**40 + 1,
    2**40 + 2**32 - 1, 2**40 + 2**32 and a pthread id as some recorders write it
    (0x7f3a2b1c4d5e) runs on no lane, a lane, a lane, a lane, no lane, no lane."""
    b = GraphBuilder()
    top = (1 << 40) + (1 << 32)
    for tid in ((1 << 40) - 1, 1 << 40, (1 << 40) + 1, top - 1, top, 0x7F3A2B1C4D5E):
        b.task(b.thread(tid), "op", 10)
    assert on_lanes(b.build()).tolist() == [False, True, True, True, False, False]
