"""Planning a Chakra ET: lumos's own (converted, synthetic) by outermost op, class and recorded
work, in replay order; another tool's node by node."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from tests.realdata import astra_custom, astra_micro, needs_realdata, realdata

from lumos.bench.chakra_plan import plan_chakra_file
from lumos.bench.plan import CommCall, WorkCall
from lumos.convert import convert
from lumos.examples_data import example_run_dir
from lumos.ingest.kineto import read_kineto


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("et") / "ex"
    convert([example_run_dir()], prefix)
    return prefix


def test_converted_et_runs_by_class_and_work(converted: Path) -> None:
    plan = plan_chakra_file(f"{converted}.0.et", rank=0, run_ranks=(0, 1))
    assert [(s.name, len(s.items)) for s in plan.steps] == [
        ("ProfilerStep#2", 592), ("ProfilerStep#3", 592), ("ProfilerStep#4", 592)]  # fmt: skip
    assert (plan.ops_total, plan.comms_total) == (1770, 6)
    work = [it for it in plan.items() if isinstance(it, WorkCall)]
    kinds = collections.Counter((w.op_class, w.no_work) for w in work)
    # matrix products carry the FLOPs of the addmm/mm inside them (backward ones too, under
    # their autograd wrappers); views run as views; the rest has no recorded work
    assert kinds[("gemm", False)] == 81 and kinds[("memory", False)] == 480
    assert all(w.flops > 0 and w.mkn is not None for w in work if w.op_class == "gemm")
    assert sum(n for (_, no_work), n in kinds.items() if no_work) == 1770 - 81 - 480
    assert all(w.dur_ns > 0 for w in work if w.no_work)
    assert plan.host_only  # a CPU run's ops (its collectives' buffers say nothing)


def test_converted_collectives_keep_sizes_and_order(converted: Path) -> None:
    recorded = read_kineto(example_run_dir() / "rank1.kineto.json.gz").collectives
    plan = plan_chakra_file(f"{converted}.1.et", rank=1, run_ranks=(0, 1))
    calls = [it for it in plan.items() if isinstance(it, CommCall)]
    assert [(c.kind, c.size_bytes) for c in calls] == list(
        zip(recorded.kind, recorded.size_bytes.tolist(), strict=True))  # fmt: skip


@needs_realdata
def test_another_tools_chakra_ets() -> None:
    one = plan_chakra_file(str(realdata(astra_micro("all_reduce", 4, 0))), rank=0,
                           run_ranks=(0, 1, 2, 3))  # fmt: skip
    assert [(c.kind, c.size_bytes) for c in one.items() if isinstance(c, CommCall)] == [
        ("all_reduce", 1 << 20)]  # fmt: skip
    ring = plan_chakra_file(str(realdata(astra_custom(0))), rank=0, run_ranks=tuple(range(8)))
    calls = [c for c in ring.items() if isinstance(c, CommCall)]
    assert collections.Counter((c.kind, c.peer) for c in calls) == {("send", 1): 14,
                                                                  ("recv", 7): 14}  # fmt: skip
    assert ring.ops_total == 7 and all(
        isinstance(w, WorkCall) and w.no_work for w in ring.items() if not isinstance(w, CommCall)
    )
    assert ring.notes == ("not written by lumos: nodes run in file order, as one step",)
