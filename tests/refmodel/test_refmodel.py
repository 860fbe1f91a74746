"""The reference model keeps its own semantics, and the traces it writes load in lumos.

Expected values are recomputed here from the program (the workload as data), never read back
from the runtime that produced them.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest
from tests.refmodel import (
    CHANGES,
    SCENARIOS,
    build_program,
    generate,
    run_scenario,
    step_durations,
    to_kineto,
    write_trace,
)
from tests.refmodel.__main__ import main as cli_main
from tests.refmodel.builder import ALPHA_NS, BUS_BYTES_PER_S, WORLD
from tests.refmodel.program import (
    DEVICE_SYNC,
    EVENT_RECORD,
    MEMCPY,
    STREAM_SYNC,
    STREAM_WAIT_EVENT,
    Call,
    Cpu,
    Op,
    Poll,
    is_cpu_only,
    iter_nodes,
    launched_work,
    step_ops,
)
from tests.refmodel.runtime import Execution

RUNS = [(s, label) for s in SCENARIOS for label in CHANGES]


def _run(scenario: str, label: str) -> Execution:
    c = CHANGES[label]
    return run_scenario(
        scenario,
        kernel_scale=c.get("kernel_scale", 1.0),
        cpu_scale=c.get("cpu_scale", 1.0),
        nccl_scale=c.get("nccl_scale", 1.0),
    )


def _steps(scenario: str, label: str) -> list[int]:
    return [end - start for _, start, end in _run(scenario, label).steps()]


# ---- determinism --------------------------------------------------------------------------


def test_same_seed_same_json_and_seeds_differ() -> None:
    a = json.dumps(generate("mixed", seed=3))
    assert a == json.dumps(generate("mixed", seed=3))
    assert a != json.dumps(generate("mixed", seed=4))


def test_unit_scales_are_the_baseline() -> None:
    base = generate("backward_thread_nccl")
    same = generate("backward_thread_nccl", kernel_scale=1.0, cpu_scale=1.0, nccl_scale=1.0)
    assert json.dumps(base) == json.dumps(same)


def test_bad_scale_and_unknown_scenario_are_refused() -> None:
    with pytest.raises(ValueError, match="kernel_scale"):
        generate("gpu_bound", kernel_scale=0)
    with pytest.raises(ValueError, match="unknown scenario"):
        build_program("nope")


# ---- causal invariants, checked on every scenario and change --------------------------------


def _enqueued_before(ex: Execution, t: int) -> list:
    return [g for g in ex.gpu if g.launch is None or g.launch.start_ns < t]


@pytest.mark.parametrize(("scenario", "label"), RUNS)
def test_causal_invariants(scenario: str, label: str) -> None:
    ex = _run(scenario, label)
    last: dict[int, int] = {}
    for g in ex.gpu:  # enqueue order
        assert g.end_ns >= g.start_ns
        if g.launch is not None:
            call = g.launch.node
            assert isinstance(call, Call)
            assert g.start_ns >= g.launch.start_ns + call.latency_ns
        assert g.start_ns >= last.get(g.stream, 0), "overlaps the previous work on its stream"
        last[g.stream] = g.end_ns
    records: dict[str, tuple[int, int]] = {}  # event -> (stream, record call start)
    for s in sorted(ex.cpu, key=lambda s: s.start_ns):
        call = s.node
        if not isinstance(call, Call):
            continue
        before = _enqueued_before(ex, s.start_ns)
        if call.api == STREAM_SYNC:
            drain = max([g.end_ns for g in before if g.stream == call.stream], default=0)
            assert s.end_ns >= drain + call.reaction_ns
        elif call.api == DEVICE_SYNC:
            assert s.end_ns >= max([g.end_ns for g in before], default=0) + call.reaction_ns
        elif call.api == MEMCPY:
            assert s.gpu is not None and s.end_ns >= s.gpu.end_ns + call.reaction_ns
        elif call.api == EVENT_RECORD:
            records[call.event] = (call.stream, s.start_ns)
        elif call.api == STREAM_WAIT_EVENT and call.event in records:
            rec_stream, rec_t = records[call.event]
            done = max(
                [g.end_ns for g in _enqueued_before(ex, rec_t) if g.stream == rec_stream], default=0
            )
            later = [
                g
                for g in ex.gpu
                if g.stream == call.stream and g.launch and g.launch.start_ns > s.start_ns
            ]
            assert all(g.start_ns >= done for g in later)
        if call.api not in (STREAM_SYNC, DEVICE_SYNC, MEMCPY):
            assert s.end_ns - s.start_ns == call.cost_ns, "a non-blocking call never waits"
    # each thread runs its nodes in program order; a polling thread's next op starts after
    # the kernel it polls for has ended (plus its reaction)
    tag_end = {g.work.tag: g.end_ns for g in ex.gpu if g.work.tag}
    span_of = {id(s.node): s for s in ex.cpu}
    for th in ex.program.threads:
        top = [s.node for s in ex.cpu if s.tid == th.tid and s.parent is None]
        assert top == [n for n in th.body if isinstance(n, Op | Call)]
        for i, node in enumerate(th.body):
            if isinstance(node, Poll):
                nxt = span_of[id(th.body[i + 1])]
                assert nxt.start_ns >= tag_end[node.tag] + node.reaction_ns


def test_backward_thread_runs_inside_the_main_threads_backward_call() -> None:
    ex = run_scenario("backward_thread_nccl")
    bwd_tid = ex.program.threads[1].tid
    main_bwd = [
        s for s in ex.cpu if isinstance(s.node, Op) and s.node.name == "torch.autograd.backward"
    ]
    bwd_ops = [s for s in ex.cpu if s.tid == bwd_tid and s.parent is None]
    assert len(main_bwd) == 4
    for m in main_bwd:
        inside = [s for s in bwd_ops if m.start_ns < s.start_ns < m.end_ns]
        assert inside, "the backward thread works while the main thread waits"
        assert max(s.end_ns for s in inside) <= m.end_ns
    # the optimizer's kernels start after every all-reduce of the step has ended
    nccl = [g for g in ex.gpu if g.work.coll is not None]
    adam = [g for g in ex.gpu if "FusedAdam" in g.work.name]
    assert len(nccl) == 8 and len(adam) == 16
    for i in range(4):
        assert adam[4 * i].start_ns >= max(g.end_ns for g in nccl[2 * i : 2 * i + 2])


# ---- what-if arithmetic ------------------------------------------------------------------------


def _lead_ns(nodes: tuple) -> tuple[int, bool]:
    """CPU time from the start of ``nodes`` to the start of their first runtime call."""
    t = 0
    for n in nodes:
        if isinstance(n, Call):
            return t, True
        if isinstance(n, Cpu):
            t += n.ns
        elif isinstance(n, Op):
            inner, found = _lead_ns(n.children)
            t += n.pre_ns + inner
            if found:
                return t, True
            t += n.post_ns
    return t, False


def _gpu_bound_step(step: Op, kernel_scale: float) -> int:
    """A step that launches far ahead and ends in cudaDeviceSynchronize: CPU lead to the first
    launch + launch latency + every activity back to back + the sync's reaction + the span's
    own tail."""
    lead, _ = _lead_ns(step.children)
    first = next(n for n in iter_nodes(step.children) if isinstance(n, Call))
    sync = step.children[-1]
    assert isinstance(sync, Call) and sync.api == DEVICE_SYNC
    gpu = sum(round(w.dur_ns * kernel_scale) for w in launched_work(step.children))
    return step.pre_ns + lead + first.latency_ns + gpu + sync.reaction_ns + step.post_ns


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_gpu_bound_steps_are_the_sum_of_their_kernels(scale: float) -> None:
    steps = step_ops(build_program("gpu_bound"))
    assert step_durations("gpu_bound", kernel_scale=scale) == [
        _gpu_bound_step(s, scale) for s in steps
    ]


def test_gpu_bound_halving_kernels_saves_half_their_time() -> None:
    base = step_durations("gpu_bound")
    half = step_durations("gpu_bound", kernel_scale=0.5)
    for s, b, h in zip(step_ops(build_program("gpu_bound")), base, half, strict=True):
        work = launched_work(s.children)
        k = sum(w.dur_ns for w in work)
        assert abs((b - h) - k / 2) <= len(work)  # 0.5 ns of rounding per kernel
        assert 0.45 < h / b < 0.55
    assert step_durations("gpu_bound", cpu_scale=2.0) != base  # zero_grad is on the lead


def _cpu_only_ns(nodes: tuple) -> int:
    """The CPU cost that cpu_scale multiplies: everything inside CPU-only ops."""
    total = 0
    for n in nodes:
        if isinstance(n, Op):
            if is_cpu_only(n):
                total += n.pre_ns + n.post_ns
                for c in iter_nodes(n.children):
                    if isinstance(c, Cpu):
                        total += c.ns
                    elif isinstance(c, Op):
                        total += c.pre_ns + c.post_ns
            else:
                total += _cpu_only_ns(n.children)
    return total


def test_cpu_bound_follows_the_cpu_not_the_kernels() -> None:
    base = step_durations("cpu_bound")
    for label in ("kernels_x0.5", "kernels_x2"):
        changed = _steps("cpu_bound", label)
        assert all(abs(c - b) <= 0.01 * b for b, c in zip(base, changed, strict=True))
    cpu2 = step_durations("cpu_bound", cpu_scale=2.0)
    steps = step_ops(build_program("cpu_bound"))
    for s, b, c in zip(steps, base, cpu2, strict=True):
        assert c - b == _cpu_only_ns(s.children)  # the CPU is the whole critical path
        assert 1.5 < c / b < 2.0


def _nccl_kernels(doc: dict) -> list[dict]:
    return [
        e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")
    ]


@pytest.mark.parametrize("scenario", ["backward_thread_nccl", "mixed"])
def test_nccl_scale_stretches_only_the_transfer(scenario: str) -> None:
    base = _nccl_kernels(generate(scenario))
    tripled = _nccl_kernels(generate(scenario, nccl_scale=3.0))
    assert len(base) == len(tripled) == 8
    waited = 0
    for b, t in zip(base, tripled, strict=True):
        n = b["args"]["In msg nelems"]
        transfer = ALPHA_NS + 2 * (WORLD - 1) / WORLD * 4 * n * 1e9 / BUS_BYTES_PER_S
        assert (t["dur"] - b["dur"]) * 1000 == pytest.approx(2 * transfer, abs=2)
        waited += int(b["dur"] * 1000 - transfer > 1000)
    assert waited > 0, "peers are late for some instances"
    if scenario == "backward_thread_nccl":
        assert waited < 8, "and on time for others (seed 0)"
    steps_b, steps_t = step_durations(scenario), step_durations(scenario, nccl_scale=3.0)
    assert all(t > b for b, t in zip(steps_b, steps_t, strict=True))


# ---- trace shape ---------------------------------------------------------------------------


def test_clock_lag_shows_kernels_before_their_launch() -> None:
    doc = generate("clock_lag")
    launch_ts = {
        e["args"]["correlation"]: e["ts"]
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"
    }
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    early = [k for k in kernels if k["ts"] < launch_ts[k["args"]["correlation"]]]
    assert len(early) > len(kernels) // 2
    assert all(k["ts"] + 30 >= launch_ts[k["args"]["correlation"]] for k in kernels)


def test_backlog_is_traced_without_launches_and_drained_by_the_first_sync() -> None:
    ex = run_scenario("queued_before_window")
    backlog = [g for g in ex.gpu if g.launch is None]
    assert len(backlog) == 18 and backlog[0].start_ns == 0
    doc = to_kineto(ex)
    corr = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
    assert not {g.corr for g in backlog} & corr
    first_call = min((s for s in ex.cpu if isinstance(s.node, Call)), key=lambda s: s.start_ns)
    assert isinstance(first_call.node, Call) and first_call.node.api == DEVICE_SYNC
    assert first_call.end_ns >= backlog[-1].end_ns
    assert first_call.end_ns - first_call.start_ns > 3_000_000


def test_document_shape() -> None:
    doc = generate("mixed")
    assert doc["distributedInfo"]["world_size"] == 8 and len(doc["deviceProperties"]) == 1
    ev = doc["traceEvents"]
    cats = {e.get("cat") for e in ev if e["ph"] == "X"}
    assert cats == {
        "cpu_op",
        "user_annotation",
        "cuda_runtime",
        "kernel",
        "gpu_memcpy",
        "gpu_user_annotation",
        "gpu_memset",
        "Trace",
    }
    starts = {e["id"] for e in ev if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"] for e in ev if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert starts == ends
    rpc = [e for e in ev if e["name"] == "record_param_comms"]
    assert [e["args"]["Seq"] for e in rpc] == list(range(8))
    assert {e["tid"] for e in ev if e.get("cat") == "kernel"} == {7, 24, 28}
    assert len({e["tid"] for e in ev if e.get("cat") == "cpu_op"}) == 3


def test_write_trace_and_cli(tmp_path) -> None:
    doc = generate("cpu_bound")
    p = write_trace(doc, tmp_path / "a.json.gz")
    assert json.loads(gzip.decompress(p.read_bytes())) == doc
    assert cli_main([str(tmp_path / "out"), "--scenario", "cpu_bound"]) == 0
    truth = json.loads((tmp_path / "out" / "truth.json").read_text())
    runs = truth["scenarios"]["cpu_bound"]
    assert set(runs) == set(CHANGES)
    for label, run in runs.items():
        assert (tmp_path / "out" / run["file"]).exists()
        assert [s["dur_ns"] for s in run["steps"]] == _steps("cpu_bound", label)


# ---- lumos reads every trace -------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_lumos_reads_the_traces(scenario: str, tmp_path) -> None:
    lumos = pytest.importorskip("lumos")
    for label in ("base", "kernels_x0.5"):
        ex = _run(scenario, label)
        path = write_trace(to_kineto(ex), tmp_path / f"{scenario}.{label}.json.gz")
        t = lumos.read_kineto(path)
        truth = [end - start for _, start, end in ex.steps()]
        assert [int(d) for d in t.steps.dur_ns] == truth
        counts = t.category_counts() if callable(t.category_counts) else t.category_counts
        assert counts["kernel"] == sum(g.work.cat == "kernel" for g in ex.gpu)
        colls: dict[int, int] = defaultdict(int)
        for g in ex.gpu:
            if g.work.coll is not None:
                colls[g.work.coll.nelems * 4] += 1
        assert sorted(int(b) for b in t.collectives.size_bytes) == sorted(
            b for b, n in colls.items() for _ in range(n)
        )
