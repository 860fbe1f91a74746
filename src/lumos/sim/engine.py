"""``simulate``: replay an execution graph (or a multi-rank workload) and predict when each task runs.

Semantics (Lumos Algorithm 1, in global time order; see :mod:`lumos.sim._kernel` for the loop):

* one task at a time per processor, in processor order; a task starts when its processor is
  free and every in-edge source has ended (plus the edge delay);
* runtime :class:`~lumos.graph.model.Waits` are resolved when the blocking CPU task is reached:
  a stream synchronize waits for the last GPU task launched on that stream so far (a GPU task is
  "launched" when the source of its LAUNCH edge starts; one without a launch edge counts as
  launched at time 0), a device synchronize for every stream of its device, an event
  synchronize for the task its event record captured (nothing if the record has not run:
  CUDA returns at once for an unrecorded event; counted as ``event_wait_before_record``);
* matched collectives (:meth:`Workload.collective_groups`) start together when their last
  participant arrives and end ``transfer_ns`` later (from the cost model);
* times start at 0 at the beginning of the replay; recorded ``ts_ns`` are never read.

The result is deterministic: ties are broken by ``(time, priority, task index)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.errors import SimulationError
from lumos.graph.algorithms import processor_successor
from lumos.graph.model import (
    GPU_TASK_KINDS,
    DepKind,
    ExecGraph,
    ProcessorKind,
    WaitKind,
    Workload,
)
from lumos.sim import _kernel
from lumos.sim.cost import CostModel, TracedCost
from lumos.sim.result import SimResult

__all__ = ["simulate"]

_I64 = np.int64
#: The dtype of each array :func:`lumos.sim._kernel.run` takes, in order.
_RUN_DTYPES = (_I64,) * 4 + (np.int8,) + (_I64,) * 3 + (np.int8,) + (_I64,) * 5 + (np.int8, _I64,
               np.int8) + (_I64,) * 10  # fmt: skip


def _cat(parts: Sequence[NDArray[Any]], dtype: type = np.int64) -> NDArray[Any]:
    if len(parts) == 1:
        return np.ascontiguousarray(parts[0], dtype=dtype)
    return (
        np.concatenate([np.asarray(p, dtype=dtype) for p in parts]) if parts else np.zeros(0, dtype)
    )


def simulate(
    graph_or_workload: ExecGraph | Workload,
    cost_model: CostModel | None = None,
    *,
    launch_paces: bool = True,
) -> SimResult:
    """Replay ``graph_or_workload`` with ``cost_model`` (default :class:`TracedCost`).

    ``launch_paces=False`` is the "GPU not paced by the CPU" ablation: a GPU task no longer waits
    for its launch, yet a synchronization still waits only for work launched before it.

    Raises :class:`~lumos.errors.SimulationError` when some tasks can never start (a deadlock:
    e.g. a synchronize waiting on work launched only after it, or a collective one rank never
    joins), naming a few of the stuck tasks. Run :meth:`ExecGraph.validate` first for clearer
    messages about malformed graphs.
    """
    run = _Run(Workload.of(graph_or_workload), cost_model, launch_paces)
    if run.n_started < len(run.start):
        raise SimulationError(
            _deadlock_message(run.workload, run.t_off, run.start, run.group_of, run.wait_ptr)
        )
    return SimResult(
        workload=run.workload,
        start_ns=run.start,
        end_ns=run.end,
        task_offsets=run.t_off,
        cause_kind=run.cause_kind,
        cause_ref=run.cause_ref,
        edge_offsets=run.e_off,
        diagnostics=run.diags,
    )


def stuck_tasks(graph_or_workload: ExecGraph | Workload) -> NDArray[np.int64]:
    """The tasks a replay with traced durations can never start (empty when it finishes), as
    indices into the workload's concatenated task space (a graph's own indices for one graph)."""
    run = _Run(Workload.of(graph_or_workload), None, True)
    return np.flatnonzero(run.start < 0).astype(_I64)


class _Run:
    """One run of the replay loop and what it left (see :func:`simulate`)."""

    def __init__(
        self, workload: Workload, cost_model: CostModel | None, launch_paces: bool
    ) -> None:
        self.workload = workload
        cost = TracedCost() if cost_model is None else cost_model
        graphs = workload.graphs
        diags = Diagnostics()

        durations = tuple(np.asarray(cost.durations(g), dtype=_I64) for g in graphs)
        for g, d in zip(graphs, durations, strict=True):
            if d.shape != (g.num_tasks,):
                raise SimulationError(
                    f"cost model returned {d.shape} durations for rank {g.rank}, expected {g.num_tasks}"
                )
            if d.size and d.min() < 0:
                raise SimulationError(f"cost model returned a negative duration for rank {g.rank}")

        t_off = np.zeros(len(graphs) + 1, dtype=_I64)
        np.cumsum([g.num_tasks for g in graphs], out=t_off[1:])
        p_off = np.zeros(len(graphs) + 1, dtype=_I64)
        np.cumsum([len(g.processors) for g in graphs], out=p_off[1:])
        e_off = np.zeros(len(graphs) + 1, dtype=_I64)
        np.cumsum([g.num_edges for g in graphs], out=e_off[1:])
        n = int(t_off[-1])

        dur = np.array(_cat(list(durations)), dtype=_I64, copy=True)
        proc = _cat([g.tasks.processor_idx.astype(_I64) + p_off[i] for i, g in enumerate(graphs)])
        order = _cat([g.tasks.order for g in graphs])
        succ_parts, pred_parts, pptr_parts, ptask_parts = [], [], [], []
        for i, g in enumerate(graphs):
            s = processor_successor(g)
            has_pred = np.zeros(g.num_tasks, dtype=np.int8)
            has_pred[s[s >= 0]] = 1
            succ_parts.append(np.where(s >= 0, s + t_off[i], -1))
            pred_parts.append(has_pred)
            ptr, perm = g.processor_order()
            pptr_parts.append(ptr[:-1] + t_off[i])
            ptask_parts.append(perm + t_off[i])
        succ = _cat(succ_parts)
        has_pred = _cat(pred_parts, np.int8)
        proc_ptr = np.append(_cat(pptr_parts), n).astype(_I64)
        proc_task = _cat(ptask_parts)

        src = _cat([g.edges.src.astype(_I64) + t_off[i] for i, g in enumerate(graphs)])
        e_dst = _cat([g.edges.dst.astype(_I64) + t_off[i] for i, g in enumerate(graphs)])
        e_kind = _cat([g.edges.kind for g in graphs], np.int8)
        if not launch_paces:
            e_kind = np.where(e_kind == DepKind.LAUNCH, _kernel.SOFT_LAUNCH, e_kind).astype(np.int8)
        e_delay = _cat([g.edges.delay_ns for g in graphs])
        if len(graphs) == 1:
            out_ptr, out_edge = graphs[0].csr_out()
            out_ptr, out_edge = np.asarray(out_ptr, _I64), np.asarray(out_edge, _I64)
        else:
            out_edge = np.argsort(src, kind="stable").astype(_I64)
            out_ptr = np.zeros(n + 1, dtype=_I64)
            np.cumsum(np.bincount(src, minlength=n)[:n], out=out_ptr[1:])
        hard = e_dst[e_kind != _kernel.SOFT_LAUNCH]
        in_count = (
            np.bincount(hard, minlength=n).astype(_I64)[:n] if len(hard) else np.zeros(n, _I64)
        )

        # launched-so-far per stream: tasks with no launch edge count as launched at time 0
        is_gpu = np.isin(
            _cat([g.tasks.kind for g in graphs], np.int8),
            np.array(GPU_TASK_KINDS, np.int8),
        )
        launched_dst = np.zeros(n, dtype=bool)
        launched_dst[e_dst[(e_kind == DepKind.LAUNCH) | (e_kind == _kernel.SOFT_LAUNCH)]] = True
        # "launched so far" is the contiguous prefix of a stream's order whose tasks have all been
        # launched: a sync never waits on a task queued behind work that is not submitted yet
        # (with fixed stream order, waiting on it could deadlock when timing differs from the trace)
        flag0 = (~is_gpu | ~launched_dst).astype(np.int8)
        zeros = np.flatnonzero(flag0[proc_task] == 0)  # positions (processor order) not submitted
        first_zero = proc_ptr[1:].copy()  # default: the whole processor is submitted
        if len(zeros):
            k = np.searchsorted(zeros, proc_ptr[:-1])
            inside = k < len(zeros)
            cand = zeros[np.minimum(k, len(zeros) - 1)]
            inside &= cand < proc_ptr[1:]
            first_zero[inside] = cand[inside]
        launched0 = (first_zero - proc_ptr[:-1] - 1).astype(_I64)

        # devices: (graph, device id) -> global device, with their streams
        dev_keys: dict[tuple[int, int], int] = {}
        dev_members: list[list[int]] = []
        for i, g in enumerate(graphs):
            pk = g.processors
            for p in np.flatnonzero(pk.kind == ProcessorKind.STREAM).tolist():
                key = (i, int(pk.device[p]))
                if key not in dev_keys:
                    dev_keys[key] = len(dev_members)
                    dev_members.append([])
                dev_members[dev_keys[key]].append(p + int(p_off[i]))

        w_task, w_kind, w_target, w_dev, w_record = [], [], [], [], []
        rec_stream = np.full(n, -1, dtype=_I64)
        for i, g in enumerate(graphs):
            w = g.waits
            if not len(w):
                continue
            w_task.append(w.task_idx.astype(_I64) + t_off[i])
            w_kind.append(w.kind)
            w_target.append(
                np.where(w.target_processor_idx >= 0, w.target_processor_idx + p_off[i], -1)
            )
            devs = []
            for d in w.device.tolist():
                key = (i, d)
                if key not in dev_keys:
                    dev_keys[key] = len(dev_members)
                    dev_members.append([])
                devs.append(dev_keys[key])
            w_dev.append(np.array(devs, dtype=_I64))
            rec = np.where(w.record_task_idx >= 0, w.record_task_idx + t_off[i], -1)
            w_record.append(rec)
            ev = (w.kind == WaitKind.EVENT) & (rec >= 0)
            rec_stream[rec[ev]] = w_target[-1][ev]
        wt = _cat(w_task)
        perm = np.argsort(wt, kind="stable")
        wk = _cat(w_kind, np.int8)[perm]
        wtg, wdv, wrc = _cat(w_target)[perm], _cat(w_dev)[perm], _cat(w_record)[perm]
        wait_ptr = np.zeros(n + 1, dtype=_I64)
        if len(wt):
            np.cumsum(np.bincount(wt, minlength=n)[:n], out=wait_ptr[1:])
        dev_ptr = np.zeros(len(dev_members) + 1, dtype=_I64)
        np.cumsum([len(m) for m in dev_members], out=dev_ptr[1:])
        dev_stream = np.array([s for m in dev_members for s in m], dtype=_I64)

        # collectives: rendezvous for groups of >= 2 traced participants
        groups = workload.collective_groups()
        diags.merge(workload.diagnostics)
        diags.merge(groups.diagnostics)
        transfer = np.asarray(cost.transfer_ns(workload, groups, durations), dtype=_I64)
        sizes = groups.sizes()
        member_group = np.repeat(np.arange(groups.num_groups, dtype=_I64), sizes)
        if transfer.shape == (groups.num_groups,):
            transfer = transfer[member_group]  # one time for the group: every member ends together
        elif transfer.shape != (len(groups.member_task),):
            raise SimulationError(
                f"cost model returned {transfer.shape} transfer times for {groups.num_groups} "
                f"collectives with {len(groups.member_task)} participants"
            )
        member_global = t_off[groups.member_graph] + groups.member_task.astype(_I64)
        dur[member_global] = transfer
        multi = sizes >= 2
        keep_member = multi[member_group]
        grp_task = member_global[keep_member]
        grp_sizes = sizes[multi]
        grp_ptr = np.zeros(len(grp_sizes) + 1, dtype=_I64)
        np.cumsum(grp_sizes, out=grp_ptr[1:])
        group_of = np.full(n, -1, dtype=_I64)
        group_of[grp_task] = np.repeat(np.arange(len(grp_sizes), dtype=_I64), grp_sizes)

        arrays = (
            dur, proc, order, succ, has_pred, out_ptr, out_edge, e_dst, e_kind, e_delay,
            in_count, proc_ptr, proc_task, launched0, flag0, wait_ptr, wk, wtg, wdv, wrc,
            dev_ptr, dev_stream, rec_stream, group_of, grp_ptr, grp_task, transfer[keep_member],
        )  # fmt: skip
        start, end, cause_kind, cause_ref, n_started, unrecorded = _kernel.run(
            *(np.ascontiguousarray(a, dtype=t) for a, t in zip(arrays, _RUN_DTYPES, strict=True))
        )
        if unrecorded:
            diags.warn("event_wait_before_record", "", int(unrecorded))
        self.start, self.end, self.n_started = start, end, int(n_started)
        self.cause_kind, self.cause_ref = cause_kind, cause_ref
        self.t_off, self.e_off, self.diags = t_off, e_off, diags
        self.group_of, self.wait_ptr = group_of, wait_ptr


def _deadlock_message(
    workload: Workload,
    t_off: NDArray[np.int64],
    start: NDArray[np.int64],
    group_of: NDArray[np.int64],
    wait_ptr: NDArray[np.int64],
) -> str:
    stuck = np.flatnonzero(start < 0)
    # most informative first: tasks blocked on a wait or a collective rather than on a predecessor
    special = stuck[(group_of[stuck] >= 0) | (wait_ptr[stuck + 1] > wait_ptr[stuck])]
    shown = (special if len(special) else stuck)[:3]
    parts = []
    for gt in shown.tolist():
        gi = int(np.searchsorted(t_off, gt, side="right") - 1)
        g = workload.graphs[gi]
        why = (
            "collective peers never arrived"
            if group_of[gt] >= 0
            else "runtime wait never satisfied"
            if wait_ptr[gt + 1] > wait_ptr[gt]
            else "predecessor never ran"
        )
        parts.append(f"rank {g.rank} {g.describe_task(gt - int(t_off[gi]))}: {why}")
    text = f"deadlock: {len(stuck)} of {len(start)} tasks can never start; " + "; ".join(parts)
    from lumos.chakra.mapping_foreign import FOREIGN_ORDER
    from lumos.graph.build_tasks import GLOO_LEFT_OUT

    foreign = [g.rank for g in workload.graphs if g.diagnostics.count(FOREIGN_ORDER)]
    if foreign and any(group_of[gt] >= 0 for gt in shown.tolist()):
        text += (
            ". The Chakra ETs of rank(s) "
            f"{', '.join(map(str, foreign[:8]))}{'...' if len(foreign) > 8 else ''} were not "
            "written by lumos: their communication runs one node at a time in file order, and "
            "sends and receives that ASTRA-sim issues without waiting wait for each other here; "
            "replay them with --chakra-only (ASTRA-sim's semantics)"
        )
    left_out = [g.rank for g in workload.graphs if g.diagnostics.count(GLOO_LEFT_OUT)]
    if left_out:
        text += (
            f". Rank(s) {', '.join(map(str, left_out))} left gloo spans out of the graph "
            f"({GLOO_LEFT_OUT}; lumos -v names the first): their peers wait for them forever"
        )
    return text
