"""``benchmarks/corpus.py`` over the realdata folder: every Kineto trace (a file, the ranks of
one job, a tar archive of them) replays without deadlock, its steps within 2 % mean and 5 % max,
and breaks no invariant (``lumos.estimate.check_invariants``). The same benchmark runs by hand
over fetched public collections (README, "Traces never seen before")."""

from __future__ import annotations

import pytest
from benchmarks.corpus import discover, run, table
from tests.realdata import needs_realdata, realdata_root


@needs_realdata
@pytest.mark.slow
def test_every_realdata_trace_replays_and_keeps_the_invariants():
    root = realdata_root()
    assert root is not None
    units = discover([root])
    names = [u.name for u in units]
    # what the folder holds: 21 single traces, a 2-rank job (a folder), the 8-rank DLRM archive
    assert len(units) == 23, names
    assert "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-*.json.gz (2 ranks)" in names
    assert "param/et_replay/tests/inputs/dlrm_kineto.tar.gz" in names
    rows = run(units, workers=2, timeout_s=900)
    failing = [r for r in rows if not r.passes]
    assert not failing, table(failing)
    dlrm = next(r for r in rows if r.name.endswith("dlrm_kineto.tar.gz"))
    assert dlrm.ranks == 8
