"""``check_invariants``: what any job's layers and what-ifs must satisfy, with no ground truth,
on lumos's own recordings and on every realdata Kineto trace (the corpus benchmark's rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.realdata import REPLAY_TRACES, astra_custom, realdata, trace

from lumos.estimate.invariants import CHECKS, Check, _fit_in_step, _ranks_agree, check_invariants
from lumos.examples_data import example_run_dir

DATA = Path(__file__).parents[1] / "data"


def test_the_bundled_example_holds_every_invariant():
    checks = check_invariants([example_run_dir()])
    assert [c.name for c in checks] == list(CHECKS)
    assert all(isinstance(c, Check) and c.ok for c in checks), checks
    by = {name: detail for name, _, detail in checks}
    assert by["layers_ranks_agree"] == "2 rank(s) with 2 layers each"
    assert by["layers_forward_backward"] == "2 forward, 2 backward"
    assert by["identity_edit"] == ("layers=2 hidden=128 ffn=512 heads=4 seq=64 microbatch_size=8 "
                                   "microbatches=1 pp=1: the baseline to the ns")  # fmt: skip
    assert by["dp_recorded_is_baseline"].startswith("dp=2: step ")
    assert by["dp_sweep_monotonic"].startswith("dp 2, 4, 8, 16: exposed comm ")


@pytest.mark.parametrize("run", ["pipeline_4_stages", "gloo_fsdp2_2rank", "gloo_pipelining_2stage"])
def test_lumos_recordings_hold_every_invariant(run):
    checks = check_invariants([DATA / run])
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


# -- every realdata Kineto trace: the invariants hold, or say why they cannot be checked -------

CORPUS = (*REPLAY_TRACES, "gpu_bound_v100", "dlrm_kineto_8rank", "allgather_b200")


@pytest.mark.parametrize("name", CORPUS)
def test_every_realdata_trace_holds_every_invariant(name):
    checks = check_invariants([trace(name)])
    assert [c.name for c in checks] == list(CHECKS)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_dlrm_and_nccl_data_in_detail():
    dlrm = {c.name: c.detail for c in check_invariants([trace("dlrm_kineto_8rank")])}
    assert dlrm["layers_ranks_agree"].startswith("8 rank(s) decline: every rank declines; ")
    assert dlrm["dp_recorded_is_baseline"].startswith("dp=8: step ")
    assert dlrm["dp_sweep_monotonic"].startswith("dp 8, 16, 32, 64: exposed comm ")
    nccl = {c.name: c.detail for c in check_invariants([trace("nccl_a100")])}
    assert nccl["identity_edit"].startswith("microbatches=1 pp=1: the baseline to the ns; "
                                            "layers=2 refused: layers=2: the baseline's layers")  # fmt: skip
    assert nccl["identity_edit"].endswith("give --baseline layers=N")
    assert nccl["dp_sweep_monotonic"].startswith("dp 2, 4, 8, 16: exposed comm ")


def test_a_trace_that_states_no_degree_holds_by_refusing():
    checks = {c.name: c for c in check_invariants([trace("cuda_event_sync")])}
    refusal = ("refused: dp=2: the baseline's dp could not be found in the trace (the trace "
               "states no world size or process group); give --baseline dp=N")  # fmt: skip
    assert checks["dp_recorded_is_baseline"] == Check("dp_recorded_is_baseline", True, refusal)
    assert checks["dp_sweep_monotonic"] == Check("dp_sweep_monotonic", True, refusal)


def test_a_replay_that_fails_is_a_failed_check_that_says_why():
    """ASTRA-sim's custom ring all-reduce (MSCCL-IR sends and receives) does not replay: the
    what-if invariants cannot be checked, and their rows say so instead of raising."""
    checks = check_invariants([realdata(astra_custom())])
    assert [c.ok for c in checks] == [True, True, True, False, False, False]
    assert all(c.detail.startswith("the replay fails: SimulationError: deadlock")
               for c in checks[3:])  # fmt: skip
    # the message says why and what replays them: ASTRA-sim's semantics
    assert all("replay them with --chakra-only" in c.detail for c in checks[3:])


def _rank(rank: int, forward_ns: int, backward_ns: int, step_ns: int) -> dict:
    phases = {"forward": {"total_ns": forward_ns}, "backward": {"total_ns": backward_ns}}
    return {"rank": rank, "layers": 2, "step_ns": step_ns, "phases": phases}


def test_layers_fit_in_step_lists_at_most_four_ranks_and_else_the_ones_that_do_not_fit():
    """Rank ``i``'s layers take 0.5 + 1.0 ms of its 2.0 ms step: 4 ranks are listed in full;
    a 5th is left out behind " ..."; a rank whose layers take 2.5 ms fails and alone is
    named (and " ..." still says that more ranks were seen)."""
    fits = "1.500 of 2.000 ms"
    four = [_rank(i, 500_000, 1_000_000, 2_000_000) for i in range(4)]
    listed = "; ".join(f"rank {i}: {fits}" for i in range(4))
    assert _fit_in_step({"ranks": four}) == Check("layers_fit_in_step", True, listed)
    five = [*four, _rank(4, 500_000, 1_000_000, 2_000_000)]
    assert _fit_in_step({"ranks": five}) == Check("layers_fit_in_step", True, listed + " ...")
    over = [*five, _rank(5, 1_000_000, 1_500_000, 2_000_000)]
    assert _fit_in_step({"ranks": over}) == Check(
        "layers_fit_in_step", False, "rank 5: 2.500 of 2.000 ms ..."
    )


def test_layers_ranks_agree_on_one_count_on_declining_with_reasons_and_names_a_mismatch():
    """Ranks that all decline hold when each gives a reason (the detail is the job's reason)
    and fail when one gives none; one count on every rank holds; two counts fail, listing every
    rank's count in rank order as given (a declining rank's ``None`` among them)."""
    name = "layers_ranks_agree"
    verdict = {"verdict": {"reason": "every rank declines; ranks 0, 1: loops"}}
    declined = [{"rank": 0, "layers": None, "reason": "loops"},
                {"rank": 1, "layers": None, "reason": "loops"}]  # fmt: skip
    assert _ranks_agree({**verdict, "ranks": declined}) == Check(
        name, True, "2 rank(s) decline: every rank declines; ranks 0, 1: loops"
    )
    silent = [declined[0], {"rank": 1, "layers": None, "reason": ""}]
    assert _ranks_agree({**verdict, "ranks": silent}) == Check(
        name, False, "2 rank(s) decline: every rank declines; ranks 0, 1: loops"
    )
    same = [{"rank": r, "layers": 4, "reason": ""} for r in range(3)]
    assert _ranks_agree({"ranks": same}) == Check(name, True, "3 rank(s) with 4 layers each")
    mixed = [{"rank": 2, "layers": 4, "reason": ""}, {"rank": 0, "layers": 3, "reason": ""},
             {"rank": 1, "layers": None, "reason": "loops"}]  # fmt: skip
    assert _ranks_agree({"ranks": mixed}) == Check(
        name, False, "ranks report different layer counts (2: 4, 0: 3, 1: None)"
    )


def test_the_identity_check_fails_naming_what_differs_and_holds_when_rows_agree():
    """``_identity`` with the layers known: an identity row differing from the baseline row in
    its step time only fails with ``<label>: step_ns: <row> != <baseline>``; one equal to it
    holds with ``<label>: the baseline to the ns``; no identity holds with ``no detected value
    to set``."""
    from lumos.estimate.baseline import Baseline
    from lumos.estimate.invariants import _identity
    from lumos.estimate.run import EstimateRow
    from lumos.estimate.scenario import parse_scenario
    from lumos.graph.model import Workload
    from lumos.graph.synthetic import GraphBuilder

    ident = parse_scenario(["microbatches=2"])
    base = Baseline(values={"layers": 4}, how={})

    def row(step_ns: int) -> EstimateRow:
        return EstimateRow(scenario=ident, step_ns=step_ns, rank_step_ns=((0, 100),),
                           breakdown={"exposed_comm_ns": 7}, model="m")  # fmt: skip

    b = GraphBuilder()
    b.thread(1)
    w = Workload((b.build(),))  # not read: the layers are known
    label = ident.label
    assert _identity(w, base, ident, row(100), {label: row(101)}, "") == Check(
        "identity_edit", False, f"{label}: step_ns: 101 != 100"
    )
    assert _identity(w, base, ident, row(100), {label: row(100)}, "") == Check(
        "identity_edit", True, f"{label}: the baseline to the ns"
    )
    assert _identity(w, base, None, row(100), {}, "") == Check(
        "identity_edit", True, "no detected value to set"
    )
