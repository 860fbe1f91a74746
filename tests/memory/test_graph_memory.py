"""Memory events anchored in the graph (:mod:`lumos.graph.memory`): each event's anchor,
offset, size step and phase, and :meth:`GraphMemory.take`, on a tiny document written here.

The document (host memory, one thread; times in us as Kineto writes them)::

    0 ........................................... 100  ProfilerStep#1 (user annotation)
     5 ....... 30  model.forward (user annotation)
      10-15 aten::mm             [memory] +256 at 11 (address A, total 1256)
                 40-45 aten::add           [memory] +128 at 41 (address B, total 1384)
                    50-55 ...MmBackward0   [memory] -256 at 52 (frees A, total 1128)
                       60 ...... 80  Optimizer.step#SGD.step (user annotation)
                        62-70 aten::add_   [memory] +64 at 63 (address C, total 1192)
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from lumos.graph.build import build_graph
from lumos.graph.memory import PHASES, GraphMemory
from lumos.ingest.kineto import trace_from_bytes

BACKWARD = "autograd::engine::evaluate_function: MmBackward0"


def _span(cat: str, name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _mem(ts: float, nbytes: int, addr: int, total: int) -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
            "tid": 1, "ts": ts, "args": {"Device Type": 0, "Device Id": -1, "Addr": addr,
            "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 4096}}  # fmt: skip


DOC = {
    "traceEvents": [
        _span("user_annotation", "ProfilerStep#1", 0, 100),
        _span("user_annotation", "model.forward", 5, 25),
        _span("cpu_op", "aten::mm", 10, 5),
        _mem(11, 256, 0xA00, 1256),
        _span("cpu_op", "aten::add", 40, 5),
        _mem(41, 128, 0xB00, 1384),
        _span("cpu_op", BACKWARD, 50, 5),
        _mem(52, -256, 0xA00, 1128),
        _span("user_annotation", "Optimizer.step#SGD.step", 60, 20),
        _span("cpu_op", "aten::add_", 62, 8),
        _mem(63, 64, 0xC00, 1192),
    ]
}


TRACE = trace_from_bytes(json.dumps(DOC).encode(), "t.json")


@pytest.fixture(scope="module")
def memory() -> GraphMemory:
    g = build_graph(TRACE)
    assert g.memory is not None
    return g.memory


def test_each_event_is_anchored_with_its_step_and_phase(memory: GraphMemory) -> None:
    """Anchors: the op each event lies in (the last task of the thread started at or before
    it, and the op that made it), at offsets 11-10, 41-40, 52-50 and 63-62 us. Size steps: the differences of the
    recorded totals (1000 before the first event, 1256 - 256); the free pairs with the
    allocation at its address (row 0). Phases: ``aten::mm`` lies in ``model.forward``
    (forward), ``aten::add`` in no phase span and names none (unknown: the step span names no
    phase), the backward function names its own phase, ``aten::add_`` lies in the optimizer
    step (optimizer)."""
    m = memory
    assert len(m) == 4 and m.device == "cpu"
    assert m.offset_ns.tolist() == [1_000, 1_000, 2_000, 1_000]
    assert m.anchor_dur_ns.tolist() == [5_000, 5_000, 5_000, 8_000]
    ops = ["aten::mm", "aten::add", BACKWARD, "aten::add_"]
    assert [m.op_names[i] for i in m.op_name_idx.tolist()] == ops  # the op each lies inside
    assert [TRACE.name_of(int(e)) for e in m.event_idx.tolist()] == ops  # anchored to it
    assert m.delta_bytes.tolist() == [256, 128, -256, 64]
    assert m.delta_bytes.dtype == np.int64  # whole bytes, like every other byte count
    assert m.num_bytes.tolist() == [256, 128, -256, 64]
    assert m.base_bytes == 1_000 and m.levels_recorded
    assert m.alloc_row.tolist() == [-1, -1, 0, -1]
    assert [PHASES[p] for p in m.phase.tolist()] == ["forward", "unknown", "backward", "optimizer"]


def test_take_keeps_rows_in_the_order_given_and_relinks_frees(memory: GraphMemory) -> None:
    """Rows 2 (the free) and 0 (its allocation), in that order: the free's link follows its
    allocation to its new row 1. Row 2 alone: its allocation is left out, so the link is -1.
    No rows: an empty table."""
    both = memory.take(np.array([2, 0]))
    assert both.delta_bytes.tolist() == [-256, 256]
    assert both.alloc_row.tolist() == [1, -1]
    assert both.phase.tolist() == [PHASES.index("backward"), PHASES.index("forward")]
    alone = memory.take(np.array([2]))
    assert alone.alloc_row.tolist() == [-1] and alone.num_bytes.tolist() == [-256]
    none = memory.take(np.array([], dtype=np.int64))
    assert len(none) == 0 and none.alloc_row.tolist() == []
    assert len(memory.take([])) == 0  # a plain empty list is no rows too


def _on(doc: dict[str, Any], device_type: int, device_id: int, **top: Any) -> GraphMemory:
    """The document's memory events moved to one device, with extra top-level keys."""
    events = [
        {**e, "args": {**e["args"], "Device Type": device_type, "Device Id": device_id}}
        if e["name"] == "[memory]"
        else e
        for e in doc["traceEvents"]
    ]
    g = build_graph(trace_from_bytes(json.dumps({**doc, **top, "traceEvents": events}).encode(),
                                     "t.json"))  # fmt: skip
    assert g.memory is not None
    return g.memory


