"""Communication tasks tied to their calls (``lumos.graph.build_comms``).

The gloo recording is ``tests/data/gloo_pipelining_2stage`` (2 ranks, one process group of
both): each rank has 16 ``c10d::send``/``c10d::recv_`` calls whose "Concrete Inputs" name the
peer. Rewritten without them, as gloo runs without "Concrete Inputs" record them, the peer can
only come from the group.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import DATA

from lumos.graph.build import build_graph
from lumos.graph.build_comms import _CallsByThread
from lumos.graph.model import CommType
from lumos.ingest.kineto import read_kineto

PIPE = DATA / "gloo_pipelining_2stage"
P2P = ("c10d::send", "c10d::recv_")


def _without_peers(rank: int, out: Path, ranks: list[int] | None = None) -> Path:
    """The rank's recording with its p2p calls' "Concrete Inputs" removed (16 of them), and
    its process group's ranks replaced by ``ranks`` when given."""
    doc = json.loads(gzip.decompress((PIPE / f"rank{rank}.kineto.json.gz").read_bytes()))
    removed = 0
    for e in doc["traceEvents"]:
        if e.get("name") in P2P and "Concrete Inputs" in e.get("args", {}):
            del e["args"]["Concrete Inputs"]
            removed += 1
    assert removed == 16
    if ranks is not None:
        info = doc["distributedInfo"]
        info["world_size"] = len(ranks)
        info["pg_config"][0].update(ranks=ranks, pg_size=len(ranks))
    p = out / f"rank{rank}.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("rank", [0, 1])
def test_an_unnamed_p2p_peer_in_a_group_of_two_is_the_other_rank(tmp_path, rank):
    """Every send and receive of rank r gets peer 1 - r (the group is ranks 0 and 1), counted
    once per call (16); the tag stays unknown (-1): the group does not say it."""
    g = build_graph(read_kineto(_without_peers(rank, tmp_path)))
    c = g.comms
    assert sorted(set(c.kind.tolist())) == [int(CommType.SEND), int(CommType.RECV)]
    assert c.peer_rank.tolist() == [1 - rank] * 16
    assert c.tag.tolist() == [-1] * 16
    assert g.diagnostics.count("p2p_peer_inferred_from_group_of_two") == 16


def test_an_unnamed_p2p_peer_in_a_larger_group_stays_unknown(tmp_path):
    """The same calls in a group of four: three possible peers, none chosen, nothing counted."""
    g = build_graph(read_kineto(_without_peers(0, tmp_path, ranks=[0, 1, 2, 3])))
    assert g.comms.peer_rank.tolist() == [-1] * 16
    assert g.diagnostics.count("p2p_peer_inferred_from_group_of_two") == 0


def _nccl_call(coll: str, t0: float, corr: int) -> list[dict[str, Any]]:
    """A ``record_param_comms`` of 1,024 floats named ``coll``, launching a ``Generic`` kernel."""
    meta = {"Collective name": coll, "In msg nelems": 1024, "Out msg nelems": 1024,
            "dtype": "Float", "Process Group Name": "0"}  # fmt: skip
    call = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
            "ts": t0, "dur": 20, "args": meta}  # fmt: skip
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
              "ts": t0 + 2, "dur": 3, "args": {"correlation": corr}}  # fmt: skip
    on_gpu = {"device": 0, "stream": 24, "correlation": corr}
    kernel = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "pid": 0, "tid": 24,
              "ts": t0 + 10, "dur": 50, "args": on_gpu}  # fmt: skip
    return [call, launch, kernel]


def test_a_kernel_of_a_collective_call_of_no_known_type_is_of_unknown_type(tmp_path):
    """Two NCCL calls whose "Collective name" lumos has no comm type for ("sendrecv", a name it
    knows, and "mystery"), each launching a ``Generic`` kernel: both tasks are comms of type
    UNKNOWN, tied to their calls (1,024 floats: 4,096 bytes each), nothing counted as without a
    call."""
    events = _nccl_call("sendrecv", 0, 1) + _nccl_call("mystery", 100, 2)
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    g = build_graph(read_kineto(p))
    c = g.comms
    assert c.kind.tolist() == [int(CommType.UNKNOWN)] * 2
    assert c.size_bytes.tolist() == [4096, 4096]
    assert g.diagnostics.count("comm_task_without_collective_call") == 0


def test_the_call_enclosing_a_launch_is_found_on_its_thread_only(tmp_path):
    """Two calls on thread 1, ``all_reduce`` at 0-20 us (row 0) and ``broadcast`` at 100-120 us
    (row 1). A time inside a call, its start or its end (bounds included) gives that call's
    row; a time between the calls, before the first or after the last, or on a thread with no
    call (the kernels' stream), gives -1."""
    events = _nccl_call("all_reduce", 0, 1) + _nccl_call("broadcast", 100, 2)
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    trace = read_kineto(p)
    coll = trace.collectives
    assert list(coll.kind) == ["all_reduce", "broadcast"]
    calls = _CallsByThread(trace.events, coll.event_idx)
    thread = int(trace.events.processor_idx[coll.event_idx[0]])
    at = [-1, 0, 2_000, 20_000, 20_001, 99_999, 100_000, 120_000, 120_001]
    assert [calls.enclosing(thread, t) for t in at] == [-1, 0, 0, 0, -1, -1, 1, 1, -1]
    kernel = trace.events.name_idx.tolist().index(trace.names.index("ncclDevKernel_Generic"))
    stream = int(trace.events.processor_idx[kernel])
    assert stream != thread and calls.enclosing(stream, 10_000) == -1
