"""Running a plan with torch in this process: what runs, what is skipped and why, tensors made
from recorded specs, GPU-only ops on their portable twin."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.bench.ets import compute_et
from tests.realdata import TRACES, needs_realdata, realdata

from lumos.bench.et_plan import plan_et
from lumos.bench.plan import OpCall, TensorSpec
from lumos.ingest.pytorch_et import read_pytorch_et

torch = pytest.importorskip("torch")

from lumos.bench.execute import Executor  # noqa: E402
from lumos.bench.ops import CannotRun, bind  # noqa: E402
from lumos.bench.tensors import make_tensor  # noqa: E402


def test_compute_et_runs_what_can_run(tmp_path: Path) -> None:
    plan = plan_et(read_pytorch_et(compute_et(tmp_path / "et.json", steps=2)))
    ex = Executor(plan, torch, "cpu", None)
    with torch.no_grad():
        first = ex.run_pass()
        second = ex.run_pass()
    assert len(first) == len(second) == 2 and all(t > 0 for t in second)
    assert ex.executed() == (14, 0, 0)
    assert ex.skipped.rows() == [
        {"reason": "no such operator in this PyTorch", "op": "myns::custom", "count": 2},
        {"reason": "raised RuntimeError here", "op": "aten::mm", "count": 2,
         "example": "mat1 and mat2 shapes cannot be multiplied (8x16 and 5x4)"},
    ]  # fmt: skip
    assert ex.substituted == {"aten::cudnn_batch_norm_backward": "aten::native_batch_norm_backward"}
    # nonzero's output depends on values made up here: replaced by one of the recorded [5, 2]
    nonzero = [it for it in plan.items() if it.name == "aten::nonzero"]
    replaced = {it.outputs[0][1] for it in nonzero if isinstance(it, OpCall)}
    assert set(ex.replace) == replaced
    assert all(tuple(ex.replace[s].shape) == (5, 2) for s in replaced)


def test_tensors_have_the_recorded_layout() -> None:
    spec = TensorSpec((4, 3), (1, 4), "c10::BFloat16", on_gpu=True)
    t = make_tensor(spec, torch.device("cpu"), torch.device("cpu"))
    assert (tuple(t.shape), t.stride(), t.dtype) == ((4, 3), (1, 4), torch.bfloat16)
    assert float(t.min()) >= 0.5 and float(t.max()) < 1.0
    idx = make_tensor(TensorSpec((6,), None, "long int", False), torch.device("cpu"), None)
    assert idx.dtype == torch.int64 and int(idx.abs().sum()) == 0


@needs_realdata
def test_linear_et_runs_every_op() -> None:
    plan = plan_et(read_pytorch_et(realdata(TRACES["linear_et"])))
    ex = Executor(plan, torch, "cpu", None)
    made = ex.prefill()  # what the step reads before making it: made before any pass
    assert made == len(ex.keep) > 0
    with torch.no_grad():
        ex.run_pass()
    assert ex.executed() == (320, 0, 0) and ex.skipped.total() == 0 and not ex.replace
    assert len(ex.keep) == made  # the pass made none of its inputs while it ran


@needs_realdata
@pytest.mark.parametrize("path", ["et_resnet_1gpu", "et_gpt2"])
def test_every_op_of_resnet_and_gpt2_binds_on_cpu(path: str) -> None:
    plan = plan_et(read_pytorch_et(realdata(TRACES[path])))
    reasons: dict[str, int] = {}
    twins = 0
    for it in plan.items():
        if isinstance(it, OpCall):
            try:
                twins += bool(bind(it, torch, "cpu").twin)
            except CannotRun as exc:
                reasons[str(exc)] = reasons.get(str(exc), 0) + 1
    assert reasons == {}
    assert twins == (159 if path == "et_resnet_1gpu" else 0)  # cudnn_batch_norm_backward


def test_a_bare_cuda_device_spreads_the_ranks_over_the_gpus():
    """``--device cuda`` names no GPU; ``torch.cuda.set_device`` needs one (an H200 run
    failed on it): the named index wins, else rank i takes GPU i mod count."""
    from lumos.bench.worker import cuda_index

    assert [cuda_index("cuda", i, 2) for i in range(4)] == [0, 1, 0, 1]
    assert cuda_index("cuda:3", 0, 8) == 3
    assert cuda_index("cuda", 5, 1) == 0
