"""Changing the number of pipeline stages: a recorded 2-stage GPipe run split into 4 stages."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tests.estimate.test_reorder import _issue_order

from lumos.errors import ConfigError
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layers import Group, LayerMap, find_layers
from lumos.estimate.merge import merge_stages
from lumos.estimate.reshape import reshape_workload
from lumos.estimate.stages import Boundary, _Editor, _readdress, restage
from lumos.graph.kinds import CommType, DepKind, TaskKind
from lumos.graph.model import ProcessGroup, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload
from lumos.sim import simulate
from lumos.sim.cost import TracedCost

# 2 stages (rank 0 first), 4 layers (2 per stage), 2 micro-batches, 3 recorded steps, GPipe
RUN = Path(__file__).parents[1] / "data" / "whatif_pairs" / "pp_microbatches_x2"


@pytest.fixture(scope="module")
def traced():
    workload, _ = build_workload([str(RUN)])
    return workload, [find_layers(g) for g in workload.graphs]


def _messages(g) -> str:
    """The rank's sends and receives in program order: ``S2`` sends to rank 2, ``R0``
    receives from rank 0."""
    t, c = g.tasks, g.comms
    has = np.flatnonzero(t.comm_idx >= 0)
    has = has[np.argsort(t.order[has], kind="stable")]
    ci = t.comm_idx[has]
    return " ".join(
        ("S" if k == int(CommType.SEND) else "R") + str(p)
        for k, p in zip(c.kind[ci].tolist(), c.peer_rank[ci].tolist(), strict=True)
    )


def test_four_stages_exchange_with_their_neighbours(traced):
    workload, maps = traced
    out, counts = restage(workload, maps, layers=4, new_pp=4)
    assert [g.rank for g in out.graphs] == [0, 1, 2, 3]
    assert {g.world_size for g in out.graphs} == {4}
    step = {  # per step: 2 forwards, then 2 backwards
        0: "S1 S1 R1 R1",
        1: "R0 S2 R0 S2 R2 S0 R2 S0",
        2: "R1 S3 R1 S3 R3 S1 R3 S1",
        3: "R2 R2 S2 S2",
    }
    for g in out.graphs:
        assert _messages(g) == " ".join([step[g.rank]] * 3)
    # new boundary messages: stage 1's forward receives and backward sends (it was stage 0's
    # embedding) and stage 2's forward sends and backward receives (stage 1's head and loss)
    assert counts["messages_added"] == 2 * (2 + 2) * 3
    # the middle stages are recognised as pipeline stages of 2 micro-batches
    for g in out.graphs:
        lm = find_layers(g)
        assert lm.num_microbatches == 2
        assert sorted({x.phase for x in lm.microbatch_groups()}) == ["backward", "forward"]
    simulate(out, TracedCost())  # every send meets its receive


def test_each_new_stage_runs_half_the_layers_and_hands_over_the_rest(traced):
    workload, maps = traced
    out, counts = restage(workload, maps, layers=4, new_pp=4)
    total = 0
    for new, g in enumerate(out.graphs):
        old, lm = workload.graphs[new // 2], maps[new // 2]
        # every layer group keeps its first block of 2 (each new stage holds 1 layer)
        dropped = sum(int(old.tasks.dur_ns[x.blocks[1]].sum()) for x in lm.layer_groups())
        # the tasks handed to the other half take no time; the messages replacing them take
        # the trace's median transfer of their kind
        t = g.tasks
        added = np.flatnonzero(t.comm_idx >= len(old.comms))
        handed = (
            int(old.tasks.dur_ns.sum())
            - dropped
            - (int(t.dur_ns.sum()) - int(t.dur_ns[added].sum()))
        )
        if new in (0, 3):
            assert len(added) == 0 and handed == 0
        else:
            assert len(added) == 12 and handed > 0
            assert (t.kind[added] == int(TaskKind.CPU_COMM)).all()
        total += len(added)
    assert total == counts["messages_added"]


def test_layers_and_stages_change_together(traced):
    workload, _ = traced
    base = detect_baseline(workload)
    out, edits = reshape_workload(workload, base, {"pp": 4, "layers": 8})
    assert edits[0].name == "pp 2 -> 4, layers 4 -> 8"
    assert [find_layers(g).num_layers for g in out.graphs] == [2, 2, 2, 2]


def test_what_cannot_be_split_is_refused(traced):
    workload, maps = traced
    with pytest.raises(ConfigError, match="pp=3: the traced 2 stages split or merge evenly"):
        restage(workload, maps, layers=6, new_pp=3)
    with pytest.raises(ConfigError, match="layers=6 do not split evenly into 4"):
        restage(workload, maps, layers=6, new_pp=4)


def test_the_split_stages_keep_their_messages_tags(traced):
    """The trace's gloo messages all carry tag 0; a message a split adds at a new boundary has
    none recorded (-1). New stages 1 and 2 each gained 4 messages per step over 3 steps (see
    ``test_four_stages_exchange_with_their_neighbours``), stages 0 and 3 none; each new
    stage keeps 4 traced messages per step."""
    workload, maps = traced
    assert {int(x) for g in workload.graphs for x in g.comms.tag.tolist()} == {0}
    out, counts = restage(workload, maps, layers=4, new_pp=4)
    tags = []
    for g in out.graphs:
        ci = g.tasks.comm_idx[g.tasks.comm_idx >= 0]
        t = g.comms.tag[ci]
        tags.append((int((t == 0).sum()), int((t == -1).sum()), len(t)))
    assert tags == [(12, 0, 12), (12, 12, 24), (12, 12, 24), (12, 0, 12)]
    assert counts["messages_added"] == 24


def _optimizer_split_in_four(lm: LayerMap) -> LayerMap:
    """``lm`` with each step's optimizer updates (2 blocks, one per layer) cut into 4 blocks
    (two halves of each), as a loop over 2 parameter tensors per layer would show."""

    def split(x: Group) -> Group:
        halves = tuple(h for b in x.blocks for h in np.array_split(b, 2))
        return Group(x.processor_idx, halves, x.level, x.phase, x.step, x.parent)

    groups = tuple(
        split(x) if x.level == "layer" and x.phase == "optimizer" else x for x in lm.groups
    )
    return LayerMap(groups, lm.num_layers, lm.num_microbatches, lm.how)


def test_optimizer_updates_are_resized_only_when_they_come_one_per_layer(traced):
    """Each traced stage runs 2 layers and, per step, 2 optimizer blocks of 180 ops (one per
    layer). Split into 4 stages of 1 layer, every new stage keeps block 0's updates once and
    drops block 1's. Optimizer blocks that are not one per layer (4 per step here) cannot be
    resized by the layer count: each new stage keeps every one of their ops, once. Ops are
    followed by their source event, which copies keep."""
    workload, maps = traced
    out, _ = restage(workload, maps, layers=4, new_pp=4)
    out4, _ = restage(workload, [_optimizer_split_in_four(lm) for lm in maps], layers=4, new_pp=4)
    for new in range(4):
        old, lm = workload.graphs[new // 2], maps[new // 2]
        opt = [x for x in lm.layer_groups() if x.phase == "optimizer"]
        assert [(x.count, x.period) for x in opt] == [(2, 180)] * 3
        first = old.tasks.event_idx[np.concatenate([x.blocks[0] for x in opt])]
        second = old.tasks.event_idx[np.concatenate([x.blocks[1] for x in opt])]
        for g, kept in ((out.graphs[new], (1, 0)), (out4.graphs[new], (1, 1))):
            ev = g.tasks.event_idx
            times = np.bincount(ev[ev >= 0], minlength=int(old.tasks.event_idx.max()) + 1)
            assert {int(x) for x in times[first]} == {kept[0]}
            assert {int(x) for x in times[second]} == {kept[1]}


def test_what_cannot_be_merged_is_refused():
    workload, _ = build_workload([str(FOUR)])
    maps = [find_layers(g) for g in workload.graphs]
    with pytest.raises(
        ConfigError, match=r"^pp=3: the traced 4 stages merge evenly only into a divisor of 4$"
    ):
        merge_stages(workload, maps, 3)


# a recorded 4-stage GPipe run: ranks 1 and 2 receive and send in every micro-batch
FOUR = Path(__file__).parents[1] / "data" / "pipeline_4_stages"


def test_a_recorded_pipelines_middle_stages_are_found():
    workload, _ = build_workload([str(FOUR)])
    maps = [find_layers(g) for g in workload.graphs]
    assert [(lm.num_layers, lm.num_microbatches) for lm in maps] == [(2, 2)] * 4
    for lm in maps:  # per step one forward group and one backward group of 2 blocks
        assert sorted((x.step, x.phase, x.count) for x in lm.microbatch_groups()) == [
            (s, p, 2) for s in (0, 1) for p in ("backward", "forward")
        ]
    base = detect_baseline(workload)
    assert (base.values["pp"], base.values["layers"], base.values["microbatches"]) == (4, 8, 2)
    # re-ordered to 1F1B on 4 stages: stage 0 runs F1 F2 B1 B2 (2 micro-batches < 3 warm-ups),
    # the last stage F1 B1 F2 B2 (each send issued with the next receive), without a deadlock
    out, _ = reshape_workload(workload, base, {}, "1f1b")
    simulate(out, TracedCost())
    assert _issue_order(out.graphs[0]) == "SSRR" * 2
    assert _issue_order(out.graphs[3]) == "RSRS" * 2


def test_a_recorded_four_stage_pipeline_splits_into_eight():
    workload, _ = build_workload([str(FOUR)])
    out, edits = reshape_workload(workload, detect_baseline(workload), {"pp": 8})
    assert edits[0].name == "pp 4 -> 8"
    # the old middle stages needed no new boundary: only the first stage's embedding and the
    # last stage's head are handed over (2 messages per micro-batch each way, 2 steps)
    assert "16 messages at the new stage boundaries" in edits[0].detail
    assert [g.rank for g in out.graphs] == list(range(8))
    step = "R2 S4 R2 S4 R4 S2 R4 S2"  # new stage 3 (old stage 1's second half)
    assert _messages(out.graphs[3]) == " ".join([step] * 2)
    simulate(out, TracedCost())


def _p2p_names(g) -> str:
    """``S``/``R`` per send/receive op on the rank's thread in program order, matched or not."""
    t = g.tasks
    order = np.argsort(t.order, kind="stable")
    out = []
    for i in order.tolist():
        name = g.task_name(i)
        if name.startswith("gloo:send"):
            out.append("S")
        elif name.startswith("gloo:recv"):
            out.append("R")
    return "".join(out)


