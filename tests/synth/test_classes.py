"""The op-class vocabulary: fixed order, every class reachable, names never leak into it."""

from __future__ import annotations

import pytest

from lumos.graph.model import CommType, DepKind, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.synth.classes import CLASSES, class_of, task_classes


@pytest.mark.parametrize(
    ("name", "kind", "comm", "expected"),
    [
        ("volta_sgemm_128x64_nn", TaskKind.KERNEL, -1, "gemm"),
        ("void cudnn::bn_fw_tr_1C11_singleread<float>", TaskKind.KERNEL, -1, "norm"),
        ("void at::native::vectorized_elementwise_kernel<4>", TaskKind.KERNEL, -1, "elementwise"),
        ("void cudnn::ops::nchwToNhwcKernel<float>", TaskKind.KERNEL, -1, "copy"),
        ("flash_fwd_kernel", TaskKind.KERNEL, -1, "attention"),
        ("Memcpy HtoD (Pageable -> Device)", TaskKind.MEMCPY, -1, "memcpy"),
        ("ncclKernel_Broadcast_RING_LL", TaskKind.COMM, CommType.BROADCAST, "comm.broadcast"),
        ("gloo:all_reduce", TaskKind.CPU_COMM, CommType.ALL_REDUCE, "cpu_comm.all_reduce"),
        ("cudaLaunchKernel", TaskKind.RUNTIME, -1, "runtime.launch"),
        ("cudaStreamSynchronize", TaskKind.RUNTIME, -1, "runtime.sync"),
        ("cudaStreamWaitEvent", TaskKind.RUNTIME, -1, "runtime.event"),
        ("cudaMemcpyAsync", TaskKind.RUNTIME, -1, "runtime.memcpy"),
        ("cudaStreamIsCapturing", TaskKind.RUNTIME, -1, "runtime.other"),
        ("aten::addmm", TaskKind.CPU_OP, -1, "cpu.gemm"),
        ("Optimizer.step#AdamW.step", TaskKind.CPU_OP, -1, "cpu.optimizer"),
        ("aten::empty", TaskKind.CPU_OP, -1, "cpu.alloc"),
        ("detach", TaskKind.CPU_OP, -1, "cpu.alloc"),
        ("aten::add_", TaskKind.CPU_OP, -1, "cpu.other"),
        ("my_secret_module", TaskKind.CPU_OP, -1, "cpu.other"),
    ],
)
def test_class_of(name: str, kind: TaskKind, comm: int, expected: str) -> None:
    assert class_of(name, kind, comm) == expected
    assert expected in CLASSES


def test_vocabulary_is_fixed_and_unique() -> None:
    assert len(set(CLASSES)) == len(CLASSES)
    assert CLASSES[0] == "marker"
    # indices are part of the model file format: the first ones never move
    assert CLASSES[1:4] == ("norm", "conv", "attention")


def test_task_classes_of_a_graph() -> None:
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "sm80_xmma_gemm_f16", 100)
    b.edge(launch, k, DepKind.LAUNCH)
    g = b.build()
    got = [CLASSES[i] for i in task_classes(g)]
    assert got == ["runtime.launch", "gemm"]