H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_045_870_592}


@pytest.mark.parametrize(
    ("device_type", "device", "capacity"),
    [(1, "cuda:0", 85_045_870_592), (0, "cpu:0", 0)],
    ids=["gpu", "host"],
)
def test_a_gpus_capacity_is_its_total_global_memory(device_type, device, capacity) -> None:
    """The same events on CUDA device 0, of which ``deviceProperties`` records 85,045,870,592
    bytes (``totalGlobalMem``): that is the device's capacity. On host memory (device type 0,
    here under id 0 too, the GPU's id) the capacity is unknown: 0."""
    m = _on(DOC, device_type, 0, deviceProperties=[H100])
    assert m.device == device and len(m) == 4
    assert m.capacity_bytes == capacity


def test_a_trace_without_shapes_has_an_empty_shape_table(memory: GraphMemory) -> None:
    """No op of the document records "Input Dims": no shapes, every row's shape -1. The same
    when the trace's events carry no shape column at all (``Events.dims_idx`` None, its
    default for traces not read from Kineto JSON)."""
    bare = replace(TRACE, events=replace(TRACE.events, dims_idx=None))
    g = build_graph(bare)
    assert g.memory is not None
    for m in (memory, g.memory):
        assert m.shape_dims == ()
        assert m.shape_dims_idx.tolist() == [-1, -1, -1, -1]


def test_scaled_rows_keep_whole_bytes_rounded_to_even(memory: GraphMemory) -> None:
    """Factors 0.5, 1.5, 0.25, 3.0 on the rows of 256, 128, -256 and 64 bytes: 128, 192, -64
    and 192 for both the size steps and the recorded sizes; a factor 1/3 on 128 bytes is
    42.67, rounded to 43. Byte counts stay int64 (whole bytes), and everything else (links,
    phases, levels) is kept."""
    s = memory.scaled(np.array([0.5, 1.5, 0.25, 3.0]))
    assert s.delta_bytes.tolist() == [128, 192, -64, 192]
    assert s.num_bytes.tolist() == [128, 192, -64, 192]
    assert s.delta_bytes.dtype == np.int64 and s.num_bytes.dtype == np.int64
    assert s.alloc_row.tolist() == [-1, -1, 0, -1] and s.base_bytes == 1_000
    assert s.phase.tolist() == memory.phase.tolist() and s.op_names == memory.op_names
    third = memory.scaled(np.array([1.0, 1 / 3, 1.0, 1.0]))
    assert third.num_bytes.tolist() == [256, 43, -256, 64]
    assert third.delta_bytes.tolist() == [256, 43, -256, 64]
