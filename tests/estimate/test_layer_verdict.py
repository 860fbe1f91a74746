"""The job's verdict on the layers: one count on every rank, or every rank declines with a reason
(``lumos.estimate.layer_verdict``), on hand-made jobs with known answers, lumos's own recordings
and the real traces whose repeats are not layers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.realdata import trace

from lumos.cli.main import main
from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layer_verdict import LayerVerdict, _step_index, judge_layers
from lumos.estimate.layers import Group, find_layers
from lumos.examples_data import example_run_dir
from lumos.graph.model import ExecGraph, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

DATA = Path(__file__).parents[1] / "data"

#: A stack: (forward blocks, backward blocks, op-name prefix); the ops of one block are 8
#: distinct names ``<prefix>0``..``<prefix>7`` (forward, 10 ns each) and
#: ``<Prefix>0Backward0``... (backward, 20 ns each).
Stack = tuple[int, int, str]


def job_rank(steps: list[list[Stack]], *, outside_ns: int = 200, rank: int = 0,
             world: int = 1, loop: bool = False) -> ExecGraph:  # fmt: skip
    """One rank: per step, ``outside_ns`` of embedding, the stacks' forwards, their backwards
    in reverse, 10 ns of loss, 1 ns between ops; ``loop`` makes every forward op one op
    (``aten::as_strided``)."""
    b = GraphBuilder(rank=rank, world_size=world)
    th = b.thread(1)
    clock = 0

    def op(name: str, dur: int) -> int:
        nonlocal clock
        t = b.task(th, name, dur, ts_ns=clock, gap_ns=1)
        clock += dur + 1
        return t

    for s, stacks in enumerate(steps):
        start = clock
        first = op("aten::embedding", outside_ns)
        for fwd, _, prefix in stacks:
            for _ in range(fwd):
                for k in range(8):
                    op("aten::as_strided" if loop else f"aten::{prefix}{k}", 10)
        for _, bwd, prefix in reversed(stacks):
            for _ in range(bwd):
                for k in range(8):
                    op(f"{prefix.title()}{k}Backward0", 20)
        last = op("aten::nll_loss", 10)
        b.annotate(f"ProfilerStep#{s}", th, first, last, ts_ns=start, dur_ns=clock - start)
    return b.build().validate()


def verdict_of(*graphs: ExecGraph) -> LayerVerdict:
    w = Workload(tuple(graphs))
    return judge_layers(w, tuple(find_layers(g) for g in w.graphs))


# -- hand-made jobs ---------------------------------------------------------------------------


def test_a_stack_with_as_many_backward_blocks_is_accepted():
    v = verdict_of(job_rank([[(4, 4, "mm")]] * 2))
    assert v.layers == 4 and v.reason == ""
    (r,) = v.ranks
    # a forward block spans 8 x 10 ns + 7 ns of gaps, a backward one 8 x 20 + 7: 4 x 87 + 4 x 167
    # ns of a 1236 ns step (201 + 352 + 672 + 11; the ns between blocks are nobody's)
    assert (r.layers, r.found) == (4, 4)
    assert r.share == 1016 / 1236


def test_an_inference_trace_needs_no_backward():
    assert verdict_of(job_rank([[(6, 0, "mm")]])).layers == 6


@pytest.mark.parametrize(
    "steps, reason",
    [
        ([[(4, 3, "mm")]], "forward and backward disagree: forward repeats of 4 blocks, "
                           "backward repeats of 3: no backward block per forward layer"),
        ([[(4, 1, "mm")]], "forward and backward disagree: 4 forward blocks, no backward "
                           "repeat that is not a loop, although the step runs a backward"),
        ([[(4, 4, "mm")], [(5, 5, "mm")]], "steps disagree: the steps' layer counts are 4, 5"),
        ([[(4, 4, "mm"), (3, 3, "cv")]],
         "several stacks: repeats of 4 and 3 blocks each cover at least 10 % of the step "
         "(stages of layers of different shapes, as in a ResNet, not one stack)"),
    ],
    ids=["backward-3-of-4", "no-backward-repeat", "steps-disagree", "two-stacks"],
)  # fmt: skip
def test_a_count_that_does_not_hold_up_is_declined_with_the_reason(steps, reason):
    """The job declines with the one rank's reason, and that rank's answer names it (rank 0)."""
    v = verdict_of(job_rank(steps))
    assert v.layers is None
    assert v.reason == reason and v.ranks[0].reason == reason
    assert v.ranks[0].rank == 0


def test_a_loop_over_one_op_is_not_a_layer():
    v = verdict_of(job_rank([[(4, 4, "mm")]], loop=True))
    assert v.reason == ("the forward repeats are loops, not layers (4 blocks of 8 ops "
                        "repeating aten::as_strided every 1 op); backward repeats of 4 blocks")  # fmt: skip


def test_repeats_covering_a_sliver_of_the_step_are_not_the_model():
    # 1016 ns of layers in a 101,236 ns step
    v = verdict_of(job_rank([[(4, 4, "mm")]], outside_ns=100_200))
    assert v.reason == ("repeats cover 1.0 % of the step (a model's layers cover at least "
                        "10 %)")  # fmt: skip
    assert v.ranks[0].share == 1016 / 101_236


def test_data_parallel_replicas_that_disagree_all_decline():
    v = verdict_of(job_rank([[(4, 4, "mm")]], world=2),
                   job_rank([[(3, 3, "mm")]], rank=1, world=2))  # fmt: skip
    assert v.layers is None
    assert v.reason == "ranks disagree: rank 0 find 4 layers; rank 1 find 3 layers"
    assert [(r.layers, r.found, r.reason) for r in v.ranks] == [
        (None, 4, v.reason), (None, 3, v.reason)]  # fmt: skip


def test_one_declining_rank_makes_every_rank_decline_and_keeps_its_own_reason():
    low = "repeats cover 1.0 % of the step (a model's layers cover at least 10 %)"
    v = verdict_of(job_rank([[(4, 4, "mm")]], world=2),
                   job_rank([[(4, 4, "mm")]], rank=1, world=2, outside_ns=100_200))  # fmt: skip
    assert v.reason == f"ranks disagree: rank 0 find 4 layers; rank 1 find none ({low})"
    assert [r.reason for r in v.ranks] == [v.reason, low]


def test_without_steps_a_repeat_cannot_be_told_from_an_iteration():
    g = job_rank([[(4, 4, "mm")]])
    unmarked = g.replace(annotations=g.annotations.take([]))
    assert verdict_of(unmarked).reason == ("no steps marked (ProfilerStep): repeats of the op "
                                           "sequence cannot be told from repeated iterations")  # fmt: skip


# -- what the verdict changes for the what-ifs ------------------------------------------------


def test_a_layers_what_if_on_declined_layers_refuses_naming_the_baseline_flag():
    w = Workload((job_rank([[(4, 3, "mm")]]),))
    with pytest.raises(ConfigError) as err:
        estimate(w, [parse_scenario(["layers=8"])])
    msg = str(err.value)
    assert msg.startswith("layers=8: the baseline's layers could not be found in the trace "
                          "(not detected: forward and backward disagree: forward repeats of 4")  # fmt: skip
    assert msg.endswith("give --baseline layers=N")
    # given, the detected blocks are used as they are (as before the verdict existed)
    est = estimate(w, [parse_scenario(["layers=8"])], baseline={"layers": 4})
    assert est.rows[1].edits[0]["edit"] == "layers 4 -> 8"


# -- lumos's own recordings keep their layers -------------------------------------------------


@pytest.mark.parametrize(
    "run, layers",
    [
        (str(example_run_dir()), 2),
        (str(DATA / "gloo_ddp_2rank_straggler"), 4),
        (str(DATA / "gloo_fsdp2_2rank"), 2),
        (str(DATA / "pipeline_4_stages"), 2),
        (str(DATA / "whatif_pairs" / "ddp_layers_x2"), 4),
        (str(DATA / "whatif_pairs" / "llama_ddp_layers_x2"), 4),
        (str(DATA / "whatif_pairs" / "pp_microbatches_x2"), 2),
        (str(DATA / "whatif_pairs" / "pp_microbatches_x2_B"), 2),
        (str(DATA / "synth_configs" / "h256_l8"), 8),
    ],
    ids=lambda x: Path(x).name if isinstance(x, str) else str(x),
)
def test_lumos_recordings_keep_their_layers_forward_equal_to_backward(run, layers, capsys):
    assert main(["layers", run, "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == {"layers": layers, "reason": None}
    for r in doc["ranks"]:
        assert (r["layers"], r["reason"]) == (layers, None)
        assert r["phases"]["forward"]["layers"] == r["phases"]["backward"]["layers"] == layers
        assert r["share"] >= 0.25


def test_the_ddp_bucket_copies_of_the_8_layer_run_are_another_repeat_not_layers(capsys):
    """h256_l8 also repeats DDP's bucket copies 7 times per step (24 ops, in the forward's
    phase): they used to pull the forward's layers to the median, 7; they are listed apart."""
    assert main(["layers", str(DATA / "synth_configs" / "h256_l8"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["ranks"][0]
    assert r["repeats"] == [{"phase": "forward", "blocks": 7, "ops_per_block": 24,
                             "groups_per_step": 1.0, "total_ns": r["repeats"][0]["total_ns"]}]  # fmt: skip


def test_a_pipeline_without_layer_repeats_declines():
    workload, _ = build_workload([str(DATA / "gloo_pipelining_2stage")], workers=1)
    base = detect_baseline(workload)
    assert (
        base.how["layers"]
        == "not detected: every rank declines; ranks 0, 1: no repeated layers found"
    )
    assert "layers" not in base.values and base.values["microbatches"] == 4


# -- real traces: repeats that are not layers -------------------------------------------------


def test_the_8_dlrm_ranks_decline_together(capsys):
    """param's DLRM job reported 8, 4, 2, 3, 2, 2, 3, 2 layers on its 8 ranks: its repeats are
    loops over 1-4 ops (six ranks) and forward MLP blocks with no backward repeat (two)."""
    assert main(["layers", str(trace("dlrm_kineto_8rank")), "--json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["layers"] for r in doc["ranks"]] == [None] * 8
    assert doc["baseline"]["layers"]["value"] == -1
    kinds = [r["reason"].split(" (")[0].split(":")[0] for r in doc["ranks"]]
    assert kinds == ["the forward repeats are loops, not layers"] * 6 + [
        "forward and backward disagree"] * 2  # fmt: skip
    assert doc["verdict"]["reason"].startswith(
        "every rank declines; ranks 0, 1, 2, 3, 4, 5: the forward repeats are loops"
    )
    assert all(r["phases"] == {} for r in doc["ranks"])


def test_nccl_data_declines_and_its_layer_sweep_refuses(tmp_path, capsys):
    """HTA's nccl_data (a ResNet-50 rank) reported 16 forward layers (aten::as_strided x 160
    cut into tens) and 5 backward; `--sweep layers=32` answered +85 %. Now: one reason, and the
    what-if refuses naming --baseline layers=N."""
    path = str(trace("nccl_a100"))
    assert main(["layers", path, "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["ranks"]
    reason = ("the forward repeats are loops, not layers (16 blocks of 10 ops repeating "
              "aten::as_strided every 1 op); backward repeats of 7, 5 and 4 blocks")  # fmt: skip
    assert (r["layers"], r["reason"], r["phases"]) == (None, reason, {})
    assert main(["estimate", path, "--sweep", "layers=32", "-o", str(tmp_path / "e")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"lumos: error: {path}: layers=32: the baseline's layers could not be found in the "
                    f"trace (not detected: {reason}); give --baseline layers=N")  # fmt: skip


def test_resnets_decline_module_annotated_or_not():
    # ResNet-18 with module annotations: 8 BasicBlocks forward, backward repeats of 4 and 2
    w, _ = build_workload([str(trace("rccl_mi300"))])
    assert detect_baseline(w).how["layers"] == (
        "not detected: forward and backward disagree: forward repeats of 8 blocks, backward "
        "repeats of 4 and 2: no backward block per forward layer"
    )
    # ResNet-50, 2021: its stages repeat 2, 3 and 5 identical blocks (and a 32-op loop)
    w, _ = build_workload([str(trace("legacy_2021_v100"))])
    assert (
        detect_baseline(w)
        .how["layers"]
        .startswith("not detected: several stacks: repeats of 32, 5, 3 and 2 blocks")
    )


def test_an_inference_trace_with_module_annotations_keeps_its_36_blocks():
    w, _ = build_workload([str(trace("allgather_b200"))])
    base = detect_baseline(w)
    assert base.values["layers"] == 36
    assert base.verdict is not None and base.verdict.ranks[0].share == pytest.approx(
        0.834, abs=0.01
    )


def test_sizes_read_inside_declined_layers_are_withheld_until_the_layers_are_given():
    """Forward ops with (b, s, hidden) = (2, 16, 32) activations, in 4 forward and 3 backward
    blocks: the verdict declines, so hidden, seq, the micro-batch size and the tokens are
    withheld."""
    g = job_rank([[(4, 3, "mm")]])
    forward = np.array([n.startswith("aten::mm") for n in g.names])[g.tasks.name_idx]
    g = g.replace(dims=("[[2, 16, 32]]",),
                  task_dims_idx=np.where(forward, 0, -1).astype(np.int32))  # fmt: skip
    w = Workload((g,))
    base = detect_baseline(w)
    assert base.withheld == ("hidden", "seq", "microbatch_size", "tokens")
    assert "hidden" not in base.values
    with pytest.raises(ConfigError) as err:
        estimate(w, [parse_scenario(["hidden=64"])])
    assert str(err.value) == (
        "hidden=64: needs the baseline's hidden, which the trace does not show (read inside "
        "layer blocks the detection declined (see `lumos layers`)); give --baseline layers=N "
        "to accept the repeated blocks `lumos layers` lists, or --baseline hidden=N (then also "
        "ffn, tokens)"
    )
    given = detect_baseline(w, {"layers": 4})
    assert (given.withheld, given.values["hidden"], given.values["seq"]) == ((), 32, 16)


def test_a_group_belongs_to_the_step_its_first_block_starts_in():
    """Tasks 0-4 start at 0, 10, 20, 30, 40; steps are [10, 30) and [30, 50). A group's step is
    the one holding the start of its first block's first task (windows are half-open): blocks
    (0, 1), (2, 3) start at 0, before any step (-1), though their later tasks are inside one;
    (1,), (2,) at 10, step 0's first ns; (3,), (4,) at 30, step 0's end, so step 1."""
    b = GraphBuilder()
    th = b.thread(1)
    for k in range(5):
        b.task(th, f"op{k}", 5, ts_ns=10 * k)
    g = b.build().validate()
    windows = [(10, 30), (30, 50)]

    def step(*blocks: list[int]) -> int:
        grp = Group(0, tuple(np.array(x, dtype=np.int64) for x in blocks), "layer", "forward", 0)
        return _step_index(g, grp, windows)

    assert [step([0, 1], [2, 3]), step([1], [2]), step([3], [4])] == [-1, 0, 1]
