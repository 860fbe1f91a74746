"""``microbatch_blocks``: the micro-batch blocks of one step of a pipeline stage's thread, from
its point-to-point ops, on hand-written op sequences (positions worked out in each docstring:
``R`` a receive, ``S`` a send, other letters compute ops; equal letters are equal symbols)."""

from __future__ import annotations

import numpy as np

from lumos.estimate.microbatches import microbatch_blocks
from lumos.graph.synthetic import GraphBuilder

NAMES = {"R": "nccl:recv", "S": "nccl:send", "Q": "nccl:recv", "T": "nccl:send"}


def blocks(ops: str, tasks: list[int] | None = None):
    """Blocks of the thread running ``ops`` (one task per letter; ``Q``/``T`` are a receive
    and a send with other shapes than ``R``/``S``), over ``tasks`` (default all)."""
    bld = GraphBuilder()
    th = bld.thread(1)
    for c in ops:
        bld.task(th, NAMES.get(c, f"aten::{c}"), 10)
    g = bld.build().validate()
    seq = np.array([ord(c) for c in ops], dtype=np.int64)
    idx = np.arange(len(ops), dtype=np.int64) if tasks is None else np.array(tasks, np.int64)
    return microbatch_blocks(g, idx, seq[idx])


def test_a_last_stage_block_runs_from_a_receive_to_the_next_the_last_as_long_as_the_one_before():
    """``a R x y R x y R x y z w``: receives at 1, 4, 7; blocks [1, 4), [4, 7) and [7, 10)
    (7 + the period 3), the tail ``z w`` left out."""
    assert blocks("aRxyRxyRxyzw") == [([1, 4, 7], [4, 7, 10])]


def test_the_last_receive_block_stops_at_the_end_of_the_step():
    """``a R x y R x y R x``: the last block would end at 7 + 3 = 10, past the 9 ops: 9."""
    assert blocks("aRxyRxyRx") == [([1, 4, 7], [4, 7, 9])]


def test_a_first_stage_block_ends_with_its_send_the_first_as_long_as_the_one_after():
    """``x y S x y S x y S z``: sends at 2, 5, 8; blocks end after them (3, 6, 9), each
    begins after the send before; the first begins 3 (the period) before its end: 0."""
    assert blocks("xySxySxySz") == [([0, 3, 6], [3, 6, 9])]


def test_the_first_send_block_starts_no_earlier_than_the_step():
    """``y S x x y S x x y S``: sends at 1, 5, 9 (period 4); the first block would start at
    1 + 1 - 4 = -2: it starts at 0."""
    assert blocks("ySxxySxxyS") == [([0, 2, 6], [2, 6, 10])]


def test_a_middle_stage_block_runs_from_each_receive_to_its_send():
    """``R f S R f S R f S g``: three (receive, send) pairs; blocks [0, 3), [3, 6), [6, 9)
    (each send inclusive), ``g`` after them in none."""
    assert blocks("RfSRfSRfSg") == [([0, 3, 6], [3, 6, 9])]


def test_one_pair_is_no_run_and_a_lone_message_marks_nothing():
    """``R f S g``: one (receive, send) pair is not a repeat; ``x S y``: one send; two pairs
    that differ (``R f T R f S``: ``T`` is a send of other shapes) or a send before each
    receive (``S f R S f R``): no blocks."""
    assert blocks("RfSg") == []
    assert blocks("xSy") == []
    assert blocks("RfTRfS") == []
    assert blocks("SfRSfR") == []


def test_a_forward_send_run_then_a_backward_receive_run_meet_where_the_second_begins():
    """A first stage, ``f f S f f S R b b R b b o``: sends at 2, 5 give [0, 3), [3, 6);
    receives at 6, 9 give [6, 9), [9, 12). The runs meet at 6: nothing to trim."""
    assert blocks("ffSffSRbbRbbo") == [([0, 3], [3, 6]), ([6, 9], [9, 12])]


def test_an_open_last_block_is_cut_where_the_next_run_begins():
    """``R x x x R x S y S y``: receives at 0, 4 (period 4, the last open to 8); sends at 6, 8
    (period 2: blocks [5, 7), [7, 9)). The receive run's open end is cut to 5, where the send
    run begins."""
    assert blocks("RxxxRxSySy") == [([0, 4], [4, 5]), ([5, 7], [7, 9])]


def test_a_middle_stage_then_a_last_stage_run():
    """``R f S R f S R b b R b b``: two (receive, send) pairs [0, 3), [3, 6), then receives
    at 6 and 9, both ``R``: the pairs' search stops at the pair ``R b``, and the receives
    ``R`` at 6, 9 form a run [6, 9), [9, 12)."""
    assert blocks("RfSRfSRbbRbb") == [([0, 3], [3, 6]), ([6, 9], [9, 12])]


def test_positions_are_within_the_tasks_given():
    """Over tasks 2..9 of ``a b x S x S x S c d``: sends at positions 1, 3, 5 of those 8
    tasks: blocks [0, 2), [2, 4), [4, 6)."""
    assert blocks("abxSxSxScd", list(range(2, 10))) == [([0, 2, 4], [2, 4, 6])]


def test_pairs_after_four_lone_messages_are_found_once():
    """``S a T b S c T d`` (four lone messages, no two alike in a row, none a receive: no
    run, no pair), then three (receive, send) pairs from position 8: blocks [8, 11),
    [11, 14), [14, 17), found once; the search goes on after the last pair."""
    assert blocks("SaTbScTdRfSRfSRfS") == [([8, 11, 14], [11, 14, 17])]


def test_a_lone_message_before_a_run_does_not_end_the_search():
    """``a T b R x x R x x``: the lone send ``T`` at 1 marks nothing; the receives at 3 and
    6 still give [3, 6), [6, 9)."""
    assert blocks("aTbRxxRxx") == [([3, 6], [6, 9])]


def test_the_open_end_of_a_three_block_run_is_cut_at_the_next_run():
    """``R x x x R x x x R x S y S y``: receives at 0, 4, 8 (the last block open to 12),
    sends at 10, 12 (blocks [9, 11), [11, 13)): only the receive run's last end is cut, to 9."""
    assert blocks("RxxxRxxxRxSySy") == [([0, 4, 8], [4, 8, 9]), ([9, 11], [11, 13])]


def test_with_three_runs_each_open_end_meets_its_own_neighbour():
    """``R x x x R x S y S y R z R z z``: receives at 0, 4 (open to 8), sends at 6, 8
    ([5, 7), [7, 9)), receives at 10, 12 ([10, 12), [12, 14), the last open end 14 within
    the 15 ops). The first run's end is cut to 5, where the second begins; the second's end
    (9) stays before the third (10)."""
    assert blocks("RxxxRxSySyRzRzz") == [([0, 4], [4, 5]), ([5, 7], [7, 9]), ([10, 12], [12, 14])]


def test_an_open_first_block_reaching_back_yields_to_the_receive_before_it():
    """``R x x x R x x x R x S y y y y y S``: receives at 0, 4, 8 give blocks [0, 4), [4, 8) and
    an open last one from 8 (8 + 4 = 12); sends at 10, 16 give [11, 17) and an open first one
    reaching back as far as the one after (11 - 6 = 5). The open ends meet inside the
    receive's block, which keeps its own message: it ends at 9 (not at 5, which would put the
    receive in a block ending before it starts), and the send run's first block starts there:
    [9, 11)."""
    assert blocks("RxxxRxxxRxSyyyyyS") == [([0, 4, 8], [4, 8, 9]), ([9, 11], [11, 17])]
