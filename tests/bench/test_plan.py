"""Planning a PyTorch ET: outermost ops in id order, steps, tensor slots, what is left out."""

from __future__ import annotations

from pathlib import Path

from tests.bench.ets import allreduce_et, compute_et
from tests.realdata import TRACES, needs_realdata, realdata

from lumos.bench.classes import op_class
from lumos.bench.et_plan import plan_et
from lumos.bench.plan import CommCall, OpCall
from lumos.ingest.pytorch_et import read_pytorch_et


def test_outermost_ops_in_steps(tmp_path: Path) -> None:
    plan = plan_et(read_pytorch_et(compute_et(tmp_path / "et.json", steps=2)))
    assert not plan.host_only  # cudnn_batch_norm_backward's tensors were on cuda:0
    names = ["aten::mm", "aten::relu", "aten::add", "aten::add_", "aten::nonzero", "aten::mm",
             "myns::custom", "aten::cudnn_batch_norm_backward", "aten::mm"]  # fmt: skip
    assert [s.name for s in plan.steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    assert [[it.name for it in s.items] for s in plan.steps] == [names, names]
    # clamp_min under relu is not run again; the profiler op is not compute; the op before
    # the first step is left out and said so
    assert plan.ops_total == 18 and plan.comms_total == 0
    assert plan.notes == ("1 op(s) before the first step left out",)
    assert plan.skipped.total() == 0


def test_in_place_output_keeps_its_slot_and_outputs_feed_inputs(tmp_path: Path) -> None:
    plan = plan_et(read_pytorch_et(compute_et(tmp_path / "et.json")))
    mm, relu, add, add_ = plan.steps[0].items[:4]
    assert isinstance(mm, OpCall) and isinstance(relu, OpCall)
    assert relu.args[0] == mm.outputs[0]  # relu reads what mm wrote
    assert isinstance(add, OpCall) and isinstance(add_, OpCall)
    assert add.args[0] == add.args[1] == relu.outputs[0]
    assert add_.outputs[0] == add_.args[0] == add.outputs[0]  # in place: the same slot
    spec = plan.tensors[mm.outputs[0][1]]
    assert (spec.shape, spec.strides, spec.dtype, spec.on_gpu) == ((8, 4), (4, 1), "float", False)
    bn = plan.steps[0].items[7]
    assert isinstance(bn, OpCall) and plan.tensors[bn.args[0][1]].on_gpu


def test_collectives_and_their_group(tmp_path: Path) -> None:
    trace = read_pytorch_et(allreduce_et(tmp_path / "r0.json", rank=0))
    plan = plan_et(trace, rank=0, run_ranks=(0, 1))
    calls = [it for it in plan.items() if isinstance(it, CommCall)]
    assert [(c.kind, c.size_bytes, c.group) for c in calls] == [("all_reduce", 4096, None)] * 2
    assert calls[0].inputs == calls[0].outputs
    assert plan.comms_total == 2 and plan.ops_total == 4
    assert plan.host_only  # every tensor on the CPU: on a --device cuda run, all goes there


@needs_realdata
def test_tensor_ids_reused_after_free_are_new_tensors() -> None:
    # schema 1.0.1 reuses tensor ids: [553, 504, ...] is aten::t's [1024, 512] output at node
    # 606 and threshold_backward's new [512, 1024] output at node 628
    plan = plan_et(read_pytorch_et(realdata(TRACES["linear_et"])))
    by_id = {it.node_id: it for it in plan.items()}
    t, thr = by_id[606], by_id[628]
    assert isinstance(t, OpCall) and isinstance(thr, OpCall)
    assert t.outputs[0] != thr.outputs[0]
    assert plan.tensors[thr.outputs[0][1]].shape == (512, 1024)
    assert plan.ops_total == 320 and [s.name for s in plan.steps] == ["ProfilerStep#0"]
    assert not plan.host_only  # recorded on cuda:0


@needs_realdata
def test_resnet_ddp_et_one_gpu() -> None:
    plan = plan_et(read_pytorch_et(realdata(TRACES["et_resnet_1gpu"])))
    assert [(s.name, len(s.items)) for s in plan.steps] == [
        ("ProfilerStep#4", 1235), ("ProfilerStep#5", 1235), ("ProfilerStep#6", 1235)]  # fmt: skip
    assert (plan.ops_total, plan.comms_total) == (3684, 21)
    calls = [it for it in plan.items() if isinstance(it, CommCall)]
    assert {(c.kind, c.group) for c in calls} == {("all_reduce", (0,)), ("broadcast", (0,))}
    assert calls[0].size_bytes == 53120 * 4 and calls[0].root == 0
    assert not plan.host_only  # its host tensors stay on the host


@needs_realdata
def test_a_rank_without_its_peers_skips_their_collectives() -> None:
    plan = plan_et(read_pytorch_et(realdata(TRACES["et_1.1.0"])), rank=0, run_ranks=(0,))
    assert plan.comm_skipped.counts() == {"its group has 1 rank(s) not in this run": 21}
    assert plan.ops_total == 3684 and plan.skipped.total() == 0


def test_op_classes() -> None:
    got = {n: op_class(n) for n in (
        "aten::linear", "aten::bmm", "aten::convolution_backward",
        "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::gelu_backward",
        "aten::_foreach_add_", "aten::lerp_", "aten::native_layer_norm_backward",
        "aten::_log_softmax", "aten::copy_", "aten::index_select", "aten::t", "aten::view",
        "c10d::allreduce_", "gloo:all_reduce", "ncclKernel_AllReduce_RING_LL_Sum_float",
        "ampere_sgemm_128x64_nn", "cpu.copy#4", "comm.all_reduce#2", "forward")}  # fmt: skip
    assert got == {
        "aten::linear": "gemm", "aten::bmm": "gemm", "aten::convolution_backward": "conv",
        "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
        "aten::gelu_backward": "elementwise", "aten::_foreach_add_": "elementwise",
        "aten::lerp_": "elementwise", "aten::native_layer_norm_backward": "reduction",
        "aten::_log_softmax": "reduction", "aten::copy_": "copy", "aten::index_select": "copy",
        "aten::t": "memory", "aten::view": "memory", "c10d::allreduce_": "communication",
        "gloo:all_reduce": "communication",
        "ncclKernel_AllReduce_RING_LL_Sum_float": "communication",
        "ampere_sgemm_128x64_nn": "gemm", "cpu.copy#4": "copy",
        "comm.all_reduce#2": "communication", "forward": "other",
    }  # fmt: skip


@needs_realdata
def test_triton_kernels_of_torch_compile_are_counted_and_named() -> None:
    """param's torch.compile ET: each step is an aten::mm and a Triton kernel; the kernel has
    no schema to call it by and its code is not in the trace, so it is skipped by name."""
    plan = plan_et(read_pytorch_et(realdata(TRACES["et_1.1.1"])))
    assert [(s.name, [it.name for it in s.items]) for s in plan.steps] == [
        ("ProfilerStep#5", ["aten::mm"]), ("ProfilerStep#6", ["aten::mm"])]  # fmt: skip
    assert plan.ops_total == 4
    assert plan.skipped.rows() == [{
        "reason": "a Triton kernel of torch.compile (its code is not in the trace)",
        "op": "triton_poi_fused_add_cos_neg_sin_0", "count": 2}]  # fmt: skip
