# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The compiled replay loop (Cython, pure-Python mode: see ``setup.py``). Domain-light: tasks, processors, edges, waits, rendezvous.

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

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

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
# the same two as C constants for the loop (the names above are what Python code reads; an
# annotated module global, ``_X: cython.schar = 2``, would stay a Python dictionary look-up)
_LAUNCH = cython.declare(cython.schar, LAUNCH)
_SOFT_LAUNCH = cython.declare(cython.schar, SOFT_LAUNCH)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _less(
    ht: cython.longlong[::1], hk: cython.longlong[::1], i: cython.Py_ssize_t, j: cython.Py_ssize_t
) -> cython.bint:
    return ht[i] < ht[j] or (ht[i] == ht[j] and hk[i] < hk[j])


@cython.cfunc
@cython.exceptval(check=False)
def _push(
    ht: cython.longlong[::1],
    hk: cython.longlong[::1],
    size: cython.Py_ssize_t,
    t: cython.longlong,
    k: cython.longlong,
) -> cython.Py_ssize_t:
    i: cython.Py_ssize_t = size
    p: cython.Py_ssize_t
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


@cython.cfunc
@cython.exceptval(check=False)
def _pop(
    ht: cython.longlong[::1], hk: cython.longlong[::1], size: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    i: cython.Py_ssize_t = 0
    left: cython.Py_ssize_t
    c: cython.Py_ssize_t
    size -= 1
    ht[0] = ht[size]
    hk[0] = hk[size]
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


def run(
    dur: cython.const[cython.longlong][::1],
    proc: cython.const[cython.longlong][::1],
    order: cython.const[cython.longlong][::1],
    succ: cython.const[cython.longlong][::1],
    has_pred: cython.const[cython.schar][::1],
    out_ptr: cython.const[cython.longlong][::1],
    out_edge: cython.const[cython.longlong][::1],
    e_dst: cython.const[cython.longlong][::1],
    e_kind: cython.const[cython.schar][::1],
    e_delay: cython.const[cython.longlong][::1],
    in_count: cython.const[cython.longlong][::1],
    proc_ptr: cython.const[cython.longlong][::1],
    proc_task: cython.const[cython.longlong][::1],
    launched0: cython.const[cython.longlong][::1],
    flag0: cython.const[cython.schar][::1],
    wait_ptr: cython.const[cython.longlong][::1],
    w_kind: cython.const[cython.schar][::1],
    w_target: cython.const[cython.longlong][::1],
    w_dev: cython.const[cython.longlong][::1],
    w_record: cython.const[cython.longlong][::1],
    dev_ptr: cython.const[cython.longlong][::1],
    dev_stream: cython.const[cython.longlong][::1],
    rec_stream: cython.const[cython.longlong][::1],
    group_of: cython.const[cython.longlong][::1],
    grp_ptr: cython.const[cython.longlong][::1],
    grp_task: cython.const[cython.longlong][::1],
    grp_transfer: cython.const[cython.longlong][::1],
):
    """Replay the workload the arrays describe (see :mod:`lumos.sim.engine` for each one):
    ``(start, end, cause_kind, cause_ref, n_started, unrecorded event waits)``; a task that never
    starts keeps start and end -1."""
    n: cython.Py_ssize_t = dur.shape[0]
    start_a = np.full(n, -1, dtype=np.int64)
    end_a = np.full(n, -1, dtype=np.int64)
    cause_kind_a = np.zeros(n, dtype=np.int8)
    cause_ref_a = np.full(n, -1, dtype=np.int64)
    start: cython.longlong[::1] = start_a
    end: cython.longlong[::1] = end_a
    cause_kind: cython.schar[::1] = cause_kind_a
    cause_ref: cython.longlong[::1] = cause_ref_a
    ready: cython.longlong[::1] = np.zeros(n, dtype=np.int64)
    pending: cython.longlong[::1] = np.array(in_count, dtype=np.int64)
    phase: cython.schar[::1] = np.zeros(n, dtype=np.int8)
    blocked: cython.longlong[::1] = np.zeros(n, dtype=np.int64)
    captured: cython.longlong[::1] = np.full(n, -1, dtype=np.int64)
    launched: cython.longlong[::1] = np.array(launched0, dtype=np.int64)
    flag: cython.schar[::1] = np.array(flag0, dtype=np.int8)
    n_groups: cython.Py_ssize_t = grp_ptr.shape[0] - 1
    arrived: cython.longlong[::1] = np.zeros(n_groups, dtype=np.int64)
    latest_t: cython.longlong[::1] = np.full(n_groups, -1, dtype=np.int64)
    latest: cython.longlong[::1] = np.full(n_groups, -1, dtype=np.int64)
    n_nodes: cython.Py_ssize_t = 0
    k: cython.Py_ssize_t
    d: cython.longlong
    for k in range(w_kind.shape[0]):
        if w_kind[k] == 1:
            d = w_dev[k]
            n_nodes += dev_ptr[d + 1] - dev_ptr[d]
        else:
            n_nodes += 1
    wl_head: cython.longlong[::1] = np.full(n, -1, dtype=np.int64)
    node_task: cython.longlong[::1] = np.empty(n_nodes, dtype=np.int64)
    node_next: cython.longlong[::1] = np.empty(n_nodes, dtype=np.int64)
    used_nodes: cython.Py_ssize_t = 0
    unrecorded: cython.longlong = 0
    cap: cython.Py_ssize_t = 2 * n + 1
    ht: cython.longlong[::1] = np.empty(cap, dtype=np.int64)
    hk: cython.longlong[::1] = np.empty(cap, dtype=np.int64)
    size: cython.Py_ssize_t = 0
    t: cython.longlong
    for t in range(n):
        pending[t] += has_pred[t]
        if pending[t] == 0:
            size = _push(ht, hk, size, 0, t)
    n_started: cython.longlong = 0
    now: cython.longlong
    until: cython.longlong
    kind: cython.schar
    lo: cython.longlong
    hi: cython.longlong
    j: cython.longlong
    target: cython.longlong
    s: cython.longlong
    rec: cython.longlong
    g: cython.longlong
    members_lo: cython.longlong
    members_hi: cython.longlong
    first: cython.longlong
    mi: cython.longlong
    m: cython.longlong
    e_end: cython.longlong
    e: cython.longlong
    node: cython.longlong
    w: cython.longlong
    c: cython.longlong
    prio: cython.longlong
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
                if kind == 1:
                    lo = dev_ptr[w_dev[k]]
                    hi = dev_ptr[w_dev[k] + 1]
                else:
                    hi = 1
                for j in range(lo, hi):
                    target = -1
                    if kind == 0:
                        s = w_target[k]
                        if launched[s] >= 0:
                            target = proc_task[proc_ptr[s] + launched[s]]
                    elif kind == 1:
                        s = dev_stream[j]
                        if launched[s] >= 0:
                            target = proc_task[proc_ptr[s] + launched[s]]
                    else:
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
            for k in range(out_ptr[m], out_ptr[m + 1]):
                e = out_edge[k]
                if e_kind[e] == _LAUNCH or e_kind[e] == _SOFT_LAUNCH:
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
            for k in range(out_ptr[m], out_ptr[m + 1]):
                e = out_edge[k]
                if e_kind[e] == _SOFT_LAUNCH:
                    continue
                d = e_dst[e]
                c = e_end + e_delay[e]
                if c < now:
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
    return start_a, end_a, cause_kind_a, cause_ref_a, n_started, unrecorded
