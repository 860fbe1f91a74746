"""The columnar tables (``lumos.graph.tables``): typed read-only columns, ``create`` defaults,
row selection, concatenation, equality and the processors' labels.

Every expected value follows from the rules in the module's docstrings: a column is cast to
its declared dtype only when the values fit, ``create`` takes its row count from the first
array it is given and broadcasts integers, and a table compares equal to another of the same
type with the same columns and the same other fields.
"""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import GraphError
from lumos.graph.tables import Edges, Processors, Tasks, Waits, order_within


def _procs(tids: list[int], labels: tuple[str, ...]) -> Processors:
    """A thread and a stream with the given ids and labels."""
    return Processors(kind=[0, 1], pid=[1, 1], tid=tids, device=[-1, 0], label=labels)


def test_a_column_is_cast_to_its_dtype_only_when_every_value_fits():
    """``Edges`` declares src/dst int32, kind int8, delay int64. int64 and bool values that fit
    are cast (True is 1); a float column is refused even when whole, an empty one is not (it
    has no value to lose); 2**40 does not fit in int32; a 2-D column is refused with its
    shape. Each message names the table and the column."""
    e = Edges(
        src=np.array([1, 2], dtype=np.int64),
        dst=np.array([True, False]),
        kind=np.array([3, 4], dtype=np.int64),
        delay_ns=np.array([-5, 7], dtype=np.int32),
    )
    assert [e.src.dtype, e.dst.dtype, e.kind.dtype, e.delay_ns.dtype] == [
        np.int32, np.int32, np.int8, np.int64,
    ]  # fmt: skip
    assert (e.src.tolist(), e.dst.tolist(), e.kind.tolist()) == ([1, 2], [1, 0], [3, 4])
    assert e.delay_ns.tolist() == [-5, 7]
    empty = Edges(src=np.zeros(0), dst=np.zeros(0), kind=np.zeros(0), delay_ns=np.zeros(0))
    assert len(empty) == 0 and empty.src.dtype == np.int32 and empty.kind.dtype == np.int8
    with pytest.raises(GraphError, match=r"^Edges\.src: expected integers, got dtype float64$"):
        Edges.create(src=[1.0], dst=[0], kind=[0])
    with pytest.raises(GraphError, match=r"^Edges\.dst: values do not fit in int32$"):
        Edges.create(src=[0], dst=[2**40], kind=[0])
    with pytest.raises(GraphError, match=r"^Edges\.kind: values do not fit in int8$"):
        Edges.create(src=[0], dst=[1], kind=[300])
    with pytest.raises(
        GraphError, match=r"^Edges\.src: expected a 1-D column, got shape \(1, 2\)$"
    ):
        Edges(src=[[0, 1]], dst=[0], kind=[0], delay_ns=[0])


def test_columns_are_read_only_views_and_the_callers_array_stays_writable():
    """A column already of its dtype is kept as a read-only view of the caller's array: same
    memory, and the caller's own array is not frozen. A cast column is a new array."""
    src = np.array([0, 1], dtype=np.int32)
    wide = np.array([1, 2], dtype=np.int64)
    e = Edges(src=src, dst=wide, kind=np.array([0, 0], dtype=np.int8), delay_ns=wide)
    assert np.shares_memory(e.src, src) and np.shares_memory(e.delay_ns, wide)
    assert not np.shares_memory(e.dst, wide)
    assert src.flags.writeable and wide.flags.writeable
    for col in (e.src, e.dst, e.kind, e.delay_ns):
        assert not col.flags.writeable
    src[0] = 9  # the caller still owns its array
    assert e.src.tolist() == [9, 1]


def test_columns_of_different_lengths_are_refused_naming_the_first_column():
    with pytest.raises(
        GraphError, match=r"^Edges: column 'dst' has 2 rows, expected 1 \(like 'src'\)$"
    ):
        Edges.create(src=[0], dst=[1, 2], kind=[0, 0])
    with pytest.raises(
        GraphError,
        match=r"^Waits: column 'record_task_idx' has 3 rows, expected 2 \(like 'task_idx'\)$",
    ):
        Waits(task_idx=[0, 1], kind=[0, 0], target_processor_idx=[0, 0], device=[0, 0],
              record_task_idx=[0, 0, 0])  # fmt: skip


