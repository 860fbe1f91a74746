"""Link a PyTorch Execution Trace (host ops) to the Kineto trace of the same rank.

:func:`link` joins every ET op node to at most one Kineto ``cpu_op``/``user_annotation`` event,
trying in order:

1. **rf_id**: ET ``rf_id`` == Kineto "Record function id" (newer traces);
2. **external_id**: ET ``rf_id`` == Kineto "External id" of an op (2023 traces). Runtime calls
   are never joined this way: in those traces their "External id" is their correlation id;
3. **sequence**: order-preserving alignment of op names, per thread (ET ``tid`` paired with the
   Kineto thread whose op names overlap most), when ids are absent or come from a different
   iteration (see :mod:`lumos.link.align`). When Kineto holds many iterations, the stretch of
   the main thread most like the ET's one iteration is linked, and the other threads are kept to
   its time span.

An id join counts only when both sides carry the same op name. If fewer than
:data:`ID_JOIN_MIN_SHARE` of the ET ops join that way, the ids are taken to be from another
iteration: the coincidental joins are discarded (``diagnostics``: ``id_join_rejected``) and
everything is aligned by sequence. Nothing is dropped: both traces are kept whole, and unmatched
ops are listed in the :class:`~lumos.link.report.LinkReport`.

Synthetic ET nodes (``[pytorch|profiler|execution_graph|process]``, ``...|thread]``) have no Kineto
counterpart and are not counted as ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.diagnostics import Diagnostics
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.pytorch_et import HostTrace
from lumos.link.align import align, best_window
from lumos.link.host_device import GPU_ACTIVITY, OP_CATEGORIES, HostDevice, attach_host_device
from lumos.link.report import LinkReport, ThreadPair

__all__ = [
    "ID_JOIN_MIN_SHARE",
    "METHOD_NAMES",
    "LinkedTrace",
    "link",
]

METHOD_NAMES: tuple[str, ...] = ("unmatched", "rf_id", "external_id", "sequence")
_NONE, _RF_ID, _EXTERNAL_ID, _SEQUENCE = range(4)
ID_JOIN_MIN_SHARE = 0.5
_SYNTHETIC_PREFIX = "[pytorch|profiler|execution_"
_WINDOW_RATIO = 1.5  # Kineto thread this much longer than the ET thread: pick one iteration


@dataclass(frozen=True, slots=True, eq=False)
class LinkedTrace:
    """An ET and a Kineto trace of one rank, joined. Both inputs are kept whole, unmodified.

    ``node_event_idx[n]``: the Kineto event row of ET node ``n`` (-1 when unmatched or synthetic);
    ``node_method[n]``: index into :data:`METHOD_NAMES`; ``event_node_idx[e]``: the inverse.
    ``gpu_node_idx[e]``: for a GPU activity, the ET node of the nearest linked op enclosing its
    launch call (-1 when none).
    """

    host: HostTrace
    kineto: KinetoTrace
    node_event_idx: np.ndarray  # int64
    node_method: np.ndarray  # int8
    event_node_idx: np.ndarray  # int64
    gpu_node_idx: np.ndarray  # int64
    host_device: HostDevice
    report: LinkReport
    diagnostics: Diagnostics

    def __repr__(self) -> str:
        r = self.report
        return (f"LinkedTrace(rank {r.rank}: {r.num_linked} of {r.num_et_ops} ET ops linked "
                f"({100 * r.match_rate:.1f} %), {r.num_gpu_with_node} of "
                f"{r.num_gpu_activities} GPU activities on a node)")  # fmt: skip

    def gpu_events_of(self, node_idx: int) -> np.ndarray:
        """Rows of the GPU activities attributed to ET node ``node_idx`` (its own launches)."""
        return np.flatnonzero(self.gpu_node_idx == node_idx)


def link(host: HostTrace, kineto: KinetoTrace) -> LinkedTrace:
    """Join ``host`` (PyTorch ET) to ``kineto`` (same rank). See the module docstring."""
    diagnostics = Diagnostics()
    ev = kineto.events
    vocab: dict[str, int] = {}
    et_sym = np.asarray([vocab.setdefault(s, len(vocab)) for s in host.names], dtype=np.int64)[
        host.name_idx
    ]
    k_sym = np.asarray([vocab.setdefault(s, len(vocab)) for s in kineto.names], dtype=np.int64)[
        ev.name_idx
    ]
    synthetic = np.asarray([s.startswith(_SYNTHETIC_PREFIX) for s in host.names])[host.name_idx]
    et_ops = np.flatnonzero(~synthetic)
    k_is_op = kineto.mask(*OP_CATEGORIES)
    for p in range(len(kineto.processors)):
        if kineto.processors.is_stream(p):
            k_is_op &= ev.processor_idx != p

    node_event = np.full(host.num_nodes, -1, dtype=np.int64)
    method = np.zeros(host.num_nodes, dtype=np.int8)
    id_join = _id_join(host, kineto, et_ops, et_sym, k_sym, k_is_op, node_event, method)
    if id_join and (method > 0).sum() < ID_JOIN_MIN_SHARE * et_ops.size:
        got = int((method > 0).sum())
        diagnostics.warn(
            "id_join_rejected",
            f"only {got} of {et_ops.size} ops join by {id_join} with equal names: "
            "the traces are from different iterations; aligned by sequence instead",
        )
        node_event[:] = -1
        method[:] = _NONE
        id_join = f"{id_join} (rejected)"

    event_node = np.full(len(ev), -1, dtype=np.int64)
    event_node[node_event[node_event >= 0]] = np.flatnonzero(node_event >= 0)
    pairs = _sequence_join(
        host, kineto, et_ops, et_sym, k_sym, k_is_op, node_event, event_node, method
    )

    hd = attach_host_device(kineto)
    diagnostics.merge(hd.diagnostics)
    gpu_node = _gpu_nodes(kineto, hd, event_node)
    report = _report(
        host,
        kineto,
        et_ops,
        node_event,
        method,
        event_node,
        k_is_op,
        hd,
        gpu_node,
        id_join or "none",
        pairs,
    )
    return LinkedTrace(
        host=host,
        kineto=kineto,
        node_event_idx=node_event,
        node_method=method,
        event_node_idx=event_node,
        gpu_node_idx=gpu_node,
        host_device=hd,
        report=report,
        diagnostics=diagnostics,
    )


def _id_join(
    host: HostTrace,
    kineto: KinetoTrace,
    et_ops: np.ndarray,
    et_sym: np.ndarray,
    k_sym: np.ndarray,
    k_is_op: np.ndarray,
    node_event: np.ndarray,
    method: np.ndarray,
) -> str:
    """Join by rf_id, else External id, keeping only same-name pairs; returns the key used."""
    ev = kineto.events
    for key, col, code in (
        ("rf_id", ev.rf_id, _RF_ID),
        ("external_id", ev.external_id, _EXTERNAL_ID),
    ):
        cand = np.flatnonzero(k_is_op & (col >= 0))
        if cand.size == 0:
            continue
        ids = col[cand]
        order = np.argsort(ids, kind="stable")
        ids, cand = ids[order], cand[order]
        want = host.rf_id[et_ops]
        pos = np.searchsorted(ids, want).clip(0, ids.size - 1)
        hit = (ids[pos] == want) & (want >= 0)
        nodes, events = et_ops[hit], cand[pos[hit]]
        same = et_sym[nodes] == k_sym[events]
        # One event per node and one node per event: the first claim (lowest node id) wins.
        _, first = np.unique(events[same], return_index=True)
        nodes, events = nodes[same][first], events[same][first]
        node_event[nodes] = events
        method[nodes] = code
        return key
    return ""


def _sequence_join(
    host: HostTrace,
    kineto: KinetoTrace,
    et_ops: np.ndarray,
    et_sym: np.ndarray,
    k_sym: np.ndarray,
    k_is_op: np.ndarray,
    node_event: np.ndarray,
    event_node: np.ndarray,
    method: np.ndarray,
) -> list[ThreadPair]:
    """Align the still-unmatched ops thread by thread; returns the thread pairing used."""
    ev = kineto.events
    todo = et_ops[node_event[et_ops] < 0]
    free = np.flatnonzero(k_is_op & (event_node < 0))  # sorted by (thread, start)
    et_tids = sorted(set(host.tid[todo].tolist()))
    k_procs = sorted(set(ev.processor_idx[free].tolist()))
    if not et_tids or not k_procs:
        return []
    a_by = {t: todo[host.tid[todo] == t] for t in et_tids}
    b_by = {p: free[ev.processor_idx[free] == p] for p in k_procs}
    scores = []
    for t in et_tids:
        sa, ca = np.unique(et_sym[a_by[t]], return_counts=True)
        for p in k_procs:
            sb, cb = np.unique(k_sym[b_by[p]], return_counts=True)
            _, xa, xb = np.intersect1d(sa, sb, assume_unique=True, return_indices=True)
            scores.append((int(np.minimum(ca[xa], cb[xb]).sum()), t, p))
    scores.sort(key=lambda s: (-s[0], s[1], s[2]))
    used_t: set[int] = set()
    used_p: set[int] = set()
    chosen: list[tuple[int, int]] = []
    for score, t, p in scores:
        if score > 0 and t not in used_t and p not in used_p:
            used_t.add(t)
            used_p.add(p)
            chosen.append((t, p))
    # The thread that starts the iteration (lowest ET id: the main thread) goes first and fixes
    # the time span; the others (autograd backward, ...) run inside it.
    chosen.sort(key=lambda tp: (int(host.node_id[a_by[tp[0]]].min()), tp[0]))
    # Ops already joined by id fix the iteration: align the rest inside their time span.
    span: tuple[int, int] | None = None
    if (node_event >= 0).any():
        done = node_event[node_event >= 0]
        span = (int(ev.ts_ns[done].min()), int(ev.end_ns[done].max()))
    out: list[ThreadPair] = []
    for t, p in chosen:
        a_nodes, b_events = a_by[t], b_by[p]
        if span is not None:
            inside = (ev.ts_ns[b_events] >= span[0]) & (ev.ts_ns[b_events] <= span[1])
            b_events = b_events[inside]
        elif b_events.size > _WINDOW_RATIO * a_nodes.size:
            s = best_window(et_sym[a_nodes], k_sym[b_events])
            b_events = b_events[s : s + a_nodes.size + a_nodes.size // 5 + 8]
        ia, ib = align(et_sym[a_nodes], k_sym[b_events])
        nodes, events = a_nodes[ia], b_events[ib]
        node_event[nodes] = events
        event_node[events] = nodes
        method[nodes] = _SEQUENCE
        if span is None and events.size:
            span = (int(ev.ts_ns[events].min()), int(ev.end_ns[events].max()))
        out.append(
            ThreadPair(
                et_tid=t,
                kineto_thread=kineto.processors.label[p],
                num_et_ops=int(a_nodes.size),
                num_linked=int(nodes.size),
            )
        )
    return out


def _gpu_nodes(kineto: KinetoTrace, hd: HostDevice, event_node: np.ndarray) -> np.ndarray:
    """ET node of each GPU activity: the nearest linked op around its launch."""
    enclosing = hd.enclosing_op_idx
    is_op = kineto.mask(*OP_CATEGORIES)
    nearest = np.full(len(kineto.events), -1, dtype=np.int64)
    # An op's enclosing op sits earlier in the same thread's rows, so one forward pass
    # resolves "nearest linked ancestor" for every op.
    near = nearest.tolist()
    enc = enclosing.tolist()
    linked = event_node.tolist()
    for i in np.flatnonzero(is_op).tolist():
        near[i] = linked[i] if linked[i] >= 0 else (near[enc[i]] if enc[i] >= 0 else -1)
    nearest = np.asarray(near, dtype=np.int64)
    gpu = kineto.mask(*GPU_ACTIVITY)
    out = np.full(len(kineto.events), -1, dtype=np.int64)
    has = gpu & (enclosing >= 0)
    out[has] = nearest[enclosing[has]]
    return out


def _report(
    host: HostTrace,
    kineto: KinetoTrace,
    et_ops: np.ndarray,
    node_event: np.ndarray,
    method: np.ndarray,
    event_node: np.ndarray,
    k_is_op: np.ndarray,
    hd: HostDevice,
    gpu_node: np.ndarray,
    id_join: str,
    pairs: list[ThreadPair],
) -> LinkReport:
    ev = kineto.events
    linked = node_event[et_ops] >= 0
    counts = np.bincount(method[et_ops], minlength=len(METHOD_NAMES))
    unmatched = et_ops[~linked]
    matched_events = node_event[et_ops[linked]]
    in_span = np.zeros(0, dtype=np.int64)
    if matched_events.size:
        t0, t1 = int(ev.ts_ns[matched_events].min()), int(ev.end_ns[matched_events].max())
        in_span = np.flatnonzero(k_is_op & (ev.ts_ns >= t0) & (ev.ts_ns <= t1))
    k_unmatched = in_span[event_node[in_span] < 0]
    gpu = kineto.mask(*GPU_ACTIVITY)
    return LinkReport(
        et_path=host.path,
        kineto_path=kineto.path,
        rank=kineto.meta.rank,
        num_et_ops=int(et_ops.size),
        num_linked=int(linked.sum()),
        method_counts={METHOD_NAMES[m]: int(counts[m]) for m in (1, 2, 3)},
        id_join=id_join,
        thread_pairs=tuple(pairs),
        unmatched_et=tuple((int(host.node_id[i]), host.name(int(i))) for i in unmatched),
        num_kineto_ops_in_span=int(in_span.size),
        unmatched_kineto=tuple((int(ev.ts_ns[i]), kineto.name_of(int(i))) for i in k_unmatched),
        num_gpu_activities=hd.num_gpu_activities,
        num_gpu_with_launch=hd.num_gpu_with_launch,
        num_gpu_with_op=hd.num_gpu_with_op,
        num_gpu_with_node=int((gpu & (gpu_node >= 0)).sum()),
    )