def test_two_stages_merged_run_micro_batch_by_micro_batch(traced):
    workload, _ = traced
    base = detect_baseline(workload)
    out, edits = reshape_workload(workload, base, {"pp": 1})
    assert edits[0].name == "pp 2 -> 1"
    assert edits[0].detail == "24 messages between merged stages made local"
    (g,) = out.graphs
    assert (g.rank, g.world_size) == (0, 1)
    assert g.num_tasks == sum(x.num_tasks for x in workload.graphs)
    # stage 0's forward i (ending in its send), then stage 1's (starting with its receive);
    # backward i of stage 1 (ending in its send) before stage 0's (starting with its receive)
    assert _p2p_names(g) == "SRSR" * 2 * 3
    assert (g.tasks.comm_idx < 0).all()  # nothing left to match: one rank
    # a local message waits for nobody: the gaps beside it are at most the thread's median gap
    e = g.edges
    on_thread = e.kind == 0  # INTRA_THREAD
    local = np.array([g.task_name(i).startswith("gloo:") for i in range(g.num_tasks)])
    near = on_thread & (local[e.src] | local[e.dst])
    traced = np.concatenate([x.edges.delay_ns[x.edges.kind == 0] for x in workload.graphs])
    assert near.sum() >= 24 and e.delay_ns[near].max() <= 2 * np.median(traced)
    assert traced.max() > 10 * np.median(traced)  # (the trace had long ones)
    # one thread, nothing to wait for: the step is every task and every gap, one after another
    res = simulate(out, TracedCost())
    assert res.makespan_ns == int(g.tasks.dur_ns.sum()) + int(e.delay_ns[on_thread].sum())


