"""The compiled replay loop (numba). Domain-light: tasks, processors, edges, waits, rendezvous.

Everything is a flat int64/int8 array over the *global* task space of a workload (graphs
concatenated). :mod:`lumos.sim.engine` prepares the arrays and interprets the result; this module
only runs Algorithm 1 of Lumos in global time order:

* a task becomes *ready* when its processor predecessor and every in-edge source have ended
  (``ready = max(end(src) + delay)``) and is pushed on a heap keyed ``(time, prio, task)``;
* popping a task with runtime waits resolves them at that instant (which GPU tasks were
  launched so far) and re-queues it at the latest end of its targets (prio 1, so that launches
  at the same instant count as "before");
* popping a collective participant records its arrival; when the last participant arrives all
  of them start together and end ``transfer`` later;
* otherwise the task starts at the popped time, ends ``dur`` later, records its launches and
  event captures, wakes blocked waiters and releases its successors.

Because every push is at a time >= the popped time, tasks start in global time order, which is
what makes "launched before the sync started" well defined.
"""

from __future__ import annotations

import numba
import numpy as np

from lumos._jit import Kernel, array

# cause kinds: why a task started when it did (for the critical path)
CAUSE_NONE = 0  # started at time 0, nothing to wait for
CAUSE_EDGE = 1  # cause_ref = edge index (global)
CAUSE_PROCESSOR = 2  # processor predecessor
CAUSE_WAIT = 3  # runtime wait target (cause_ref = target task)
CAUSE_COLLECTIVE = 4  # last-arriving participant of its collective (cause_ref = that task)

LAUNCH = 2  # DepKind.LAUNCH
#: A LAUNCH edge that only records submission (``simulate(..., launch_paces=False)``): the GPU
#: task does not wait for it, but synchronizations still wait only for work submitted so far.
SOFT_LAUNCH = 102


@numba.njit(cache=True, nogil=True, inline="always")
def _less(ht, hk, i, j):  # pragma: no cover - compiled
    return ht[i] < ht[j] or (ht[i] == ht[j] and hk[i] < hk[j])


@numba.njit(cache=True, nogil=True)
def _push(ht, hk, size, t, k):  # pragma: no cover - compiled
    i = size
    ht[i] = t
    hk[i] = k
    while i > 0:
        p = (i - 1) >> 1
        if _less(ht, hk, i, p):
            ht[i], ht[p] = ht[p], ht[i]
            hk[i], hk[p] = hk[p], hk[i]
            i = p
        else:
            break
    return size + 1


