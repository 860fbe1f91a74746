"""Change the order of work on threads: blocks in another order, sends batched with receives.

:func:`reorder_blocks` runs task blocks (a pipeline stage's micro-batch forwards and backwards)
in another order; :func:`rebuild_in_order` is the graph surgery under it. :func:`batch_sends`
models ``batch_isend_irecv``: a pipeline schedule that interleaves forwards and backwards
(1F1B) sends an activation and receives a gradient at one point of the thread (Megatron's
``send_forward_recv_backward`` and ``send_backward_recv_forward``). With the blocking
send-then-receive a re-ordered trace keeps, two neighbouring stages would each send first and
wait for the other's receive forever; issued together, the send and the receive both progress
and the thread goes on when both are done.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.blocks import INTRA_KINDS, overhead_before, tasks_in_order
from lumos.graph.kinds import CommType, DepKind, ProcessorKind
from lumos.graph.model import Edges, ExecGraph, Processors

__all__ = ["batch_sends", "rebuild_in_order", "reorder_blocks"]


def reorder_blocks(
    g: ExecGraph, blocks: Sequence[NDArray[np.int64]], order: Sequence[int]
) -> tuple[ExecGraph, NDArray[np.int64]]:
    """``g`` with ``blocks`` (task sets, none shared) run in ``order`` (a permutation of their
    indices): on each processor, from where the first of them began; tasks between them follow
    after. Dependencies keep their tasks; program-order edges are regenerated, each task
    keeping the overhead before it. Also returns the new index of every old task."""
    if sorted(order) != list(range(len(blocks))):
        raise ConfigError("reorder_blocks: order must be a permutation of the blocks")
    indptr, perm = g.processor_order()
    block_of = np.full(g.num_tasks, -1, dtype=np.int64)
    for b, members in enumerate(blocks):
        block_of[members] = b
    src: list[int] = []
    proc = g.tasks.processor_idx
    for p in range(len(g.processors)):
        emitted = False
        for t_ in perm[indptr[p] : indptr[p + 1]].tolist():
            if block_of[t_] < 0:
                src.append(t_)
            elif not emitted:
                emitted = True
                for b in order:
                    members = blocks[b][proc[blocks[b]] == p]
                    src += members[np.argsort(g.tasks.order[members], kind="stable")].tolist()
    return rebuild_in_order(g, np.asarray(src, dtype=np.int64))


def rebuild_in_order(g: ExecGraph, src: NDArray[np.int64]) -> tuple[ExecGraph, NDArray[np.int64]]:
    """``g`` with its tasks in the order ``src`` (old task indices, grouped by processor, each
    group in program order) and the new index of every old task. Program-order edges are
    regenerated, each task keeping the overhead before it; other dependencies keep their
    tasks; annotations whose first and last task no longer come in order are dropped."""
    new_of = np.empty(g.num_tasks, dtype=np.int64)
    new_of[src] = np.arange(len(src))
    e = g.edges
    keep = ~np.isin(e.kind, np.array(INTRA_KINDS, dtype=np.int8))
    tasks, intra = tasks_in_order(g, src, e)
    tasks = tasks.replace(comm_idx=g.tasks.comm_idx[src])
    a = g.annotations
    f, la = a.first_task_idx, a.last_task_idx
    nf = np.where(f >= 0, new_of[np.maximum(f, 0)], -1)
    nl = np.where(la >= 0, new_of[np.maximum(la, 0)], -1)
    ok = (f < 0) | (nf <= nl)
    w = g.waits
    out = g.replace(
        tasks=tasks,
        edges=Edges.create(
            src=np.concatenate([new_of[e.src[keep]], intra[0]]).astype(np.int32),
            dst=np.concatenate([new_of[e.dst[keep]], intra[1]]).astype(np.int32),
            kind=np.concatenate([e.kind[keep], np.asarray(intra[2], dtype=np.int8)]),
            delay_ns=np.concatenate([e.delay_ns[keep], np.asarray(intra[3], dtype=np.int64)]),
        ),
        annotations=a.take(np.flatnonzero(ok)).replace(
            first_task_idx=nf[ok].astype(np.int32), last_task_idx=nl[ok].astype(np.int32)
        ),
        waits=w.replace(
            task_idx=new_of[w.task_idx].astype(np.int32),
            record_task_idx=np.where(
                w.record_task_idx >= 0, new_of[np.maximum(w.record_task_idx, 0)], -1
            ).astype(np.int32),
        ),
        task_dims_idx=None if g.task_dims_idx is None else g.task_dims_idx[src],
    )
    return out, new_of


def batch_sends(
    g: ExecGraph, eligible: NDArray[np.bool_] | None = None, every: bool = False
) -> tuple[ExecGraph, int]:
    """``g`` with every send (of the tasks ``eligible``, default all) whose next communication
    on its thread is a receive issued together with it, and how many were. Such a send moves
    to a lane of its own beside the thread (one lane per thread, label ``<thread>: batched
    sends``), starting where it started (after the task before it, with the same overhead);
    the thread goes straight on to the receive, and the task after the receive waits for the
    send as well. With ``every``, all sends move to lanes and nothing waits for them
    (non-blocking sends whose completion holds no one up: an interleaved schedule waits for a
    send together with another stream's receive, which a send-then-next-receive pairing would
    turn into a deadlock), each communicator and peer on a lane of its own."""
    t, c = g.tasks, g.comms
    indptr, perm = g.processor_order()
    kind = np.full(g.num_tasks, -1, dtype=np.int64)
    has = t.comm_idx >= 0
    kind[has] = c.kind[t.comm_idx[has]]
    sends: list[NDArray[np.int64]] = []
    prevs: list[NDArray[np.int64]] = []
    afters: list[NDArray[np.int64]] = []
    lanes_of: list[int] = []
    for p in np.flatnonzero(g.processors.kind == int(ProcessorKind.THREAD)).tolist():
        seq = perm[indptr[p] : indptr[p + 1]]
        pos = np.flatnonzero(kind[seq] >= 0)
        if len(pos) < (1 if every else 2):
            continue
        a = pos
        b = np.append(pos[1:], len(seq))  # the next communication (past the end: none)
        nxt = np.where(b < len(seq), kind[seq[np.minimum(b, len(seq) - 1)]], -1)
        pair = kind[seq[a]] == int(CommType.SEND)
        if not every:
            pair &= nxt == int(CommType.RECV)
        if eligible is not None:
            pair &= eligible[seq[a]]
        if not pair.any():
            continue
        a, b = a[pair], b[pair]
        recv_next = (nxt[pair] == int(CommType.RECV)) & (not every)
        after = np.where(recv_next & (b + 1 < len(seq)), seq[np.minimum(b + 1, len(seq) - 1)], -1)
        prev = np.where(a > 0, seq[np.maximum(a - 1, 0)], -1)
        # non-blocking sends to different peers or communicators do not queue behind each other
        stream = c.pg_idx[t.comm_idx[seq[a]]] * 65536 + c.peer_rank[t.comm_idx[seq[a]]]
        for key in np.unique(stream) if every else [None]:
            sel = slice(None) if key is None else stream == key
            sends.append(seq[a][sel])
            prevs.append(prev[sel])
            afters.append(after[sel])
            lanes_of.append(p)
    if not sends:
        return g, 0
    pr = g.processors
    lane = len(pr) + np.repeat(np.arange(len(sends)), [len(s) for s in sends])
    send, prev, after = np.concatenate(sends), np.concatenate(prevs), np.concatenate(afters)
    lanes = Processors(
        kind=np.full(len(lanes_of), int(ProcessorKind.THREAD), dtype=np.int8),
        pid=pr.pid[lanes_of],
        tid=int(pr.tid.max()) + 1 + np.arange(len(lanes_of), dtype=np.int64),
        device=np.full(len(lanes_of), -1, dtype=np.int32),
        label=tuple(f"{pr.label[p]}: batched sends" for p in lanes_of),
    )
    delay_in = overhead_before(g.num_tasks, g.edges)[1]
    proc = np.array(t.processor_idx, dtype=np.int32)
    proc[send] = lane
    moved = g.replace(
        processors=Processors.concat([pr, lanes]), tasks=t.replace(processor_idx=proc)
    )
    out, new_of = rebuild_in_order(moved, moved.processor_order()[1])
    # a lane's sends are queued, not paced by the overhead they had on the thread
    e2 = out.edges
    # the thread no longer waits for a moved send where the trace's blocking send held it
    # (the build's "resumes after its own communication" edges): only the waits added here
    moved_send = np.zeros(out.num_tasks, dtype=bool)
    moved_send[new_of[send]] = True
    own_thread = (
        out.tasks.processor_idx[e2.dst]
        == np.asarray(lanes_of)[np.maximum(out.tasks.processor_idx[e2.src] - len(pr), 0)]
    )
    held = (e2.kind == int(DepKind.INTER_THREAD)) & moved_send[e2.src] & own_thread
    e2 = e2.take(np.flatnonzero(~held))
    on_lane = np.isin(out.tasks.processor_idx[e2.dst], np.arange(len(pr), len(pr) + len(lanes_of)))
    delay = np.where((e2.kind == int(DepKind.INTRA_THREAD)) & on_lane, 0, e2.delay_ns)
    issue = prev >= 0
    wait = after >= 0
    edges = Edges.create(
        src=np.concatenate([e2.src, new_of[prev[issue]], new_of[send[wait]]]).astype(np.int32),
        dst=np.concatenate([e2.dst, new_of[send[issue]], new_of[after[wait]]]).astype(np.int32),
        kind=np.concatenate([e2.kind, np.full(int(issue.sum() + wait.sum()),
                                              int(DepKind.INTER_THREAD), dtype=np.int8)]),
        delay_ns=np.concatenate([delay, delay_in[send[issue]],
                                 np.zeros(int(wait.sum()), dtype=np.int64)]),
    )  # fmt: skip
    return out.replace(edges=edges), len(send)