def test_four_recorded_stages_merged_into_two():
    workload, _ = build_workload([str(FOUR)])
    out, edits = reshape_workload(workload, detect_baseline(workload), {"pp": 2})
    assert edits[0].name == "pp 4 -> 2"
    # on each new rank, per step and micro-batch, a send and its receive forward and backward
    # became local: 2 ranks x 2 steps x 2 micro-batches x 4
    assert "32 messages between merged stages made local" in edits[0].detail
    assert [g.rank for g in out.graphs] == [0, 1]
    # rank 0 (stages 0 and 1) still sends forward to rank 1 and receives from it backward
    assert _messages(out.graphs[0]) == " ".join(["S1 S1 R1 R1"] * 2)
    assert _messages(out.graphs[1]) == " ".join(["R0 R0 S0 S0"] * 2)
    simulate(out, TracedCost())


def test_a_block_with_nothing_outside_its_layers_cannot_become_a_stage_boundary(traced):
    """A new stage boundary turns the ops before (after) a micro-batch block's layers into the
    receive (send); with none there it is refused with one message."""
    from lumos.estimate.stages import Boundary, _Editor

    workload, _ = traced
    ed = _Editor(workload.graphs[0])
    with pytest.raises(ConfigError) as err:
        ed.hand_over(np.array([], dtype=np.int64), Boundary(workload, int(CommType.RECV)), 1)
    assert str(err.value) == (
        "pp: a micro-batch block has no work outside its layers to turn into the new stage boundary"
    )


