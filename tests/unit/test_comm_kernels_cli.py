"""Communication kernels beyond NCCL (DeepEP) count as communication everywhere.

``lumos info`` (comm kernel counts and time by kind) and a replay's breakdown (exposed
communication) both classify with ``is_comm_kernel``; a small synthetic Kineto trace of one
MoE layer with DeepEP-named kernels checks that they agree, and that DeepEP's layout kernel
(local compute) stays compute.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.cli.main import main
from lumos.ingest.comm_names import is_comm_kernel, kernel_collective

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"
LAYOUT = "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)"
NOTIFY = "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, bool const*, int*, int*, int, int, void**, int**, int)"
DISPATCH = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, int, int, int, int, int, int, int, void**, int, int, int)"
COMBINE = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*, int4 const*, float const*, int const*, int const*, int const*, int*, int, int, int, int, void**, int, int, int)"

#: (name, start us, duration us) of the kernels, one stream, in order
KERNELS = [
    (GEMM, 20, 100),
    (LAYOUT, 125, 10),
    (NOTIFY, 140, 20),
    (DISPATCH, 165, 100),
    (GEMM, 270, 100),
    (COMBINE, 375, 100),
]


def _write_trace(path: Path) -> Path:
    ev: list[dict] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 600},
        {"ph": "X", "cat": "cpu_op", "name": "moe_layer", "pid": 1, "tid": 1, "ts": 1,
         "dur": 400},
    ]  # fmt: skip
    for i, (name, ts, dur) in enumerate(KERNELS):
        corr = 100 + i
        launch = 5 + 15 * i
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                   "tid": 1, "ts": launch, "dur": 5, "args": {"correlation": corr}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                   "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr}})  # fmt: skip
        ev.append({"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": launch, "cat": "ac2g",
                   "name": "ac2g"})  # fmt: skip
        ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts, "cat": "ac2g",
                   "name": "ac2g", "bp": "e"})  # fmt: skip
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("void deep_ep::internode::dispatch<true, 2, 8>(int4*)", "all_to_all"),
        ("void deep_ep::internode_ll::combine<false, 7168>(void*)", "all_to_all"),
        ("void deep_ep::intranode::cached_notify_combine<8>(void**)", "all_to_all"),
        ("void deep_ep::internode::cached_notify<true>(int)", "all_to_all"),
        ("void deep_ep::intranode::barrier<8>(int**, int)", "barrier"),
        ("nvshmemi_alltoall_on_stream_kernel<float>", "all_to_all"),
        ("nvshmemi_barrier_all_on_stream_kernel", "barrier"),
        ("nvshmemi_init_array_kernel", "unknown"),
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)", "all_reduce"),
        (
            "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(float**)",
            "all_reduce",
        ),
        ("void tensorrt_llm::kernels::twoShotAllReduceKernel<half>(int)", "all_reduce"),
        # compute that only looks like communication stays compute
        ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)", None),
        ("void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int)", None),
        ("gemm_one_shot_all_reduce_kernel", None),
        ("void moe_dispatch_kernel<float>(float*)", None),
        ("combine_kernel", None),
        ("ampere_sgemm_128x64_nn", None),
    ],
)
def test_comm_kernel_patterns(name, kind):
    assert is_comm_kernel(name) is (kind is not None)
    assert kernel_collective(name) == (kind or "unknown")


def test_deep_ep_names():
    assert [is_comm_kernel(n) for n, _, _ in KERNELS] == [False, False, True, True, False, True]
    assert {kernel_collective(n) for n in (NOTIFY, DISPATCH, COMBINE)} == {"all_to_all"}


def test_info_and_replay_count_deep_ep_kernels_as_communication(tmp_path, capsys):
    path = _write_trace(tmp_path / "moe.json")
    comm_us = 20 + 100 + 100  # notify_dispatch + dispatch + combine
    compute_us = 100 + 10 + 100  # two GEMMs + the layout kernel (local compute)

    assert main(["info", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["comm_kernels"] == {"all_to_all": 3}
    assert info["comm_kernel_ns"] == {"all_to_all": comm_us * 1000}

    assert main(["info", str(path)]) == 0
    assert "all_to_all x3 (0.220 ms)" in capsys.readouterr().out

    out = tmp_path / "out"
    assert main(["replay", str(path), "-o", str(out)]) == 0
    doc = json.loads((out / "replay.json").read_text())
    measured = doc["breakdown"]["measured"]
    # one stream: nothing overlaps, so exposed comm is exactly the DeepEP kernels' time
    assert measured["exposed_comm_ns"] == comm_us * 1000
    assert measured["exposed_compute_ns"] == compute_us * 1000
    assert measured["overlapped_ns"] == 0
    predicted = doc["breakdown"]["predicted"]
    assert predicted["exposed_comm_ns"] == comm_us * 1000
    assert predicted["exposed_compute_ns"] == compute_us * 1000


def test_graph_takes_the_kind_from_the_kernel_name(tmp_path):
    """No host-side collective call launches a DeepEP kernel: the graph warns once per kernel
    and takes the collective kind from the name (size unknown)."""
    from lumos.graph.build import build_graph
    from lumos.graph.model import CommType, TaskKind
    from lumos.ingest.kineto import read_kineto

    g = build_graph(read_kineto(_write_trace(tmp_path / "moe.json")))
    t = g.tasks
    comm = t.kind == TaskKind.COMM
    assert int(comm.sum()) == 3
    assert (g.comms.kind[t.comm_idx[comm]] == CommType.ALL_TO_ALL).all()
    assert (g.comms.size_bytes[t.comm_idx[comm]] == -1).all()
    assert g.diagnostics.to_dict()["comm_task_without_collective_call"]["count"] == 3
