"""Sends and receives matched across ranks (tests/data/pipeline_4_stages, 4 ranks, one host).

The k-th send from rank r to rank q is the k-th receive on q from r. In the recorded 4-stage
pipeline one such pair cannot be one transfer: rank 1's fourth receive from rank 2 ended
3.95 ms before rank 2's fourth send began, on the shared clock of one host where every other
pair overlaps. Held together, the replay made rank 1 wait for that send, and ranks 0 and 1
replayed their second step 5.7 % and 5.4 % long; taken apart, each side keeps its recorded time.
"""

from __future__ import annotations

from tests.conftest import DATA

from lumos.replay import build_workload, replay

RANKS = sorted((DATA / "pipeline_4_stages").glob("rank*.kineto.json.gz"))


def test_a_receive_that_ended_before_its_send_is_not_held_for_it():
    w, _ = build_workload(RANKS, workers=1)
    groups = w.collective_groups()
    assert groups.diagnostics.count("p2p_receive_ends_before_send") == 1
    assert groups.diagnostics.example("p2p_receive_ends_before_send").startswith(
        "('p2p', '', 2, 1, 3): the receive ended 3951 us before"
    )
    # 24 pairs of which 23 stay pairs; the split one is two groups of one
    assert sorted(groups.sizes().tolist()) == [1, 1] + [2] * 23
    rep = replay(w)
    errors = [abs(st["error"]) for s in rep.summaries for st in s["steps"]]
    assert len(errors) == 8 and max(errors) < 1e-4
