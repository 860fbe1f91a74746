"""Ranks whose host clocks disagree are put on one clock by their collectives
(``lumos.graph.build_ranks.rank_clock_offsets``): the members of a collective end together.

Ground truth: the 8-rank DLRM job rewritten with rank ``i``'s clock moved by
``(-1)**i * 1.3 * (i + 1)`` ms (``tests/perturb.py``); the offsets found must undo those moves,
and the replay must match the original's.
"""

from __future__ import annotations

import json
import re

import pytest
from tests.perturb import ranks_clock_offset, write
from tests.realdata import needs_realdata, trace

from lumos.graph.build_ranks import rank_clock_offsets
from lumos.graph.model import CommType, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.ingest.detect import expand_paths
from lumos.replay import build_workload, replay


def _steps(rep) -> list[int]:
    return [s["predicted_ns"] for summary in rep.summaries for s in summary["steps"]]


@needs_realdata
def test_disagreeing_host_clocks_are_undone_by_the_collectives(tmp_path):
    refs = [r for r in expand_paths([trace("dlrm_kineto_8rank")]) if r.kind == "kineto"]
    docs = [json.loads(r.read()) for r in refs]
    original, _ = build_workload(refs, workers=1)
    assert rank_clock_offsets(original.graphs) is None  # one host: collectives overlap already
    moved = [write(d, tmp_path / f"{i}.json") for i, d in enumerate(ranks_clock_offset(docs))]
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    graphs = [build_graph(read_kineto(p)) for p in moved]
    offsets = rank_clock_offsets(graphs)
    assert offsets is not None
    for g in graphs:
        i = next(k for k, d in enumerate(docs) if d["distributedInfo"]["rank"] == g.rank)
        truth = (-1) ** i * 1_300_000 * (i + 1) - 1_300_000  # relative to the lowest rank
        off, n = offsets[g.rank]
        assert n == 8
        assert abs(off - truth) <= 2_100, (g.rank, off, truth)  # the ends' own noise
    w, _ = build_workload([str(p) for p in moved], workers=1)
    assert sum(g.diagnostics.count("rank_clock_moved") for g in w.graphs) == 7
    for g in w.graphs:  # each moved rank says how far, in us, its clock went: minus its move
        i = next(k for k, d in enumerate(docs) if d["distributedInfo"]["rank"] == g.rank)
        truth = (-1) ** i * 1_300_000 * (i + 1) - 1_300_000
        if truth == 0:
            assert g.diagnostics.count("rank_clock_moved") == 0
            continue
        said = g.diagnostics.example("rank_clock_moved")
        m = re.fullmatch(rf"rank {g.rank}'s clock moved ([+-]\d+\.\d) us onto the job's "
                         r"\(median end of its 8 collectives\)", said)  # fmt: skip
        assert m is not None, said
        assert abs(float(m.group(1)) * 1e3 + truth) <= 2_100, (said, truth)
    assert _steps(replay(w)) == _steps(replay(original))


@needs_realdata
def test_collectives_matched_wrongly_do_not_move_clocks():
    """The two sampled ranks of a 128-rank job: 6 of their 10 send/receive pairs (matched by
    order) do not overlap in time by milliseconds, and no offset makes them: left alone."""
    w, _ = build_workload([trace("sendrecv_5streams_rank0"), trace("sendrecv_5streams_rank1")],
                          workers=1)  # fmt: skip
    assert rank_clock_offsets(w.graphs) is None
    assert not any(g.diagnostics.count("rank_clock_moved") for g in w.graphs)


US = 1_000
S = 1_000_000_000


def _ranked(rank: int, spans_ns: list[tuple[int, int]]) -> ExecGraph:
    """One rank's all-reduces (sequence numbers 0, 1, ...) at the given (start, end) on
    stream 7."""
    b = GraphBuilder(rank=rank, world_size=2)
    pg = b.process_group("0", (0, 1))
    stream = b.stream(7)
    for seq, (s0, s1) in enumerate(spans_ns):
        c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=seq)
        b.task(stream, "ncclDevKernel_AllReduce", s1 - s0, TaskKind.COMM, ts_ns=s0, comm=c)
    return b.build()


@pytest.mark.parametrize(("n", "moved"), [(10, True), (9, False)])
def test_a_clock_offset_is_kept_when_at_most_a_tenth_of_the_collectives_stay_apart(n, moved):
    """``n`` all-reduces of both ranks, rank 0's at 100 i to 100 i + 10 us. Rank 1's are
    the same 1 s later, except the last, 50 us later still (1 s + 100 (n - 1) + 50 us to
    + 60 us). Every collective is apart before (rank 1 began 1 s after rank 0 ended). Each
    group's median end lies half-way; every rank-1 residual but one is +0.5 s, rank 0's -0.5 s,
    so the medians (twice) give rank 1 an offset of exactly 1 s from rank 0. Moved back 1 s,
    only the last collective stays apart (rank 1 begins 40 us after rank 0 ended): 1 of 10 is
    at most a tenth, and the offsets stand ({0: (0, 10), 1: (1 s, 10)}); 1 of 9 is more, and
    the clocks are left alone (None)."""
    rank0 = [(100 * i * US, (100 * i + 10) * US) for i in range(n)]
    rank1 = [(a + S, b + S) for a, b in rank0]
    a, b = rank1[-1]
    rank1[-1] = (a + 50 * US, b + 50 * US)
    got = rank_clock_offsets((_ranked(0, rank0), _ranked(1, rank1)))
    assert got == ({0: (0, n), 1: (S, n)} if moved else None)