def _p2p_sizes(g) -> list[int]:
    c = g.comms
    return c.size_bytes[np.isin(c.kind, [int(CommType.SEND), int(CommType.RECV)])].tolist()


def test_a_wider_model_sends_wider_activations_between_its_stages(traced):
    """Each traced message carries one micro-batch's activations, b 2 x s 32 x hidden 128 x
    4 bytes = 32,768 (12 per rank). Hidden 128 -> 256 (same tokens): 2 x 32 x 256 x 4 =
    65,536 bytes, activations x2."""
    workload, _ = traced
    base = detect_baseline(workload)
    assert [_p2p_sizes(g) for g in workload.graphs] == [[32768] * 12] * 2
    out, edits = reshape_workload(workload, base, {"hidden": 256})
    assert [_p2p_sizes(g) for g in out.graphs] == [[65536] * 12] * 2
    assert edits[-1].name == "communication re-sized"
    assert edits[-1].detail.endswith(", activations x2.000")


def test_merged_stages_are_then_re_shaped(traced):
    """pp 2 -> 1 and hidden 128 -> 256 together: the stages are merged first, then the one
    merged rank is re-timed for the new width (found again on the merged graph) and its
    communication re-sized; all of both stages' tasks are kept."""
    workload, _ = traced
    out, edits = reshape_workload(workload, detect_baseline(workload), {"pp": 1, "hidden": 256})
    names = [e.name for e in edits]
    assert names == ["pp 2 -> 1", "hidden 128 -> 256", "communication re-sized"]
    (g,) = out.graphs
    assert g.num_tasks == sum(x.num_tasks for x in workload.graphs)


