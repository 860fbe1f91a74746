"""Outputs of a multi-rank replay written with work shared between ranks are the ones the
rank-by-rank slow paths give: the Perfetto trace (lumos.report.perfetto_ranks), the per-rank
summaries (lumos.replay_ranks) and the critical path by op."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.ranks.replicated import write_replicated

from lumos.replay import Replay, build_workload, replay
from lumos.replay_ranks import rank_summaries
from lumos.report.metrics import critical_path, critical_path_by_op, replay_summary
from lumos.report.ops import task_ops
from lumos.report.perfetto import to_chrome_trace, write_chrome_trace
from lumos.report.perfetto_layout import rank_tracks
from lumos.report.perfetto_measured import path_tasks
from lumos.report.perfetto_ranks import chunk_key, rank_chunks


@pytest.fixture(scope="module", params=["replicated", "distinct", "scaled"])
def rep(request, tmp_path_factory) -> Replay:
    """16 ranks: copies of the 8 DLRM ranks (shared builds), copies made distinct, and copies
    whose replay re-timed some kernels (edited graphs: nothing shared)."""
    run = write_replicated(tmp_path_factory.mktemp("run"), 16, jitter=request.param == "distinct")
    w, sources = build_workload([run], workers=2)
    scale = [("^ncclKernel", 0.5)] if request.param == "scaled" else []
    out = replay(w, sources=sources, scale=scale)
    _KIND[id(out)] = request.param
    return out


_KIND: dict[int, str] = {}


def test_streamed_perfetto_is_the_slow_path_byte_for_byte(rep: Replay, tmp_path) -> None:
    write_chrome_trace(tmp_path / "t.json", rep.workload, rep.result)
    slow = json.dumps(
        to_chrome_trace(rep.workload, rep.result), separators=(",", ":"), sort_keys=True
    )
    fast = (tmp_path / "t.json").read_text()
    # the replay's groups byte for byte; the recording (formatted from columns in both, epoch
    # times as their exact decimal, which json.dumps writes as repr) parses to the same events
    cut = slow.index('{"args":{"name":"rank 0 measured (recorded)"}')
    assert fast[:cut] == slow[:cut]
    assert json.loads(fast) == json.loads(slow)


def test_templates_are_shared_by_copies_only(rep: Replay) -> None:
    tracks = rank_tracks(rep.result)
    keys = {chunk_key(rep.result, tr.gi, tr.shift) for tr in tracks}
    # content decides: copies re-timed alike (scaled) share templates though not their graphs
    assert len(keys) == (16 if _KIND[id(rep)] == "distinct" else 8)
    # in this process or in workers, the same chunks
    on_path = path_tasks(rep.result).local
    one = list(rank_chunks(rep.result, tracks, on_path, workers=1))
    assert one == list(rank_chunks(rep.result, tracks, on_path, workers=2))
    assert one[3] != one[11]  # other rank, other pids
    # each rank's events of its own tasks on the critical path, and only those, are marked
    for tr, (tasks, _) in zip(tracks, one, strict=True):
        marked = [e["args"]["task_idx"] for e in json.loads(f"[{tasks}]")
                  if e["args"].get("critical_path")]  # fmt: skip
        assert sorted(marked) == sorted(on_path[tr.gi].tolist())
    assert sum(len(x) for x in on_path) > 0


def test_shared_summaries_are_each_ranks_own(rep: Replay) -> None:
    slow = [
        replay_summary(rep.result, gi, recorded=rep.recorded.graphs[gi])
        for gi in range(len(rep.workload.graphs))
    ]
    fast = rank_summaries(rep.result, rep.recorded.graphs)
    assert [s["rank"] for s in fast] == list(range(16))
    for a, b in zip(fast, slow, strict=True):
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    fast[0]["steps"].append("x")  # copies, not views of one another
    assert fast[8]["steps"] != fast[0]["steps"]


def _by_op_per_mask(result, cp, gi):
    """critical_path_by_op as first written: a mask and three sums per op."""
    acc: dict[str, list[int]] = {}
    graph_of = np.asarray(cp.graph_of)
    for of in np.unique(graph_of).tolist():
        g = result.graphs[of]
        sel = np.flatnonzero(graph_of == of)
        local = np.asarray(cp.tasks)[sel] - int(result.task_offsets[of])
        ops = task_ops(g)[0][local].astype(np.int64)
        ns, gap = np.asarray(cp.task_ns)[sel], np.asarray(cp.gap_ns)[sel]
        for o in np.unique(ops).tolist():
            hit = ops == o
            if o >= 0:
                parts = [(g.names[o], hit)]
            else:
                from lumos.report.metrics import _not_an_op

                named = np.array([_not_an_op(g, int(x)) for x in local[hit].tolist()], object)
                idx = np.flatnonzero(hit)
                parts = []
                for n in sorted(set(named)):
                    m = np.zeros(len(ops), bool)
                    m[idx[named == n]] = True
                    parts.append((n, m))
            for name, m in parts:
                name = name if of == gi else f"{name} (rank {g.rank})"
                a = acc.setdefault(name, [0, 0, 0])
                a[0] += int(m.sum())
                a[1] += int(ns[m].sum())
                a[2] += int(gap[m].sum())
    length = max(cp.length_ns, 1)
    ranked = sorted(acc.items(), key=lambda kv: (-kv[1][1] - kv[1][2], kv[0]))
    return [{"op": n, "tasks": a[0], "task_ns": a[1], "delay_ns": a[2],
             "share": (a[1] + a[2]) / length} for n, a in ranked if a[1] + a[2] > 0]  # fmt: skip


def test_critical_path_by_op_sums_per_op_as_before(rep: Replay) -> None:
    for gi in (0, 5, 13):
        cp = critical_path(rep.result, gi)
        assert critical_path_by_op(rep.result, cp, gi) == _by_op_per_mask(rep.result, cp, gi)
