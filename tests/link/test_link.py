"""link(): ET <-> Kineto on real pairs (by id, by sequence) and GPU attachment."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
from tests.realdata import trace

from lumos.ingest.kineto import read_kineto
from lumos.ingest.kineto_schema import Category
from lumos.ingest.pytorch_et import read_pytorch_et
from lumos.link import METHOD_NAMES, attach_host_device, format_reports, link


def _simple_add():
    return link(read_pytorch_et(trace("simple_add_et")), read_kineto(trace("simple_add_kineto")))


def test_simple_add_links_36_of_36_by_external_id() -> None:
    lt = _simple_add()
    r = lt.report
    assert (r.num_linked, r.num_et_ops) == (36, 36)
    assert r.method_counts == {"rf_id": 0, "external_id": 36, "sequence": 0}
    assert r.id_join == "external_id"
    assert r.unmatched_et == ()
    # every link joins equal names, and the mapping is one-to-one
    for n in np.flatnonzero(lt.node_event_idx >= 0).tolist():
        e = int(lt.node_event_idx[n])
        assert lt.host.name(n) == lt.kineto.name_of(e)
        assert lt.event_node_idx[e] == n
        assert METHOD_NAMES[lt.node_method[n]] == "external_id"


def test_simple_add_gpu_kernels_attach_to_launch_and_op() -> None:
    lt = _simple_add()
    k = lt.kineto
    kernels = np.flatnonzero(k.mask(Category.KERNEL))
    assert kernels.size == 4
    launches = [k.name_of(int(lt.host_device.launch_event_idx[i])) for i in kernels]
    assert launches == ["cudaLaunchKernel"] * 4
    ops = sorted(k.name_of(int(lt.host_device.enclosing_op_idx[i])) for i in kernels)
    assert ops == ["aten::add", "aten::add", "aten::uniform_", "aten::uniform_"]
    nodes = sorted(lt.host.name(int(lt.gpu_node_idx[i])) for i in kernels)
    assert nodes == ops
    add = lt.host.index_of(36)  # the measured aten::add
    (kernel,) = lt.gpu_events_of(add).tolist()
    assert k.name_of(kernel).startswith("void at::native::vectorized_elementwise_kernel")
    assert (lt.report.num_gpu_activities, lt.report.num_gpu_with_node) == (4, 4)


def _dlrm_pairs() -> list[tuple[str, str]]:
    with tarfile.open(trace("dlrm_kineto_8rank")) as tar:
        kin = sorted(m.name for m in tar.getmembers() if m.name.endswith(".json"))
    pairs = []
    for r in range(8):
        k = next(m for m in kin if f"/worker{r}_" in m)
        pairs.append((f"dlrm_pytorch_et/dlrm_eg_{r}.json", k))
    return pairs


def test_dlrm_8_ranks_link_at_least_95_percent_by_sequence() -> None:
    reports = []
    for et_member, k_member in _dlrm_pairs():
        lt = link(
            read_pytorch_et(trace("dlrm_et_8rank"), member=et_member),
            read_kineto(trace("dlrm_kineto_8rank"), member=k_member),
        )
        r = lt.report
        reports.append(r)
        assert r.num_et_ops == 1672
        assert r.match_rate >= 0.95, format_reports([r])
        assert r.id_join == "external_id (rejected)"  # ids come from another iteration
        assert lt.diagnostics.count("id_join_rejected") == 1
        assert r.method_counts["sequence"] == r.num_linked
        assert [p.et_tid for p in r.thread_pairs] == [1, 2]
        assert len(r.unmatched_et) == r.num_et_ops - r.num_linked
        linked = np.flatnonzero(lt.node_event_idx >= 0)
        names_et = [lt.host.name(int(n)) for n in linked]
        names_k = [lt.kineto.name_of(int(e)) for e in lt.node_event_idx[linked]]
        assert names_et == names_k
    assert sorted(r.rank for r in reports) == list(range(8))
    text = format_reports(reports)
    assert text.count("rank ") >= 8 and "total:" in text
    json.dumps([r.to_dict() for r in reports])


def test_param_linear_one_iteration_of_many() -> None:
    lt = link(
        read_pytorch_et(trace("linear_et")),
        read_kineto(trace("linear_kineto")),
    )
    r = lt.report
    assert r.num_et_ops == 928
    assert r.match_rate >= 0.95, format_reports([r])
    # one iteration, not ops scattered over the 40 the Kineto trace holds
    ev = lt.node_event_idx[lt.node_event_idx >= 0]
    span_ns = int(lt.kineto.events.end_ns[ev].max() - lt.kineto.events.ts_ns[ev].min())
    total_ns = int(lt.kineto.events.end_ns.max() - lt.kineto.events.ts_ns.min())
    assert span_ns < total_ns / 10


def _kineto_json(events: list[dict]) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


def test_rf_id_join_preferred_and_unmatched_kept(tmp_path: Path) -> None:
    et = {
        "schema": "1.1.1-chakra.0.0.4",
        "nodes": [
            {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1},
            {
                "id": 2,
                "name": "aten::mm",
                "ctrl_deps": 1,
                "attrs": [
                    {"name": "rf_id", "type": "uint64", "value": 70},
                    {"name": "tid", "type": "uint64", "value": 1},
                ],
            },
            {
                "id": 3,
                "name": "aten::relu",
                "ctrl_deps": 1,
                "attrs": [
                    {"name": "rf_id", "type": "uint64", "value": 71},
                    {"name": "tid", "type": "uint64", "value": 1},
                ],
            },
            {
                "id": 4,
                "name": "aten::gone",
                "ctrl_deps": 1,
                "attrs": [
                    {"name": "rf_id", "type": "uint64", "value": 72},
                    {"name": "tid", "type": "uint64", "value": 1},
                ],
            },
        ],
    }
    (tmp_path / "et.json").write_text(json.dumps(et))
    ev = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 5,
            "args": {"External id": 2, "Record function id": 70},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::relu",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 5,
            "args": {"External id": 3, "Record function id": 71},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::extra",
            "pid": 1,
            "tid": 1,
            "ts": 30,
            "dur": 5,
            "args": {"External id": 4, "Record function id": 99},
        },
    ]
    (tmp_path / "k.json").write_bytes(_kineto_json(ev))
    lt = link(read_pytorch_et(tmp_path / "et.json"), read_kineto(tmp_path / "k.json"))
    r = lt.report
    assert r.method_counts["rf_id"] == 2
    assert r.id_join == "rf_id"
    # aten::gone has no Kineto partner: listed, never dropped; both inputs are kept whole
    assert [n for _, n in r.unmatched_et] == ["aten::gone"]
    assert lt.host.num_nodes == 4 and len(lt.kineto.events) == 3


def test_attach_host_device_counts_orphan_gpu_work(tmp_path: Path) -> None:
    ev = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 50,
            "args": {"External id": 2},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernelExC",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "dur": 5,
            "args": {"correlation": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 5,
            "args": {"correlation": 7, "device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "orphan",
            "pid": 0,
            "tid": 7,
            "ts": 40,
            "dur": 5,
            "args": {"correlation": 8, "device": 0, "stream": 7},
        },
    ]
    (tmp_path / "k.json").write_bytes(_kineto_json(ev))
    k = read_kineto(tmp_path / "k.json")
    hd = attach_host_device(k)
    gemm = next(i for i in range(len(k.events)) if k.name_of(i) == "gemm")
    assert k.name_of(int(hd.launch_event_idx[gemm])) == "cudaLaunchKernelExC"
    assert k.name_of(int(hd.enclosing_op_idx[gemm])) == "aten::mm"
    assert (hd.num_gpu_activities, hd.num_gpu_with_launch) == (2, 1)
    assert hd.diagnostics.count("gpu_without_launch") == 1


def test_link_is_deterministic() -> None:
    a, b = _simple_add(), _simple_add()
    assert a.report == b.report
    assert np.array_equal(a.node_event_idx, b.node_event_idx)
