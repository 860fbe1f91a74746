"""Real traces rewritten as other recorders, clocks and writers would have written them
(``tests/perturb.py``) replay like their originals and answer a what-if like them.

The recording's content is the same in every variant: no ``cuda_sync`` events, no stream
arguments, no flow events, events reordered in the file, the GPU clock 50 us to 20 ms off (or
drifting 50 ppm), and for a job, each rank's host clock off by its own milliseconds. Each
variant must replay its steps within 2 % (as its original does: 0 %) and predict "every compute
kernel twice as fast" within 2 points of what the original predicts. The traces are chosen for
what makes the inference fragile: blocked launches on a GPU-bound V100 (a 7 us clock error used
to turn a -47 % answer into -2 %), a HIP queue 21 ms deep, four streams with all-to-all,
``cuda_sync`` events, NCCL with process groups, a trace with no synchronize, eight ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.corpus import PERTURB_POINTS_LIMIT, PERTURB_STEP_LIMIT, Unit, check
from tests.realdata import needs_realdata, trace

SUBSET = (
    "gpu_bound_v100",
    "rccl_mi300",
    "alltoall_4streams",
    "cuda_event_sync_multi_stream",
    "nccl_a100",
    "hip_mi250",
    "allgather_b200",
    "dlrm_kineto_8rank",
)


@needs_realdata
@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_variants_replay_and_answer_like_the_original(name):
    path = trace(name)
    row = check(Unit(name, [str(Path(path))]), perturb=True)
    assert row.replays, row.error
    assert row.step_err_max == 0.0  # the original replays its own steps exactly
    expected = 11 if name == "dlrm_kineto_8rank" else 10  # + each rank's clock off
    assert len(row.perturbed) == expected
    for variant, r in row.perturbed.items():
        assert "error" not in r, (variant, r)
        assert r["step_err_max"] <= PERTURB_STEP_LIMIT, (variant, r)
        if row.kernels_half_pct is not None:
            assert r["points"] <= PERTURB_POINTS_LIMIT, (variant, r, row.kernels_half_pct)