def test_a_sub_stage_addresses_its_messages_to_its_new_neighbours():
    """Rank 1, traced stage 1 of 3, as sub-stage 1 of 2, i.e. new rank 3 of 6: its send to
    rank 2 (the stage after) goes to new rank 4, its receive from rank 0 (the stage before)
    comes from new rank 2; a message to its own stage, one to no named peer and a collective
    keep their peer. The job-wide group (3 ranks, one per stage) spans the 6 new ranks, keeping
    its name, description and backend; a group of 2 is kept as it is."""
    b = GraphBuilder(rank=1, world_size=3)
    th = b.thread(1)
    world = b.process_group("0", (0, 1, 2))
    pair = b.process_group("7", (0, 1))
    for kind, peer, pg in ((CommType.SEND, 2, -1), (CommType.RECV, 0, -1), (CommType.SEND, 1, -1),
                           (CommType.RECV, -1, -1), (CommType.ALL_REDUCE, 2, world),
                           (CommType.ALL_REDUCE, -1, pair)):  # fmt: skip
        b.task(th, kind.name, 10, TaskKind.CPU_COMM, comm=b.comm(kind, 64, pg=pg, peer_rank=peer))
    g = b.build()
    g = g.replace(process_groups=(ProcessGroup("0", (0, 1, 2), "default_pg", "gloo"),
                                  g.process_groups[pair]))  # fmt: skip
    out = _readdress(g.validate(), {0: 0, 1: 1, 2: 2}, 2, 3, 6)
    out.validate()
    assert (out.rank, out.world_size) == (3, 6)
    assert out.comms.peer_rank.tolist() == [4, 2, 1, -1, 2, -1]
    assert out.process_groups == (
        ProcessGroup("0", (0, 1, 2, 3, 4, 5), "default_pg", "gloo"),
        ProcessGroup("7", (0, 1)),
    )
    assert g.comms.peer_rank.tolist() == [2, 0, 1, -1, 2, -1]  # the traced graph is not edited


