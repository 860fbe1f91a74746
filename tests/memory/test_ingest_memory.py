"""``[memory]`` events in the columnar trace: columns, the op that made each, frees paired.

Expected values are derived by hand from the tiny documents written here, and on the two real
traces that carry memory events (counts read off the files with ``zcat | grep``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from tests.realdata import needs_realdata, trace

from lumos.ingest.kineto import read_kineto, trace_from_bytes
from lumos.ingest.kineto_memory import CPU, CUDA, pair_frees


def _mem(
    ts: float, nbytes: int, addr: int, total: int, *, dev: int = 1, tid: int = 2
) -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
            "tid": tid, "ts": ts, "args": {"Device Type": dev, "Device Id": 0 if dev else -1,
            "Addr": addr, "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 4096}}  # fmt: skip


def _op(name: str, ts: float, dur: float, tid: int = 2) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


DOC = {
    "traceEvents": [
        _op("aten::linear", 10, 20),
        _op("aten::empty", 11, 2),  # allocates A inside itself
        _mem(12, 256, 0xA00, 1280),
        _op("aten::mm", 14, 10),  # allocates B inside, after its own child ended
        _op("cudaMalloc", 15, 1),
        _mem(20, 512, 0xB00, 1792),
        _mem(40, -256, 0xA00, 1536, tid=3),  # a free on another thread, outside every op
        _mem(41, -512, 0xB00, 1024),  # freed: outside every op on thread 2
        _mem(42, -64, 0xC00, 960),  # allocated before the window
        _mem(43, 8, 0xD00, 8, dev=0),  # host memory
    ]
}


@pytest.mark.parametrize("split", [1 << 62, 0])
def test_columns_ops_and_pairs_by_hand(split: int) -> None:
    t = trace_from_bytes(json.dumps(DOC).encode(), "t.json", split_min_bytes=split)
    m = t.memory
    assert len(m) == 6
    assert m.num_bytes.tolist() == [256, 512, -256, -512, -64, 8]
    assert m.total_allocated.tolist() == [1280, 1792, 1536, 1024, 960, 8]
    assert m.device_type.tolist() == [CUDA] * 5 + [CPU]
    assert m.device_id.tolist() == [0] * 5 + [-1]
    assert m.ts_ns.tolist() == [12_000, 20_000, 40_000, 41_000, 42_000, 43_000]
    ops = [t.name_of(int(i)) if i >= 0 else None for i in m.op_idx]
    assert ops == ["aten::empty", "aten::mm", None, None, None, None]
    assert m.alloc_idx.tolist() == [-1, -1, 0, 1, -1, -1]
    assert m.training_device() == (CUDA, 0)
    assert m.devices() == [(CPU, -1), (CUDA, 0)]
    assert int(m.processor_idx[2]) == -1  # thread 3 has no duration event
    assert t.processors.label[int(m.processor_idx[0])] == "thread 2 (pid 1)"


def test_no_memory_events_gives_an_empty_table() -> None:
    doc = {"traceEvents": [_op("aten::mm", 1, 2)]}
    t = trace_from_bytes(json.dumps(doc).encode(), "t.json")
    assert len(t.memory) == 0 and t.memory.training_device() is None


def test_a_free_pairs_with_the_latest_allocation_at_its_address() -> None:
    dt = np.array([1, 1, 1, 1, 1, 0], dtype=np.int8)
    di = np.array([0, 0, 0, 0, 1, -1], dtype=np.int32)
    addr = np.array([5, 5, 5, 5, 5, 5], dtype=np.int64)
    nb = np.array([10, -10, 20, -20, -20, -20], dtype=np.int64)
    # rows 4 (other device) and 5 (host) have no allocation of theirs in the window
    assert pair_frees(dt, di, addr, nb).tolist() == [-1, 0, -1, 2, -1, -1]


@needs_realdata
def test_real_traces_tie_and_pair_their_memory_events() -> None:
    t = read_kineto(trace("v100_stream_wait_event"))
    m = t.memory
    assert len(m) == 28010  # zcat | grep -c '"\[memory\]"'
    assert m.devices() == [(CPU, -1), (CUDA, 1)] and m.training_device() == (CUDA, 1)
    assert int((m.op_idx >= 0).sum()) == 28010
    assert int((m.alloc_idx >= 0).sum()) == int((m.num_bytes < 0).sum()) == 14005
    gpu = m.on_device((CUDA, 1))
    # "Total Allocated" moves by exactly "Bytes" from one event to the next
    np.testing.assert_array_equal(np.diff(m.total_allocated[gpu]), m.num_bytes[gpu][1:])
    legacy = read_kineto(trace("legacy_2021_v100")).memory  # 2021: no Addr, no totals
    assert len(legacy) == 12838 and (legacy.addr == -1).all()
    assert (legacy.total_allocated == -1).all() and legacy.training_device() == (CUDA, 0)
