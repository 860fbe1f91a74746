"""``lumos.graph.memory.anchor_memory`` called directly on hand-made columns, every value worked
by hand from the rules in :mod:`lumos.graph.memory` (anchor: the last task of the event's
thread started at or before it, else that thread's first; events on no thread, on an untraced
one or on one without tasks: the last task of any thread started at or before them, else the
first; size steps from "Total Allocated" when every event recorded it; a span naming a phase
beats the op's own name, later phases beating earlier ones).

The job (graph processors: 0 thread B, 1 thread C without tasks, 2 thread A; trace processors
0 A, 1 B, 2 C, 3 untraced)::

    task (event row)  thread  start  dur   CPU
    0 (12)            B       150    40    yes
    1 (0)             A       100    50    yes
    2 (11)            A       200    30    yes
    3 (13)            A       180     5    no   (not a candidate)
    4 (-1)            A       190     5    yes  (no source event: not a candidate)
    5 (14)            B       300    10    yes
    6 (15)            A       200     7    yes  (ties task 2: the later row is last)

    memory row  ts   trace proc  device  bytes  total  reserved  op  shaped op  alloc
    0           160  0 (A)       cuda:0   +256  1256   2048      20   0         -1
    1            90  0 (A)       cuda:0   +128  1400   2048      22  -1         -1
    2           130  0 (A)       cuda:1   +999   999    999      20   0         -1
    3           210  1 (B)       cuda:0    +64  1448   4096      23  23         -1
    4           250  2 (C)       cuda:0   -128  1320   4096       0  22          1
    5           205  3 (none)    cuda:0    -32  1288   4096      -1  -1          2
    6           150  -1          cuda:0    +32  1320     -1      24   0         -1
    7           200  0 (A)       cuda:0   -256  1064   4096      25  -1          0
    8            40  3 (none)    cuda:0    +16  1080   4096      -1  -1         -1

Event rows name (names index): 20 aten::mm (3), 0 aten::linear (0), 22 aten::empty (1),
23 autograd::MmBackward0 (6), 24 aten::zeros (9), 25 Optimizer.step#SGD.step (8), any other
an unused name; shapes (dims index): 0 -> 2, 23 -> 0, 29 -> 1, 22 none. Phase spans (graph
processor, start, end, name): (-1, 0, 1000, ProfilerStep#1), (2, 100, 165, model.forward),
(-1, 205, 210, backward_pass), (0, 150, 400, Optimizer.zero_grad), (2, 195, 200,
forward_hook), (1, 160, 260, Optimizer.step). Capacity: GPU 0 80,000 bytes, GPU 1 40,000.
"""

from __future__ import annotations

import numpy as np

from lumos.graph.memory import PHASES, anchor_memory
from lumos.ingest.kineto_memory import MemoryEvents

I64, I32 = np.int64, np.int32

NAMES = ("aten::linear", "aten::empty", "unused", "aten::mm", "unused", "unused",
         "autograd::MmBackward0", "unused", "Optimizer.step#SGD.step", "aten::zeros")  # fmt: skip


def _events(rows: list[tuple[int, ...]]) -> MemoryEvents:
    """Rows ``(ts, trace proc, device type, device id, bytes, total, reserved, op, shaped
    op, alloc)``; address = row number (not read here)."""
    c = list(zip(*rows, strict=True))
    return MemoryEvents(
        ts_ns=np.array(c[0], I64), processor_idx=np.array(c[1], I32),
        device_type=np.array(c[2], np.int8), device_id=np.array(c[3], I32),
        addr=np.arange(len(rows), dtype=I64), num_bytes=np.array(c[4], I64),
        total_allocated=np.array(c[5], I64), total_reserved=np.array(c[6], I64),
        op_idx=np.array(c[7], I64), shaped_op_idx=np.array(c[8], I64),
        alloc_idx=np.array(c[9], I64),
    )  # fmt: skip


MEM = [
    (160, 0, 1, 0, 256, 1256, 2048, 20, 0, -1),
    (90, 0, 1, 0, 128, 1400, 2048, 22, -1, -1),
    (130, 0, 1, 1, 999, 999, 999, 20, 0, -1),
    (210, 1, 1, 0, 64, 1448, 4096, 23, 23, -1),
    (250, 2, 1, 0, -128, 1320, 4096, 0, 22, 1),
    (205, 3, 1, 0, -32, 1288, 4096, -1, -1, 2),
    (150, -1, 1, 0, 32, 1320, -1, 24, 0, -1),
    (200, 0, 1, 0, -256, 1064, 4096, 25, -1, 0),
    (40, 3, 1, 0, 16, 1080, 4096, -1, -1, -1),
]


