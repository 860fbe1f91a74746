"""Ranks whose host clocks disagree are put on one clock by their collectives
(``lumos.graph.build_ranks.rank_clock_offsets``): the members of a collective end together.

Ground truth: the 8-rank DLRM job rewritten with rank ``i``'s clock moved by
``(-1)**i * 1.3 * (i + 1)`` ms (``tests/perturb.py``); the offsets found must undo those moves,
and the replay must match the original's.
"""

from __future__ import annotations

import json
import re

from tests.perturb import ranks_clock_offset, write
from tests.realdata import needs_realdata, trace

from lumos.graph.build_ranks import rank_clock_offsets
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
