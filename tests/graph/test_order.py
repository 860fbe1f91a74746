"""The compiled loops over dependency graphs in CSR form (``lumos.graph._order``).

One five-row DAG, worked by hand: rows 1 and 2 depend on row 0, row 3 on rows 1 and 2, row 4
on nothing. ``tests/unit/test_compiled.py`` checks that the compiled module and its Python
source agree; this file pins what both compute.
"""

from __future__ import annotations

import numpy as np

from lumos.graph._order import kahn_fifo, list_schedule, longest_path, successor_csr

#: predecessors per row: 0 <- -, 1 <- 0, 2 <- 0, 3 <- 1, 2, 4 <- -
PRED_PTR = np.array([0, 0, 1, 2, 4, 4], dtype=np.int64)
PRED_IDX = np.array([0, 0, 1, 2], dtype=np.int64)
DUR = np.array([3, 4, 10, 2, 1], dtype=np.int64)


def test_successors_are_the_predecessor_lists_turned_around_in_row_order():
    """Row 0 is the predecessor of rows 1 and 2, rows 1 and 2 of row 3: two successors for row
    0, one each for rows 1 and 2, none for rows 3 and 4. Kahn's FIFO order over them starts
    with the rows nothing precedes (0, 4), then 1 and 2 as row 0 frees them, then 3."""
    succ_ptr, succ = successor_csr(5, PRED_PTR, PRED_IDX)
    assert succ_ptr.tolist() == [0, 2, 3, 4, 4, 4]
    assert succ.tolist() == [1, 2, 3, 3]
    no_extra = np.full(5, -1, dtype=np.int64)
    queue, length = kahn_fifo(5, succ_ptr, np.arange(4, dtype=np.int64), succ, no_extra)
    assert queue[:length].tolist() == [0, 4, 1, 2, 3]


def test_the_longest_chain_ends_each_row_and_says_which_predecessor_it_came_through():
    """Finish = longest finish among the predecessors + own duration: row 0 3, row 1 3 + 4 = 7,
    row 2 3 + 10 = 13, row 3 max(7, 13) + 2 = 15 (through row 2), row 4 1. Rows with no
    predecessor come through none (-1)."""
    order = np.array([0, 4, 1, 2, 3], dtype=np.int64)
    finish, via = longest_path(order, PRED_PTR, PRED_IDX, DUR)
    assert finish.tolist() == [3, 7, 13, 15, 1]
    assert via.tolist() == [-1, 0, 0, 2, -1]


def test_a_list_schedule_waits_for_predecessors_and_for_the_processor():
    """Rows 0, 1, 3 on processor 0, rows 2 and 4 on processor 1; row 4 is not in the order.
    Row 0 runs 0-3; row 1 (after row 0) 3-7; row 2 (after row 0, on an idle processor 1)
    3-13; row 3 waits for row 2: 13-15. Row 4, never scheduled, keeps start -1 and end 0."""
    order = np.array([0, 1, 2, 3], dtype=np.int64)
    proc = np.array([0, 0, 1, 0, 1], dtype=np.int64)
    start, end = list_schedule(order, PRED_PTR, PRED_IDX, DUR, proc, 2)
    assert start.tolist() == [0, 3, 3, 13, -1]
    assert end.tolist() == [3, 7, 13, 15, 0]


def test_a_list_schedule_reads_only_each_rows_own_predecessors():
    """Row 4 has no predecessor and a processor (2) of its own, so it starts at 0 and ends at
    its duration 1 even though it is scheduled last, after row 3 waited for row 2 until 13:
    reading any predecessor list other than its own (rows 0-3 list 0, 0, 1, 2, ending as late
    as 13) would start it at 13. The other rows keep the schedule of the test above."""
    order = np.array([0, 1, 2, 3, 4], dtype=np.int64)
    proc = np.array([0, 0, 1, 0, 2], dtype=np.int64)
    start, end = list_schedule(order, PRED_PTR, PRED_IDX, DUR, proc, 3)
    assert start.tolist() == [0, 3, 3, 13, 0]
    assert end.tolist() == [3, 7, 13, 15, 1]
    assert start.dtype == end.dtype == np.int64  # integer ns, as the compiled module returns