def _name_idx() -> np.ndarray:
    out = np.full(30, 2, dtype=I32)  # other event rows: an unused name
    out[[20, 0, 22, 23, 24, 25]] = [3, 0, 1, 6, 9, 8]
    return out


def _dims() -> tuple[np.ndarray, tuple[str, ...]]:
    d = np.full(30, -1, dtype=I32)
    d[[0, 23, 29]] = [2, 0, 1]
    return d, ("[[4, 4]]", "[[9]]", "[[8, 16], [16, 32]]")


SPANS = (
    np.array([-1, 2, -1, 0, 2, 1], I32),
    np.array([0, 100, 205, 150, 195, 160], I64),
    np.array([1000, 165, 210, 400, 200, 260], I64),
    ["ProfilerStep#1", "model.forward", "backward_pass", "Optimizer.zero_grad", "forward_hook",
     "Optimizer.step"],
)  # fmt: skip


def _anchor(mem: MemoryEvents, *, dims=None, cpu=None, event=None, capacity=None):
    return anchor_memory(
        mem, NAMES, _name_idx(), _dims() if dims is None else dims,
        np.array([12, 0, 11, 13, -1, 14, 15], I64) if event is None else event,
        np.array([0, 2, 2, 2, 2, 0, 2], I32),
        np.array([150, 100, 200, 180, 190, 300, 200], I64),
        np.array([40, 50, 30, 5, 5, 10, 7], I64),
        np.array([1, 1, 1, 0, 1, 1, 1], bool) if cpu is None else cpu,
        np.array([2, 0, 1, -1], I64), SPANS,
        {0: 80_000, 1: 40_000} if capacity is None else capacity,
    )  # fmt: skip


def test_events_are_anchored_sized_named_shaped_and_phased_exactly():
    """The training device is cuda:0 (8 events; cuda:1 has 1): memory rows 0, 1, 3-8 in that
    order. Anchors: on B, row 3 (210) -> task 0 (150); thread C has no task; on A (tasks by
    start 1, 2, 6), row 0 (160; over all threads it would be B's task 0) -> 1, row 1 (90,
    before all) -> 1, row 7 (200, the ties' last) -> 6. The rest by start over all threads
    (1, 0, 2, 6, 5): row 4 (250) -> 6, row 5 (205) -> 6, row 6 (150, at task 0's start;
    processor -1, not trace processor 0) -> 0, row 8 (40) -> 1. Size steps: the totals' differences from 1256 - 256 = 1000. Free links: row 4 frees memory
    row 1 (here row 1), row 5 an allocation on cuda:1 (not here: -1), row 7 row 0. Names used:
    0, 1, 3, 6, 8, 9, numbered 0..5 in that order. Shapes used: dims 0 and 2 -> 0, 1 (row 4's
    aten::empty has no shape; dims 1 belongs to no shaped op of these rows). Phases: row 0 in model.forward on A; row 1 none; row 3 names
    backward, lies in backward_pass and in Optimizer.zero_grad on B (optimizer wins); row 4
    in Optimizer.step on C; row 5 at backward_pass's start; row 6 on no thread, so not in B's
    or C's spans; row 7 names the optimizer but ends forward_hook on A (a span beats a name);
    row 8 none."""
    m = _anchor(_events(MEM))
    assert m is not None and len(m) == 8
    cols = {
        "event_idx": ([0, 0, 12, 15, 15, 12, 15, 0], I64),
        "offset_ns": ([60, -10, 60, 50, 5, 0, 0, -60], I64),
        "anchor_dur_ns": ([50, 50, 40, 7, 7, 40, 7, 50], I64),
        "delta_bytes": ([256, 144, 48, -128, -32, 32, -256, 16], I64),
        "num_bytes": ([256, 128, 64, -128, -32, 32, -256, 16], I64),
        "alloc_row": ([-1, -1, -1, 1, -1, -1, 0, -1], I64),
        "op_name_idx": ([2, 1, 3, 0, -1, 5, 4, -1], I32),
        "phase": ([1, 0, 3, 3, 2, 0, 1, 0], np.int8),
        "total_reserved": ([2048, 2048, 4096, 4096, 4096, -1, 4096, 4096], I64),
        "shape_name_idx": ([0, -1, 3, 1, -1, 0, -1, -1], I32),
        "shape_dims_idx": ([1, -1, 0, -1, -1, 1, -1, -1], I32),
    }
    for name, (values, dtype) in cols.items():
        col = getattr(m, name)
        assert (name, col.tolist(), col.dtype) == (name, values, dtype)
    assert m.op_names == ("aten::linear", "aten::empty", "aten::mm", "autograd::MmBackward0",
                          "Optimizer.step#SGD.step", "aten::zeros")  # fmt: skip
    assert m.shape_dims == ("[[4, 4]]", "[[8, 16], [16, 32]]")
    assert (m.device_type, m.device_id, m.device) == (1, 0, "cuda:0")
    assert m.base_bytes == 1000 and type(m.base_bytes) is int
    assert m.levels_recorded is True
    assert m.capacity_bytes == 80_000
    assert [PHASES[p] for p in m.phase.tolist()][:5] == [
        "forward", "unknown", "optimizer", "optimizer", "backward"
    ]  # fmt: skip


