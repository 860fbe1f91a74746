"""Exact nodes, columns and errors of the ExecGraph <-> Chakra mapping on hand-built graphs:
the process-group METADATA node, the documented column dtypes of a written trace, delay-node
resolution with ids beyond float64, and the foreign mapping's time check.

Values follow the rules in :mod:`lumos.chakra.mapping` (process groups: one METADATA node
``process_group:init`` after the tasks, carrying ``lumos_pg_*`` lists and, when every name is
a number, upstream's ``pg_name``/``pg_desc``/``backend_config``/``pg_size``/``ranks`` JSON in
its inputs) and the column table of :mod:`lumos.chakra.trace`.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from lumos.chakra import read_chakra, write_chakra
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.mapping import _groups_of, from_chakra, to_chakra
from lumos.chakra.mapping_delay import resolve_delay_deps
from lumos.chakra.mapping_foreign import _check_micros
from lumos.chakra.schema import NodeType
from lumos.errors import ChakraFormatError
from lumos.graph.model import CommType, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.graph.tables import ProcessGroup

GROUPS = (
    ProcessGroup("0", (0, 1), "default_pg", "nccl:cuda"),
    ProcessGroup("5", (1,), "", ""),
)


def _graph(groups=GROUPS):
    """Rank 1 of 2: ``step`` on thread 1, an all-reduce on stream 7 in group 0."""
    b = GraphBuilder(rank=1, world_size=2)
    th, st = b.thread(1), b.stream(7)
    b.task(th, "step", 4_000, ts_ns=1_000)
    c = b.comm(CommType.ALL_REDUCE, size_bytes=256, pg=0)
    b.task(st, "ar", 2_000, TaskKind.COMM, ts_ns=2_000, comm=c)
    return b.build().replace(process_groups=groups).validate()


def _attrs(t, row):
    return [(a.name, a.value, a.kind) for a in t.attrs_of(row)]


def test_the_process_group_node_holds_exactly_the_groups():
    """Row 2 (after the two tasks) is ``process_group:init``, METADATA, with no task column
    (no ``lumos_proc``, ``dur_ns``...): ``is_cpu_op`` and the groups' lists, ranks flattened
    with their CSR offsets ``[0, 2, 3]``; both names are numbers, so its inputs carry the
    upstream JSON list."""
    t = to_chakra(_graph())
    assert t.num_nodes == 3 and t.rank == 1
    assert t.node_type.tolist() == [NodeType.COMP_NODE, NodeType.COMM_COLL_NODE,
                                    NodeType.METADATA_NODE]  # fmt: skip
    assert t.name_of(2) == "process_group:init"
    assert _attrs(t, 2) == [
        ("is_cpu_op", True, "bool_val"),
        ("lumos_pg_name", ["0", "5"], "string_list"),
        ("lumos_pg_desc", ["default_pg", ""], "string_list"),
        ("lumos_pg_backend", ["nccl:cuda", ""], "string_list"),
        ("lumos_pg_ranks", [0, 1, 1], "sint64_list"),
        ("lumos_pg_ranks_ptr", [0, 2, 3], "sint64_list"),
    ]
    doc = [
        {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "nccl:cuda", "pg_size": 2,
         "ranks": [0, 1]},
        {"pg_name": "5", "pg_desc": "", "backend_config": "", "pg_size": 1, "ranks": [1]},
    ]  # fmt: skip
    assert t.node(2).inputs.values == f"['{json.dumps(doc)}']"
    assert t.inputs_len[:2].tolist() == [-1, -1] and t.outputs_len.tolist() == [-1, -1, -1]
    assert [a[0] for a in _attrs(t, 0)] == [
        "is_cpu_op", "dur_ns", "ts_ns", "lumos_kind", "lumos_proc", "lumos_order"]  # fmt: skip
    assert from_chakra(t).process_groups == GROUPS


def test_groups_named_otherwise_have_no_upstream_inputs():
    """A group named ``tp`` (not a number): no inputs JSON; the lists are still written."""
    groups = (ProcessGroup("tp", (1,), "d", "gloo"),)
    t = to_chakra(_graph(groups))
    assert t.inputs_len.tolist() == [-1, -1, -1]
    assert _attrs(t, 2)[1:4] == [("lumos_pg_name", ["tp"], "string_list"),
                                 ("lumos_pg_desc", ["d"], "string_list"),
                                 ("lumos_pg_backend", ["gloo"], "string_list")]  # fmt: skip
    assert from_chakra(t).process_groups == groups


class _Node:
    """A node holding only the attributes given (``attr`` as ``NodeView.attr``)."""

    id = 7

    def __init__(self, **attrs):
        self.attrs = attrs

    def attr(self, name, default=None):
        return self.attrs.get(name, default)


def test_groups_of_a_node_whose_lists_were_cut():
    """Without ``lumos_pg_desc``/``lumos_pg_backend`` the groups have empty ones; no name list
    gives no group; ranks slice by the offsets."""
    assert _groups_of(_Node(), "f.et") == ()
    node = _Node(lumos_pg_name=["0", "1"], lumos_pg_ranks=[], lumos_pg_ranks_ptr=[0, 0, 0])
    assert _groups_of(node, "f.et") == (ProcessGroup("0"), ProcessGroup("1"))
    node = _Node(lumos_pg_name=["a", "b"], lumos_pg_ranks=[3, 4, 5],
                 lumos_pg_ranks_ptr=[0, 1, 3], lumos_pg_desc=["x", "y"])  # fmt: skip
    assert _groups_of(node, "f.et") == (
        ProcessGroup("a", (3,), "x"),
        ProcessGroup("b", (4, 5), "y"),
    )
    node = _Node(lumos_pg_name=["a"], lumos_pg_ranks_ptr=[0, 0], lumos_pg_backend=["nccl"])
    assert _groups_of(node, "f.et") == (ProcessGroup("a", (), "", "nccl"),)


@pytest.mark.parametrize(
    "attrs, counts",
    [
        ({"lumos_pg_name": ["a"]}, "1 names with 1 rank offsets (need 2, rising within 0 ranks), 1 descriptions and 1 backends"),
        ({"lumos_pg_name": ["a", "b"], "lumos_pg_ranks": [1, 2], "lumos_pg_ranks_ptr": [0, 2]},
         "2 names with 2 rank offsets (need 3, rising within 2 ranks), 2 descriptions and 2 backends"),
        ({"lumos_pg_name": ["a"], "lumos_pg_ranks": [1], "lumos_pg_ranks_ptr": [0, 2]},
         "1 names with 2 rank offsets (need 2, rising within 1 ranks), 1 descriptions and 1 backends"),
        ({"lumos_pg_name": ["a", "b"], "lumos_pg_ranks": [1, 2], "lumos_pg_ranks_ptr": [0, 2, 1]},
         "2 names with 3 rank offsets (need 3, rising within 2 ranks), 2 descriptions and 2 backends"),
        ({"lumos_pg_name": ["a"], "lumos_pg_ranks_ptr": [0, 0], "lumos_pg_desc": []},
         "1 names with 2 rank offsets (need 2, rising within 0 ranks), 0 descriptions and 1 backends"),
        ({"lumos_pg_name": ["a"], "lumos_pg_ranks_ptr": [0, 0], "lumos_pg_backend": ["x", "y"]},
         "1 names with 2 rank offsets (need 2, rising within 0 ranks), 1 descriptions and 2 backends"),
    ],
)  # fmt: skip
def test_a_process_group_node_whose_lists_do_not_fit_its_names_is_refused(attrs, counts):
    """An edited file's process-group node (id 7) with offsets missing (only the default
    ``[0]``), one short, past the ranks, falling, or descriptions / backends of another length
    than the names: one ChakraFormatError naming the file, the node and every count."""
    with pytest.raises(ChakraFormatError) as err:
        _groups_of(_Node(**attrs), "f.et")
    assert str(err.value) == f"f.et: process-group node 7: {counts}"


#: dtypes of the trace columns (the table in lumos.chakra.trace's docstring)
DTYPES = {
    "node_id": np.uint64, "name_idx": np.int32, "node_type": np.int8, "ctrl_ptr": np.int64,
    "ctrl_deps": np.uint64, "data_ptr": np.int64, "data_deps": np.uint64,
    "start_time_micros": np.uint64, "duration_micros": np.uint64, "inputs_off": np.int64,
    "inputs_len": np.int64, "outputs_off": np.int64, "outputs_len": np.int64,
    "attr_ptr": np.int64,
}  # fmt: skip


@pytest.mark.parametrize("delay_nodes", [False, True])
def test_written_trace_has_the_documented_dtypes_and_equals_its_file(tmp_path, delay_nodes):
    """Every node column of ``to_chakra``'s trace has its documented dtype and the values its
    file decodes to; ``rank`` is the graph's (1). Times are ns // 1000 (durations rounded):
    ``step`` 1 us for 4 us, ``ar`` 2 us for 2 us, the METADATA node 0 for 0."""
    t = to_chakra(_graph(), delay_nodes=delay_nodes)
    p = tmp_path / "g.1.et"
    write_chakra(t, p)
    back = read_chakra(p)
    assert (t.rank, back.rank) == (1, 1)
    for name, dtype in DTYPES.items():
        mine, theirs = getattr(t, name), getattr(back, name)
        assert mine.dtype == dtype, name
        if not name.endswith("_off"):  # offsets into each one's own blob
            assert mine.tolist() == theirs.tolist(), name
    assert t.start_time_micros.tolist() == [1, 2, 0]
    assert t.duration_micros.tolist() == [4, 2, 0]


def _delay_trace():
    """``a`` (0-1000) and ``b`` (1500-2500) on thread 1: ``b`` depends on delay node 2, which
    depends on ``a`` (ids 0, 1; delay node 2, 500 ns)."""
    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "a", 1000, ts_ns=0)
    b.task(th, "b", 1000, ts_ns=1500, gap_ns=500)
    t = to_chakra(b.build().validate(), delay_nodes=True)
    assert (t.data_ptr.tolist(), t.data_deps.tolist()) == ([0, 0, 1, 2], [2, 0])
    return t


def test_delay_resolution_keeps_ids_beyond_float64_exact():
    """``b`` names delay node 2 and, after an edit, the unknown id 2**60 + 1 (not a float64):
    the first resolves to ``a`` (0) with the node's 500 ns, the second stays exactly as it was,
    both as uint64; the delay node's own dependency (on 0) stays 0 with no delay. A delay node
    left with no dependency resolves nothing (delay 0), and with no delay node marked nothing
    is resolved. Delays are int64 ns."""
    t = _delay_trace()
    big = 2**60 + 1
    e = t.with_deps(t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 2, 3]),
                    np.array([2, big, 0], np.uint64))  # fmt: skip
    deps, delay = resolve_delay_deps(e, np.array([False, False, True]))
    assert deps.dtype == np.uint64 and deps.tolist() == [0, big, 0]
    assert delay.dtype == np.int64 and delay.tolist() == [500, 0, 0]
    # the delay node's own dependency dropped: ``b``'s stays on node 2, with no delay
    cut = t.with_deps(t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 1, 1]), np.array([2], np.uint64))
    deps, delay = resolve_delay_deps(cut, np.array([False, False, True]))
    assert (deps.tolist(), delay.tolist(), delay.dtype) == ([2], [0], np.int64)
    # no delay node: the deps as they are, no delays
    deps, delay = resolve_delay_deps(t, np.zeros(3, bool))
    assert (deps.tolist(), delay.tolist(), delay.dtype) == ([2, 0], [0, 0], np.int64)


def test_times_beyond_int64_ns_name_the_file_and_node():
    """A trace (from a file: it has a path) edited to hold ``MAX_MICROS + 1`` us on node id 1
    and 2**64 - 1 on id 2 is refused naming the path, the first node and the count (2);
    durations are checked before start times, and only on the rows given. ``MAX_MICROS``
    itself is accepted."""
    t = _delay_trace()
    rows = np.arange(3)
    ok = dataclasses.replace(t, duration_micros=np.array([0, MAX_MICROS, 0], np.uint64))
    _check_micros(ok, rows)
    bad = dataclasses.replace(
        t, path="edited.et",
        duration_micros=np.array([0, MAX_MICROS + 1, 2**64 - 1], np.uint64),
        start_time_micros=np.array([MAX_MICROS + 1, 0, 0], np.uint64),
    )  # fmt: skip
    with pytest.raises(ChakraFormatError) as exc:
        _check_micros(bad, rows)
    assert str(exc.value) == (
        f"edited.et: node id 1: duration_micros {MAX_MICROS + 1} us does not fit int64 "
        f"nanoseconds (at most {MAX_MICROS} us; 2 nodes)"
    )
    start = dataclasses.replace(bad, duration_micros=np.zeros(3, np.uint64))
    _check_micros(start, rows[1:])  # only the rows given are checked
    with pytest.raises(ChakraFormatError) as exc:
        _check_micros(start, rows)
    assert str(exc.value) == (
        f"edited.et: node id 0: start_time_micros {MAX_MICROS + 1} us does not fit int64 "
        f"nanoseconds (at most {MAX_MICROS} us; 1 nodes)"
    )


@pytest.mark.parametrize("attr_name", ["lumos_kind", "lumos_proc", "lumos_order", "dur_ns"])
def test_a_task_without_a_required_attribute_is_refused_naming_it(attr_name):
    """``lumos_kind``, ``lumos_proc``, ``lumos_order`` and ``dur_ns`` are required on every task
    node of a lumos trace: renaming the attribute on the second task only (node id 1, the
    all-reduce) or on every node is refused naming the path, the first task without it and the
    attribute, never read with a default."""
    t = dataclasses.replace(to_chakra(_graph()), path="edited.et")
    k = t.attr_names.index(attr_name)
    rows = np.flatnonzero(t.attr_name_idx == k)
    node_of = np.searchsorted(t.attr_ptr, rows, side="right") - 1
    assert node_of.tolist()[:2] == [0, 1]  # both tasks carry it
    idx = t.attr_name_idx.copy()
    idx[rows[1]] = len(t.attr_names)
    one = dataclasses.replace(t, attr_names=(*t.attr_names, "renamed"), attr_name_idx=idx)
    with pytest.raises(ChakraFormatError) as exc:
        from_chakra(one)
    assert str(exc.value) == f"edited.et: node id 1: no {attr_name}"
    names = tuple("renamed" if s == attr_name else s for s in t.attr_names)
    with pytest.raises(ChakraFormatError) as exc:
        from_chakra(dataclasses.replace(t, attr_names=names))
    assert str(exc.value) == f"edited.et: node id 0: no {attr_name}"
