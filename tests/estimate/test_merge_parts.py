"""Merging pipeline stages' graphs (:mod:`lumos.estimate.merge`), on hand-built graphs with
known answers; merged real traces are in ``test_stages.py``."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.estimate.merge import merge_graphs, place
from lumos.graph.model import AnnotationKind, DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder


def _launch_and_wait(rank: int, spans: bool = False, dims: tuple[str, ...] = ()):
    """A thread launching one kernel, recording an event after it and waiting for the event:
    tasks 0 launch, 1 kernel (on the stream), 2 record, 3 wait (wait row: EVENT on the
    stream, recorded by task 2). With ``spans``: a STEP span over tasks 0-3 and a USER span
    ``fwd`` over the launch and the record (0-2); ``dims`` is the graph's table of dims."""
    b = GraphBuilder(rank=rank, world_size=2)
    th, st = b.thread(1), b.stream(7)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "gemm", 100)
    b.edge(launch, k, DepKind.LAUNCH)
    record = b.task(th, "cudaEventRecord", 2, TaskKind.RUNTIME, gap_ns=1)
    wait = b.task(th, "cudaEventSynchronize", 3, TaskKind.RUNTIME, gap_ns=1)
    b.wait(wait, WaitKind.EVENT, stream=st, record=record)
    if spans:
        b.annotate("ProfilerStep#1", th, launch, wait)
        b.annotate("fwd", th, launch, record, kind=AnnotationKind.USER)
    return b.build().replace(dims=dims).validate()


def test_merged_waits_point_at_their_own_parts_tasks():
    """Part 1's tasks follow part 0's 4, so its wait (task 3, recorded by task 2) becomes task
    7 recorded by task 6; both wait on the one shared stream (processor 1)."""
    merged = merge_graphs([_launch_and_wait(0), _launch_and_wait(1)]).validate()
    w = merged.waits
    assert w.task_idx.tolist() == [3, 7]
    assert w.record_task_idx.tolist() == [2, 6]
    assert w.target_processor_idx.tolist() == [1, 1]
    assert merged.num_tasks == 8 and len(merged.processors) == 2


def test_work_after_a_steps_last_block_runs_with_that_step_after_its_blocks():
    """One thread: an op before any block, step 0's block (slot 0), an op after it (step 0's
    optimizer, say), step 1's block (slot 0), an op after it. With ``end_slot = 4`` a key is
    ``(step * 6 + slot + 1) * 4096 + part``: the op before the first block takes that block's
    key ``(0, 0)``, each op after a step's last block ``(step, 4)``, after the blocks of its
    own step (step 0 too) and before the next step's."""
    b = GraphBuilder()
    th = b.thread(1)
    for name in ("pre", "fwd0", "opt0", "fwd1", "opt1"):
        b.task(th, name, 10, gap_ns=1)
    g = b.build().validate()
    step = np.array([-1, 0, -1, 1, -1], dtype=np.int64)
    slot = np.array([-1, 0, -1, 0, -1], dtype=np.int64)
    keys = place(g, step, slot, end_slot=4, part=1)
    expected = [(0, 0), (0, 0), (0, 4), (1, 0), (1, 4)]
    assert keys.tolist() == [(s * 6 + k + 1) * 4096 + 1 for s, k in expected]
    assert keys.tolist() == [4097, 4097, 20481, 28673, 45057]


@pytest.mark.parametrize("dims", [(), ("[[4, 4]]",)])
def test_merged_spans_are_every_parts_own_but_the_steps_only_the_firsts(dims):
    """Each part: the launch-and-wait thread inside a STEP span (tasks 0-3) and a USER span
    ``fwd`` over its launch and record (tasks 0-2). Merged: part 0's two spans as they were,
    then part 1's ``fwd`` moved by part 0's 4 tasks (tasks 4-6); part 1's STEP span is
    dropped (the STEP spans are the first part's). Without dims (a trace recorded without
    shapes) merging used to fail looking up the spans' dims; with a table of dims that no
    span uses, the spans still have none."""
    parts = [_launch_and_wait(rank, spans=True, dims=dims) for rank in (0, 1)]
    merged = merge_graphs(parts).validate()
    a = merged.annotations
    rows = sorted(
        zip(
            [merged.names[i] for i in a.name_idx.tolist()],
            a.kind.tolist(),
            a.first_task_idx.tolist(),
            a.last_task_idx.tolist(),
            strict=True,
        )
    )
    step, user = int(AnnotationKind.STEP), int(AnnotationKind.USER)
    assert rows == [
        ("ProfilerStep#1", step, 0, 3),
        ("fwd", user, 0, 2),
        ("fwd", user, 4, 6),
    ]
    assert a.dims_idx.tolist() == [-1, -1, -1]


def test_a_part_with_more_streams_than_the_first_brings_its_extra_stream_along():
    """Part 0 has thread 1 and stream 7; part 1 has thread 1 and streams 7 and 8. Threads and
    streams match by position, so part 1's second stream is new: it becomes processor 2 with
    its own label, its kernel is #0 there, and part 1's other kernel is #1 on the shared
    stream 7 (after part 0's). This used to raise: taking the one extra processor kept all
    of part 1's labels."""
    parts = []
    for streams in ((7,), (7, 8)):
        b = GraphBuilder()
        th = b.thread(1)
        b.task(th, "op", 5)
        for s in streams:
            b.task(b.stream(s), f"k{s}", 3)
        parts.append(b.build())
    merged = merge_graphs(parts).validate()
    assert merged.processors.label == ("thread 1", "stream 7", "stream 8")
    assert merged.processors.tid.tolist() == [1, 7, 8]
    assert merged.tasks.processor_idx.tolist() == [0, 1, 0, 1, 2]
    assert merged.tasks.order.tolist() == [0, 0, 1, 1, 0]