def test_create_takes_its_row_count_from_the_first_array_and_broadcasts_integers():
    """``src`` is the integer 4 (Python or numpy), ``dst`` the first array (3 rows): ``src`` and
    ``kind`` repeat over 3 rows and the optional ``delay_ns`` takes its default 0. With only
    integers there are no rows. ``Waits`` fills its three optional columns with -1."""
    e = Edges.create(src=4, dst=[1, 2, 3], kind=np.int8(2))
    assert len(e) == 3
    assert e.src.tolist() == [4, 4, 4] and e.src.dtype == np.int32
    assert e.kind.tolist() == [2, 2, 2] and e.kind.dtype == np.int8
    assert e.delay_ns.tolist() == [0, 0, 0] and e.delay_ns.dtype == np.int64
    assert len(Edges.create(src=np.int64(4), dst=5, kind=0)) == 0
    assert Edges.create(src=4, dst=5, kind=0).delay_ns.dtype == np.int64
    w = Waits.create(task_idx=[5, 6], kind=1)
    assert w.kind.tolist() == [1, 1]
    assert w.target_processor_idx.tolist() == [-1, -1]
    assert w.device.tolist() == [-1, -1] and w.record_task_idx.tolist() == [-1, -1]


def test_create_names_a_missing_column_and_every_unknown_one():
    with pytest.raises(GraphError, match=r"^Edges\.create: missing column 'kind'$"):
        Edges.create(src=[0], dst=[1])
    with pytest.raises(GraphError, match=r"^Edges\.create: unknown columns \['bar', 'foo'\]$"):
        Edges.create(src=[0], dst=[1], kind=[0], foo=[1], bar=2)


def test_tasks_create_numbers_each_task_on_its_processor_unless_told():
    """Rows on processors 1, 0, 1, 1, 0 are #0, #0, #1, #2, #1 on theirs; a given ``order`` is
    kept; ``ts_ns`` defaults to 0, ``event_idx`` and ``comm_idx`` to -1."""
    t = Tasks.create(name_idx=0, kind=0, processor_idx=[1, 0, 1, 1, 0], dur_ns=[1, 2, 3, 4, 5])
    assert t.order.tolist() == [0, 0, 1, 2, 1] and t.order.dtype == np.int32
    assert t.name_idx.tolist() == [0] * 5 and t.dur_ns.tolist() == [1, 2, 3, 4, 5]
    assert t.ts_ns.tolist() == [0] * 5
    assert t.event_idx.tolist() == [-1] * 5 and t.comm_idx.tolist() == [-1] * 5
    given = Tasks.create(name_idx=0, kind=0, processor_idx=[1, 1], order=[5, 3], dur_ns=[1, 1])
    assert given.order.tolist() == [5, 3]
    with pytest.raises(GraphError, match=r"^Tasks\.create: missing column 'processor_idx'$"):
        Tasks.create(name_idx=[0], kind=[0], dur_ns=[1])


def test_order_within_counts_rows_of_each_processor_in_row_order():
    assert order_within(np.array([1, 0, 1, 1, 0])).tolist() == [0, 0, 1, 2, 1]
    assert order_within(np.array([7, 7, 7])).tolist() == [0, 1, 2]
    assert order_within(np.array([2, 0, 1])).tolist() == [0, 0, 0]
    assert order_within(np.array([5])).tolist() == [0]
    out = order_within(np.array([], dtype=np.int64))
    assert out.tolist() == [] and out.dtype == np.int32
    assert order_within(np.array([3, 3, 0, 3], dtype=np.int32)).dtype == np.int32


def test_empty_tables_have_every_column_typed_and_no_row():
    for table in (Edges, Waits, Tasks):
        e = table.empty()
        assert len(e) == 0
        for name, dtype in table._COLUMNS.items():
            col = getattr(e, name)
            assert col.shape == (0,) and col.dtype == np.dtype(dtype), (table, name)
    p = Processors.empty()
    assert len(p) == 0 and p.label == ()


def test_take_replace_and_concat_keep_the_columns_typed():
    """``take`` selects rows by index array or mask; ``replace`` casts the new column;
    ``concat`` lays rows one after the other without re-basing indices, and of nothing gives
    the empty table."""
    e = Edges.create(src=[0, 1, 2], dst=[1, 2, 3], kind=[1, 2, 3], delay_ns=[10, 20, 30])
    by_idx = e.take(np.array([2, 0]))
    assert (by_idx.src.tolist(), by_idx.delay_ns.tolist()) == ([2, 0], [30, 10])
    by_mask = e.take(np.array([False, True, True]))
    assert (by_mask.dst.tolist(), by_mask.kind.tolist()) == ([2, 3], [2, 3])
    r = e.replace(delay_ns=np.array([1, 2, 3], dtype=np.int8))
    assert r.delay_ns.tolist() == [1, 2, 3] and r.delay_ns.dtype == np.int64
    assert r.src is e.src or np.array_equal(r.src, e.src)
    both = Edges.concat([e, by_idx])
    assert both.src.tolist() == [0, 1, 2, 2, 0] and both.delay_ns.tolist() == [10, 20, 30, 30, 10]
    assert both.src.dtype == np.int32 and not both.src.flags.writeable
    assert len(Edges.concat([])) == 0 and Edges.concat([]) == Edges.empty()
    assert Edges.concat([e]) == e


