"""The text of the simulator's deadlock error, pinned word for word on hand-made stuck graphs.

The message is what a user reads when a replay cannot finish: the count of stuck tasks, up to
three of them (those blocked on a runtime wait or a collective first, else the first stuck ones)
with the reason each is stuck, and hints for foreign Chakra ETs and gloo spans left out.
"""

from __future__ import annotations

import pytest

from lumos.chakra.mapping_foreign import FOREIGN_ORDER
from lumos.diagnostics import Diagnostics
from lumos.errors import SimulationError
from lumos.graph.build_tasks import GLOO_LEFT_OUT
from lumos.graph.model import CommType, DepKind, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import simulate

_FOREIGN_HINT = (
    " were not written by lumos: their communication runs one node at a time in file order, and "
    "sends and receives that ASTRA-sim issues without waiting wait for each other here; "
    "replay them with --chakra-only (ASTRA-sim's semantics)"
)


def _message(graph_or_workload: object) -> str:
    with pytest.raises(SimulationError) as info:
        simulate(graph_or_workload)  # type: ignore[arg-type]
    return str(info.value)


def test_a_cycle_names_the_first_three_tasks_and_their_missing_predecessor() -> None:
    """Four tasks on four threads in a cycle a -> b -> c -> d -> a: none can start, none waits
    on a sync or a collective, so the message shows the first three (task order) as blocked by
    a predecessor; the fourth is counted but not named."""
    b = GraphBuilder()
    tasks = [b.task(b.thread(tid), name, 1) for tid, name in zip((1, 2, 3, 4), "abcd", strict=True)]
    for src, dst in zip(tasks, tasks[1:] + tasks[:1], strict=True):
        b.edge(src, dst, DepKind.INTER_THREAD)
    assert _message(b.build()) == (
        "deadlock: 4 of 4 tasks can never start; "
        "rank 0 task 0 'a' (CPU_OP on thread 1 #0): predecessor never ran; "
        "rank 0 task 1 'b' (CPU_OP on thread 2 #0): predecessor never ran; "
        "rank 0 task 2 'c' (CPU_OP on thread 3 #0): predecessor never ran"
    )


def test_a_stuck_wait_is_named_before_earlier_tasks_stuck_behind_it() -> None:
    """Task 0 ('x', thread 2) needs 'later'; 'later' follows the stream sync (task 1) on thread
    1; the sync waits for kernel 'k' (no launch edge: launched at time 0), and 'k' needs 'later'.
    All 4 are stuck; only the sync is stuck on a runtime wait, so it alone is named, although
    task 0 comes first. The graph is marked foreign, but no shown task is a collective, so the
    Chakra hint is left out."""
    b = GraphBuilder()
    th, th2, st = b.thread(1), b.thread(2), b.stream(7)
    x = b.task(th2, "x", 1)
    sync = b.task(th, "cudaStreamSynchronize", 1, TaskKind.RUNTIME)
    later = b.task(th, "later", 1)
    k = b.task(st, "k", 5)
    b.edge(later, x, DepKind.INTER_THREAD)
    b.edge(later, k, DepKind.INTER_THREAD)
    b.wait(sync, WaitKind.STREAM, stream=st)
    g = b.build().replace(diagnostics=Diagnostics({FOREIGN_ORDER: 1}))
    assert _message(g) == (
        "deadlock: 4 of 4 tasks can never start; "
        "rank 0 task 1 'cudaStreamSynchronize' (RUNTIME on thread 1 #0): "
        "runtime wait never satisfied"
    )


