"""Stream-wait planning done for all calls at once equals planning them one call at a time.

``plan_stream_waits`` answers every call's lookups as array searches (``search_many``); the
reference below plans one call at a time with the one-query methods of ``Launches``, in the
order the rules are stated in ``lumos.graph.build_stream_waits``. The realdata traces hold
every branch: calls with and without a ``cuda_sync`` record, without any ``cudaEventRecord``
(df_index_resolver), with no later launch from the thread (alltoall_4streams, allgather_b200)
and with a stream that would wait for its own event (nccl_a100, allgather_b200).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.realdata import needs_realdata, trace

from lumos.graph import build_sync
from lumos.graph.build import build_graph
from lumos.graph.build_links import Launches, search_many
from lumos.ingest.kineto import read_kineto

_TOLERANCE_NS = 1_000


@st.composite
def _groups(draw: Any) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for key in draw(st.sets(st.integers(0, 6), max_size=4)):
        times = sorted(draw(st.lists(st.integers(0, 50), max_size=12)))
        values = draw(st.lists(st.integers(0, 99), min_size=len(times), max_size=len(times)))
        out[key] = (np.array(times, dtype=np.int64), np.array(values, dtype=np.int64))
    return out


@settings(max_examples=200, deadline=None)
@given(_groups(), st.lists(st.tuples(st.integers(0, 7), st.integers(-1, 52)), max_size=30))
def test_search_many_answers_as_the_one_query_methods(groups, queries):
    keys = np.array([k for k, _ in queries], dtype=np.int64)
    ts = np.array([t for _, t in queries], dtype=np.int64)
    # the same groups as streams (launch times, tasks) and as threads (times, streams)
    launches = Launches(np.zeros(0, np.int64), np.zeros(0, np.int64), groups, groups)
    cases = [
        (("left", -1), launches.last_launched_before),
        (("left", 0), launches.first_launched_after),
        (("right", 0), launches.stream_of_next_launch),
    ]
    for (side, shift), one in cases:
        got = search_many(groups, keys, ts, side=side, shift=shift)
        assert got.tolist() == [one(k, t) for k, t in queries]
    got = search_many(groups, keys, ts, side="left", shift=-1)
    assert got.tolist() == [launches.stream_of_previous_launch(k, t) for k, t in queries]


def _reference(tasks, layout, launches, sync_by_corr, wait_on_first, stream_gp,
               record_task_by_corr, records_by_thread, corr):  # fmt: skip
    """(src, dst, contradicted, without_record) per call, one call at a time."""
    dev = min((d for d, _ in stream_gp), default=0)
    rows = []
    for t, c in zip(tasks.tolist(), corr.tolist(), strict=True):
        thread, s = int(layout.processor_idx[t]), int(layout.ts_ns[t])
        info = sync_by_corr.get(c)
        record = waiting = rec_stream = -1
        if info is not None and info[0] == 3:
            record = record_task_by_corr.get(info[2], -1)
            waiting = stream_gp.get((dev, info[1]), -1)
            if c in wait_on_first:
                rec_stream = stream_gp.get((dev, wait_on_first[c]), -1)
        if record < 0 and thread in records_by_thread:
            starts, recs = records_by_thread[thread]
            earlier = recs[starts < s]
            record = int(earlier[-1]) if earlier.size else -1
        without = record < 0
        r_ts, r_thread = (s, thread) if without else (int(layout.ts_ns[record]),
                                                       int(layout.processor_idx[record]))  # fmt: skip
        if rec_stream < 0:
            rec_stream = launches.stream_of_previous_launch(r_thread, r_ts)
        pairs = [(rec_stream, waiting)]
        if waiting < 0:
            waiting = launches.stream_of_next_launch(thread, s)
            if waiting < 0:
                other = launches.stream_of_previous_launch_except(thread, s, rec_stream)
                pairs = [(rec_stream, other), (other, rec_stream)]
            elif waiting == rec_stream and record >= 0 and info is None:
                pairs = [(launches.stream_of_previous_launch_except(r_thread, r_ts, waiting),
                          waiting)]  # fmt: skip
            else:
                pairs = [(rec_stream, waiting)]
        row = (-1, -1, False, without)
        for rec, wait_on in pairs:
            if rec < 0 or wait_on < 0 or rec == wait_on:
                continue
            src = launches.last_launched_before(rec, r_ts)
            dst = launches.first_launched_after(wait_on, s)
            if src < 0 or dst < 0:
                continue
            late = layout.ts_ns[src] + layout.dur_ns[src] > layout.ts_ns[dst] + _TOLERANCE_NS
            row = (src, dst, bool(late), without)
            break
        rows.append(row)
    return rows


@needs_realdata
@pytest.mark.parametrize(
    "name", ["nccl_a100", "alltoall_4streams", "v100_stream_wait_event", "allgather_b200",
             "rccl_mi300"],
)  # fmt: skip
def test_planned_stream_waits_equal_the_call_by_call_reference(name, monkeypatch):
    seen = []

    def spy(*args):
        out = plan(*args)
        seen.append((args, out))
        return out

    plan = build_sync.plan_stream_waits
    monkeypatch.setattr(build_sync, "plan_stream_waits", spy)
    g = build_graph(read_kineto(trace(name)))
    ((args, got),) = seen
    want = _reference(*args)
    assert len(want) == args[0].shape[0] > 0
    assert got.src.tolist() == [r[0] for r in want]
    assert got.dst.tolist() == [r[1] for r in want]
    assert got.contradicted.tolist() == [r[2] for r in want]
    assert got.without_record.tolist() == [r[3] for r in want]
    assert g.diagnostics.count("inter_stream_edge_contradicted") == sum(r[2] for r in want)
    assert g.diagnostics.count("stream_wait_without_record") == sum(r[3] for r in want)