@numba.njit(cache=True, nogil=True)
def _pop(ht, hk, size):  # pragma: no cover - compiled
    size -= 1
    ht[0] = ht[size]
    hk[0] = hk[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        c = left
        if left + 1 < size and _less(ht, hk, left + 1, left):
            c = left + 1
        if _less(ht, hk, c, i):
            ht[i], ht[c] = ht[c], ht[i]
            hk[i], hk[c] = hk[c], hk[i]
            i = c
        else:
            break
    return size


@numba.njit(cache=True, nogil=True)
def _run(  # pragma: no cover - compiled
    dur,  # int64[n]
    proc,  # int64[n] global processor
    order,  # int64[n]
    succ,  # int64[n] next task on the processor or -1
    has_pred,  # int8[n] 1 if a processor predecessor exists
    out_ptr,  # int64[n+1] CSR by src
    out_edge,  # int64[E]
    e_dst,  # int64[E]
    e_kind,  # int8[E]
    e_delay,  # int64[E]
    in_count,  # int64[n] number of in-edges
    proc_ptr,  # int64[P+1] processor order CSR
    proc_task,  # int64[n]
    launched0,  # int64[P] initial launched prefix per stream (-1)
    flag0,  # int8[n] 1 for tasks submitted from the start (no launch edge, or not GPU work)
    wait_ptr,  # int64[n+1] CSR of waits by blocking task
    w_kind,  # int8[W]
    w_target,  # int64[W] stream (STREAM / EVENT) or -1
    w_dev,  # int64[W] global device (DEVICE) or -1
    w_record,  # int64[W] record task (EVENT) or -1
    dev_ptr,  # int64[D+1] streams per global device
    dev_stream,  # int64[...]
    rec_stream,  # int64[n] stream captured when this task starts (event record) or -1
    group_of,  # int64[n] rendezvous group or -1
    grp_ptr,  # int64[G+1]
    grp_task,  # int64[...]
    grp_transfer,  # int64[len(grp_task)] per member: how long after the rendezvous it ends
):
    n = len(dur)
    n_proc = len(proc_ptr) - 1
    start = np.full(n, -1, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    ready = np.zeros(n, dtype=np.int64)
    pending = in_count.copy()
    cause_kind = np.zeros(n, dtype=np.int8)
    cause_ref = np.full(n, -1, dtype=np.int64)
    phase = np.zeros(n, dtype=np.int8)
    blocked = np.zeros(n, dtype=np.int64)
    captured = np.full(n, -1, dtype=np.int64)
    launched = launched0.copy()
    flag = flag0.copy()
    n_groups = len(grp_ptr) - 1
    arrived = np.zeros(n_groups, dtype=np.int64)
    latest_t = np.full(n_groups, -1, dtype=np.int64)
    latest = np.full(n_groups, -1, dtype=np.int64)
    # blocked waiters: singly linked lists of nodes per target task
    n_nodes = 0
    for k in range(len(w_kind)):
        if w_kind[k] == 1:
            d = w_dev[k]
            n_nodes += dev_ptr[d + 1] - dev_ptr[d]
        else:
            n_nodes += 1
    wl_head = np.full(n, -1, dtype=np.int64)
    node_task = np.empty(n_nodes, dtype=np.int64)
    node_next = np.empty(n_nodes, dtype=np.int64)
    used_nodes = 0
    unrecorded = 0

    cap = 2 * n + 1
    ht = np.empty(cap, dtype=np.int64)
    hk = np.empty(cap, dtype=np.int64)
    size = 0
    for t in range(n):
        pending[t] += has_pred[t]
        if pending[t] == 0:
            size = _push(ht, hk, size, 0, t)

    n_started = 0
    while size > 0:
        now = ht[0]
        t = hk[0] % n if n > 0 else 0
        size = _pop(ht, hk, size)
        if start[t] >= 0:
            continue
        if phase[t] == 0 and wait_ptr[t + 1] > wait_ptr[t]:
            phase[t] = 1
            until = now
            for k in range(wait_ptr[t], wait_ptr[t + 1]):
                kind = w_kind[k]
                lo = 0
                hi = 0
                if kind == 1:  # device
                    lo = dev_ptr[w_dev[k]]
                    hi = dev_ptr[w_dev[k] + 1]
                else:
                    hi = 1
                for j in range(lo, hi):
                    target = -1
                    if kind == 0:  # stream
                        s = w_target[k]
                        if launched[s] >= 0:
                            target = proc_task[proc_ptr[s] + launched[s]]
                    elif kind == 1:
                        s = dev_stream[j]
                        if launched[s] >= 0:
                            target = proc_task[proc_ptr[s] + launched[s]]
                    else:  # event
                        rec = w_record[k]
                        if start[rec] >= 0:
                            target = captured[rec]
                        else:
                            unrecorded += 1
                    if target < 0:
                        continue
                    if end[target] >= 0:
                        if end[target] > until:
                            until = end[target]
                            cause_kind[t] = 3
                            cause_ref[t] = target
                    else:
                        blocked[t] += 1
                        node_task[used_nodes] = t
                        node_next[used_nodes] = wl_head[target]
                        wl_head[target] = used_nodes
                        used_nodes += 1
            ready[t] = until
            if blocked[t] > 0:
                continue
            if until > now:
                size = _push(ht, hk, size, until, n + t)
                continue
        g = group_of[t]
        if g >= 0:
            arrived[g] += 1
            if now > latest_t[g] or latest[g] < 0:
                latest_t[g] = now
                latest[g] = t
            if arrived[g] < grp_ptr[g + 1] - grp_ptr[g]:
                continue
            members_lo = grp_ptr[g]
            members_hi = grp_ptr[g + 1]
            first = members_lo
        else:
            members_lo = 0
            members_hi = 1
            first = -1
        for mi in range(members_lo, members_hi):
            m = t
            e_end = now + dur[t]
            if first >= 0:
                m = grp_task[mi]
                e_end = now + grp_transfer[mi]
                if m != latest[g]:
                    cause_kind[m] = 4
                    cause_ref[m] = latest[g]
            start[m] = now
            end[m] = e_end
            n_started += 1
            # launches made by m, then event capture
            for k in range(out_ptr[m], out_ptr[m + 1]):
                e = out_edge[k]
                if e_kind[e] == LAUNCH or e_kind[e] == SOFT_LAUNCH:
                    d = e_dst[e]
                    s = proc[d]
                    flag[d] = 1
                    lo = proc_ptr[s]
                    hi = proc_ptr[s + 1]
                    while lo + launched[s] + 1 < hi and flag[proc_task[lo + launched[s] + 1]] == 1:
                        launched[s] += 1
            if rec_stream[m] >= 0:
                s = rec_stream[m]
                if launched[s] >= 0:
                    captured[m] = proc_task[proc_ptr[s] + launched[s]]
            # wake waiters blocked on m
            node = wl_head[m]
            while node >= 0:
                w = node_task[node]
                if e_end > ready[w]:
                    ready[w] = e_end
                    cause_kind[w] = 3
                    cause_ref[w] = m
                blocked[w] -= 1
                if blocked[w] == 0:
                    size = _push(ht, hk, size, ready[w], n + w)
                node = node_next[node]
            # release successors
            for k in range(out_ptr[m], out_ptr[m + 1]):
                e = out_edge[k]
                if e_kind[e] == SOFT_LAUNCH:
                    continue
                d = e_dst[e]
                c = e_end + e_delay[e]
                if c < now:  # a negative delay never lets dst start before src starts
                    c = now
                if c > ready[d] or (c == ready[d] and cause_kind[d] == 0):
                    ready[d] = c
                    cause_kind[d] = 1
                    cause_ref[d] = e
                pending[d] -= 1
                if pending[d] == 0:
                    prio = n if wait_ptr[d + 1] > wait_ptr[d] else 0
                    size = _push(ht, hk, size, ready[d], prio + d)
            s = succ[m]
            if s >= 0:
                if e_end > ready[s] or (e_end == ready[s] and cause_kind[s] == 0):
                    ready[s] = e_end
                    cause_kind[s] = 2
                    cause_ref[s] = m
                pending[s] -= 1
                if pending[s] == 0:
                    prio = n if wait_ptr[s + 1] > wait_ptr[s] else 0
                    size = _push(ht, hk, size, ready[s], prio + s)
    _ = n_proc
    return start, end, cause_kind, cause_ref, n_started, unrecorded


_I, _B = array(np.int64), array(np.int8)
#: The replay loop; ``run(*arrays, work=n_tasks)`` (see :class:`lumos._jit.Kernel`). While the
#: compiled loop is not cached yet, up to 150k tasks in all replay interpreted (about 1 s).
run = Kernel(
    _run,
    (_I, _I, _I, _I, _B, _I, _I, _I, _B, _I, _I, _I, _I, _I, _B, _I, _B) + (_I,) * 10,
    max_interpreted=150_000,
)