def crossed_collectives(n: int, gloo_left_out: tuple[int, ...] = ()) -> Workload:
    """``n`` ranks, all marked as foreign Chakra ETs: rank 0 issues all-reduce seq 2 then seq 1,
    every other rank seq 1 then seq 2, each followed by 'after'; ranks in ``gloo_left_out``
    also count a gloo span left out."""
    graphs = []
    for rank in range(n):
        b = GraphBuilder(rank=rank, world_size=n)
        st = b.stream(20)
        pg = b.process_group("0", tuple(range(n)))
        for seq in (2, 1) if rank == 0 else (1, 2):
            c = b.comm(CommType.ALL_REDUCE, 8, pg, seq)
            b.task(st, f"ar{seq}", 5, TaskKind.COMM, comm=c)
        b.task(st, "after", 7)
        d = Diagnostics({FOREIGN_ORDER: 3})
        if rank in gloo_left_out:
            d.warn(GLOO_LEFT_OUT, "gloo:all_reduce", 2)
        graphs.append(b.build().replace(diagnostics=d))
    return Workload(tuple(graphs))


@pytest.mark.parametrize(
    ("n", "gloo_left_out", "tail"),
    [
        (8, (), "0, 1, 2, 3, 4, 5, 6, 7" + _FOREIGN_HINT),
        (
            9,
            (3, 5),
            "0, 1, 2, 3, 4, 5, 6, 7..." + _FOREIGN_HINT + ". Rank(s) 3, 5 left gloo spans out of "
            "the graph (gloo_span_left_out; lumos -v names the first): their peers wait for them "
            "forever",
        ),
    ],
)
def test_crossed_collectives_name_the_first_three_and_the_foreign_ranks(
    n: int, gloo_left_out: tuple[int, ...], tail: str
) -> None:
    """Rank 0 waits in seq 2 for peers stuck in seq 1, which waits for rank 0: all 3n tasks are
    stuck. The 2n all-reduces are collective members (of the groups numbered 0 for seq 2, met
    first, and 1 for seq 1), so the first three of them in task order are named: rank 0's two,
    then rank 1's first. Every rank is foreign: at most 8 ranks are listed, '...' after 8 of 9."""
    assert _message(crossed_collectives(n, gloo_left_out)) == (
        f"deadlock: {3 * n} of {3 * n} tasks can never start; "
        "rank 0 task 0 'ar2' (COMM on stream 20 #0): collective peers never arrived; "
        "rank 0 task 1 'ar1' (COMM on stream 20 #1): collective peers never arrived; "
        "rank 1 task 0 'ar1' (COMM on stream 20 #0): collective peers never arrived"
        ". The Chakra ETs of rank(s) " + tail
    )


def test_a_stuck_collective_numbered_0_brings_the_chakra_hint_for_the_foreign_ranks_only() -> None:
    """Two ranks share one all-reduce (seq 1), the only collective, so its group is numbered 0.
    Rank 1's all-reduce needs 'x', which is in a cycle with 'y' (two threads): rank 0's
    all-reduce arrives and waits forever. Of the 4 tasks all are stuck; the two all-reduces are
    the collective members, named in task order (rank 0's task 0, then rank 1's task 2). A shown
    task is in a collective (group 0 counts like any other) and only rank 1 is marked foreign, so
    the hint lists rank 1 alone."""
    graphs = []
    for rank in (0, 1):
        b = GraphBuilder(rank=rank, world_size=2)
        pg = b.process_group("0", (0, 1))
        if rank == 1:
            x, y = b.task(b.thread(1), "x", 1), b.task(b.thread(2), "y", 1)
            b.edge(x, y, DepKind.INTER_THREAD)
            b.edge(y, x, DepKind.INTER_THREAD)
        c = b.comm(CommType.ALL_REDUCE, 8, pg, 1)
        ar = b.task(b.stream(20), "ar1", 5, TaskKind.COMM, comm=c)
        if rank == 1:
            b.edge(x, ar, DepKind.INTER_THREAD)
        d = Diagnostics({FOREIGN_ORDER: 2}) if rank == 1 else Diagnostics()
        graphs.append(b.build().replace(diagnostics=d))
    assert _message(Workload(tuple(graphs))) == (
        "deadlock: 4 of 4 tasks can never start; "
        "rank 0 task 0 'ar1' (COMM on stream 20 #0): collective peers never arrived; "
        "rank 1 task 2 'ar1' (COMM on stream 20 #0): collective peers never arrived"
        ". The Chakra ETs of rank(s) 1" + _FOREIGN_HINT
    )