def test_tables_are_equal_when_type_columns_and_other_fields_agree():
    """Equal columns of the same table type compare equal; one value, one extra row, or (for
    processors) one label differing makes them unequal; a table never equals another type's
    table (``__eq__`` answers NotImplemented), and tables are not hashable."""
    a = Edges.create(src=[0, 1], dst=[1, 2], kind=[1, 1])
    assert a == Edges.create(src=[0, 1], dst=[1, 2], kind=[1, 1], delay_ns=[0, 0])
    assert a != Edges.create(src=[0, 1], dst=[1, 2], kind=[1, 1], delay_ns=[0, 1])
    assert a != Edges.create(src=[0, 1, 1], dst=[1, 2, 2], kind=[1, 1, 1])
    w = Waits.create(task_idx=[0, 1], kind=[1, 2])
    assert a.__eq__(w) is NotImplemented and a != w
    assert a.__eq__(3) is NotImplemented
    with pytest.raises(TypeError):
        hash(a)
    p = _procs([10, 7], ("main", "compute"))
    assert p == _procs([10, 7], ("main", "compute"))
    assert p != _procs([10, 7], ("main", "other"))
    assert p != _procs([10, 8], ("main", "compute"))


def test_processors_label_themselves_unless_told_and_labels_follow_their_rows():
    """Without labels a thread is "thread <tid>" and a stream "stream <stream id>"; given labels
    are kept (as a tuple) and must be one per processor. ``concat`` carries each processor's
    own label; ``device`` defaults to -1."""
    p = Processors.create(kind=[0, 1, 1], pid=[1, 1, 1], tid=[10, 7, 13])
    assert p.label == ("thread 10", "stream 7", "stream 13")
    assert p.device.tolist() == [-1, -1, -1]
    named = Processors(kind=[0, 1, 1], pid=[1, 1, 1], tid=[10, 7, 13], device=[-1, 0, 0],
                       label=["a", "b", "c"])  # fmt: skip
    assert named.label == ("a", "b", "c")
    both = Processors.concat([named, p])
    assert both.label == ("a", "b", "c", "thread 10", "stream 7", "stream 13")
    assert both.tid.tolist() == [10, 7, 13, 10, 7, 13]
    assert Processors.concat([]) == Processors.empty()
    with pytest.raises(GraphError, match=r"^Processors: 1 labels for 2 processors$"):
        _procs([10, 7], ("x",))


def test_processors_taken_keep_their_own_labels():
    """Processors 2 and 0 (by index) or 1 (by mask) of three: their own labels only (taking
    fewer rows used to raise, keeping all three labels)."""
    named = Processors(kind=[0, 1, 1], pid=[1, 1, 1], tid=[10, 7, 13], device=[-1, 0, 0],
                       label=["a", "b", "c"])  # fmt: skip
    t = named.take(np.array([2, 0]))
    assert t.label == ("c", "a") and t.tid.tolist() == [13, 10]
    assert named.take(np.array([False, True, False])).label == ("b",)
    assert len(named.take(np.array([], dtype=np.int64))) == 0


def test_processors_reordered_keep_each_ones_own_label():
    """All three processors in the order 2, 0, 1 (and by a full mask): the labels travel with
    their rows, even labels that are not the defaults."""
    p = Processors(kind=[0, 1, 1], pid=[1, 1, 1], tid=[10, 7, 13], device=[-1, 0, 0],
                   label=("main", "compute", "comm"))  # fmt: skip
    r = p.take(np.array([2, 0, 1]))
    assert r.label == ("comm", "main", "compute") and r.tid.tolist() == [13, 10, 7]
    assert p.take(np.array([True, True, True])).label == ("main", "compute", "comm")


def test_an_integer_given_for_a_whole_column_must_fit_its_dtype_like_any_column():
    """``kind=300`` broadcast over one row does not fit int8: the same GraphError as a list
    ``[300]`` (it used to escape as numpy's OverflowError); over no rows there is nothing to
    lose."""
    with pytest.raises(GraphError, match=r"^Edges\.kind: values do not fit in int8$"):
        Edges.create(src=[0], dst=[1], kind=300)
    assert len(Edges.create(src=0, dst=0, kind=300)) == 0