@pytest.mark.parametrize("dims", [True, False])
def test_handed_over_work_becomes_the_boundary_message_and_takes_no_time(dims):
    """Rank 0 of 2, thread: ``embed`` (40 ns), a launch (5 ns, 2 ns after; its kernel 30 ns),
    ``mm`` (100 ns, 3 ns after), a send to rank 1 (20 ns, 4 ns after; 512 B, 5 ns of it
    waiting, tag 0, seq 3, group 0). The trace's sends give the boundary message ``gloo:send``,
    512 B, 20 - 5 = 15 ns. ``embed`` and the launch handed over as a send to new rank 5:
    ``embed`` becomes that send (15 ns, comm 1), the launch and its kernel take no time, and so
    does the overhead inside the handed-over work (2 -> 0 ns); 2 tasks zeroed. ``mm`` handed
    over as a receive named ``nccl:recv`` (new: added to the names) from rank 6, 128 B, 9 ns:
    it becomes comm 2 and keeps the 3 ns before it. The new messages have no group, sequence
    number, tag or waiting; handed-over tasks lose their shapes."""
    b = GraphBuilder(rank=0, world_size=2)
    th, st = b.thread(1), b.stream(7)
    pg = b.process_group("0", (0, 1))
    b.task(th, "embed", 40)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, gap_ns=2)
    b.task(th, "aten::mm", 100, gap_ns=3)
    send = b.comm(CommType.SEND, 512, pg=pg, seq_id=3, peer_rank=1, tag=0, wait_ns=5)
    b.task(th, "gloo:send", 20, TaskKind.CPU_COMM, gap_ns=4, comm=send)
    b.edge(launch, b.task(st, "embed_kernel", 30), DepKind.LAUNCH, 1)
    g = b.build()
    if dims:
        g = g.replace(dims=("[[1]]", "[[2]]"), task_dims_idx=np.array([0, 0, 1, -1, 0], np.int32))
    g = g.validate()
    msg = Boundary(Workload((g,)), int(CommType.SEND))
    assert (msg.name, msg.size_bytes, msg.transfer_ns) == ("gloo:send", 512, 15)
    ed = _Editor(g)
    ed.hand_over(np.array([0, 1]), msg, 5)
    recv = SimpleNamespace(kind=int(CommType.RECV), name="nccl:recv", size_bytes=128,
                           transfer_ns=9)  # fmt: skip
    ed.hand_over(np.array([2]), recv, 6)  # type: ignore[arg-type]
    assert (ed.zeroed, ed.converted) == (2, 2)
    out = ed.graph().validate()
    assert out.names == (*g.names, "nccl:recv")
    assert [out.task_name(i) for i in range(5)] == ["gloo:send", "cudaLaunchKernel",
                                                    "nccl:recv", "gloo:send", "embed_kernel"]  # fmt: skip
    t = out.tasks
    assert t.kind.tolist() == [int(k) for k in (TaskKind.CPU_COMM, TaskKind.RUNTIME,
                                                TaskKind.CPU_COMM, TaskKind.CPU_COMM,
                                                TaskKind.KERNEL)]  # fmt: skip
    assert t.dur_ns.tolist() == [15, 0, 9, 20, 0]
    assert t.comm_idx.tolist() == [1, -1, 2, 0, -1]
    assert out.edges.delay_ns.tolist() == [0, 3, 4, 1]
    c = out.comms
    assert c.kind.tolist() == [int(CommType.SEND), int(CommType.SEND), int(CommType.RECV)]
    assert c.size_bytes.tolist() == [512, 512, 128]
    assert c.pg_idx.tolist() == [0, -1, -1]
    assert c.seq_id.tolist() == [3, -1, -1]
    assert c.peer_rank.tolist() == [1, 5, 6]
    assert c.tag.tolist() == [0, -1, -1]
    assert c.wait_ns.tolist() == [5, 0, 0]
    if dims:
        assert out.task_dims_idx.tolist() == [-1, 0, -1, -1, 0]
        assert g.task_dims_idx.tolist() == [0, 0, 1, -1, 0]
    else:
        assert out.task_dims_idx is None
    assert g.tasks.dur_ns.tolist() == [40, 5, 100, 20, 30]  # the traced graph is not edited
    assert _Editor(g).graph().comms == g.comms  # nothing handed over: the same messages


def test_re_staged_graphs_drop_their_memory_and_say_why(traced):
    """Each rank given a one-row memory table: splitting 2 stages into 4 or merging them into
    1 mixes stages' tasks, so every graph's memory becomes unknown (None) and the last edit
    says so, with this exact model and detail."""
    from lumos.graph.memory import GraphMemory

    workload, _ = traced

    def col(v, dtype=np.int64):
        return np.array([v], dtype=dtype)

    mem = GraphMemory(
        event_idx=col(0), offset_ns=col(0), anchor_dur_ns=col(10), delta_bytes=col(1000),
        num_bytes=col(1000), alloc_row=col(-1), op_name_idx=col(-1, np.int32),
        phase=col(0, np.int8), total_reserved=col(-1), shape_name_idx=col(-1, np.int32),
        shape_dims_idx=col(-1, np.int32), op_names=(), shape_dims=(), device_type=1,
        device_id=0, base_bytes=0, levels_recorded=False,
    )  # fmt: skip
    with_mem = workload.replace_graphs([g.replace(memory=mem) for g in workload.graphs])
    base = detect_baseline(with_mem)
    for pp in (4, 1):
        out, edits = reshape_workload(with_mem, base, {"pp": pp})
        assert [g.memory for g in out.graphs] == [None] * len(out.graphs)
        assert edits[-1].to_dict() == {
            "edit": "memory unknown", "tasks_added": 0, "tasks_removed": 0, "tasks_retimed": 0,
            "model": "pipeline stages changed",
            "detail": "memory is not modelled across re-staged pipelines",
        }  # fmt: skip