def test_without_recorded_totals_sizes_are_the_bytes_and_levels_are_relative():
    """Host memory (device type 0, id -1), one event of two without "Total Allocated" (-1):
    levels are not recorded, so size steps are the events' own bytes and the base is 0. No
    shape column (dims None): no shape table. Host memory has no capacity, whatever the
    capacity table holds. Anchors on thread A (tasks by start 1, 2, 6): 95 -> 1, 205 -> 6.
    Totals of 512 then 0 are recorded (0 is a level): steps from 512 - 512 = 0."""
    mem = _events([(95, 0, 0, -1, 512, 900, 1024, 20, 0, -1),
                   (205, 0, 0, -1, -512, -1, 1024, 20, -1, 0)])  # fmt: skip
    m = _anchor(mem, dims=(None, ()), capacity={-1: 5, 0: 6})
    assert m is not None
    assert m.delta_bytes.tolist() == [512, -512] and m.delta_bytes.dtype == I64
    assert m.base_bytes == 0 and m.levels_recorded is False
    assert m.shape_dims == () and m.shape_dims_idx.tolist() == [-1, -1]
    assert m.shape_dims_idx.dtype == I32
    assert m.shape_name_idx.tolist() == [0, -1] and m.op_name_idx.tolist() == [1, 1]
    assert m.op_names == ("aten::linear", "aten::mm")
    assert (m.device, m.capacity_bytes) == ("cpu", 0)
    assert m.event_idx.tolist() == [0, 15] and m.offset_ns.tolist() == [-5, 5]
    assert m.alloc_row.tolist() == [-1, 0]
    zero = _events([(95, 0, 0, -1, 512, 512, 1024, 20, 0, -1),
                    (205, 0, 0, -1, -512, 0, 1024, 20, -1, 0)])  # fmt: skip
    m = _anchor(zero, dims=(None, ()))
    assert m is not None and m.levels_recorded is True and m.base_bytes == 0
    assert m.delta_bytes.tolist() == [512, -512]


def test_tasks_starting_together_anchor_to_the_last_listed_on_a_thread_and_overall():
    """16 tasks on one thread (events 100..115), those at rows 0, 3, ..., 15 starting at 5 ns,
    the others at 0. An event at 2 ns on that thread, and one at 2 ns on no thread, anchor to
    the last-listed task started at 0: row 14 (event 114), 2 ns into it."""
    n = 16
    ts = np.where(np.arange(n) % 3 == 0, 5, 0).astype(I64)
    mem = _events([(2, 0, 1, 0, 8, -1, -1, -1, -1, -1), (2, -1, 1, 0, 8, -1, -1, -1, -1, -1)])
    no_spans = (np.zeros(0, I32), np.zeros(0, I64), np.zeros(0, I64), [])
    m = anchor_memory(
        mem, NAMES, _name_idx(), (None, ()), np.arange(100, 100 + n, dtype=I64),
        np.zeros(n, I32), ts, np.full(n, 3, I64), np.ones(n, bool), np.array([0], I64),
        no_spans, {},
    )  # fmt: skip
    assert m is not None
    assert m.event_idx.tolist() == [114, 114] and m.offset_ns.tolist() == [2, 2]


def test_a_gpu_other_than_zero_takes_its_own_capacity_and_one_without_an_entry_has_none():
    """Events on cuda:1 only: the capacity is GPU 1's (40,000); with no entry for it, 0."""
    mem = _events([(120, 0, 1, 1, 8, 8, 8, -1, -1, -1)])
    m = _anchor(mem)
    assert m is not None and (m.device, m.capacity_bytes) == ("cuda:1", 40_000)
    m = _anchor(mem, capacity={0: 80_000})
    assert m is not None and m.capacity_bytes == 0


def test_no_memory_events_or_no_task_to_anchor_them_gives_none():
    """No events: None. Events but no candidate task (none runs on a thread, or none has a
    source event): None."""
    assert _anchor(MemoryEvents.empty()) is None
    assert _anchor(_events(MEM), cpu=np.zeros(7, bool)) is None
    assert _anchor(_events(MEM), event=np.full(7, -1, I64)) is None
