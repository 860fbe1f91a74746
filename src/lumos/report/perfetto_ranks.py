"""The Perfetto trace of a multi-rank replay, written rank by rank: ranks that share structure
are formatted once, the others in parallel processes.

Byte for byte what :func:`lumos.report.perfetto.to_chrome_trace` gives (compact JSON, sorted
keys): per rank its predicted group's metadata and task events, then per rank its step / op
spans and launch arrows (:mod:`lumos.report.perfetto_structure`), then the critical path's
arrows (the recording and the critical-path tracks that follow are
:mod:`lumos.report.perfetto_measured`'s). A rank's task and structure events (its *chunk*)
depend on its graph's tables, its simulated times and its time shift, and on what differs
between ranks: the rank, its process id (``(rank + 1) * 1000``), the id of its first launch
arrow, and which of its tasks are on the critical path (the path runs through the whole job,
so copies of one rank differ in it). Ranks whose chunks depend on equal tables and times (a
digest of them is the *chunk key*: re-stamped builds of one trace, see
:mod:`lumos.shared_builds`, that the simulation timed alike) share one *template*: the chunk
formatted once with those left as placeholders (one per task on the path of any rank sharing
the template), split at them, and joined per rank with its own values.
Templates of distinct keys are formatted in worker processes (:mod:`lumos.parallel`), each with
vectorised columns (numpy, then one f-string per event; no dict per event).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from lumos.graph.model import AnnotationKind, DepKind, TaskKind
from lumos.parallel import default_workers, map_ranks
from lumos.report.perfetto_layout import RankTracks, track_tids
from lumos.report.perfetto_structure import us_list
from lumos.sim.result import SimResult

__all__ = ["rank_chunks"]

#: Placeholders while a template is formatted (JSON text never holds raw control characters):
#: the rank, its pid, launch arrow ``j`` of the rank, and whether task ``i`` is on the path.
_RANK, _PID, _FLOW, _PATH = "\x01", "\x02", "\x04{}\x05", "\x06{}\x07"
_FIELDS = re.compile("(\x01|\x02|\x04\\d+\x05|\x06\\d+\x07)")
_ON_PATH = '"critical_path":true,'

#: The replay whose chunks worker processes format (set before they fork; see ``_template``).
_RESULT: SimResult | None = None


def chunk_key(result: SimResult, gi: int, shift: int) -> bytes:
    """A digest of everything rank ``gi``'s chunk depends on but its rank, pids and flow ids."""
    g = result.graphs[gi]
    t, p, a, e = g.tasks, g.processors, g.annotations, g.edges
    lo, hi = result.annotation_spans(gi)
    h = hashlib.sha256(b"%d:" % shift)
    for col in (t.processor_idx, t.order, t.name_idx, t.kind, t.ts_ns, result.starts(gi),
                result.ends(gi), p.pid, p.tid, a.name_idx, a.kind, a.processor_idx,
                a.first_task_idx, a.last_task_idx, lo, hi, e.kind, e.src, e.dst):  # fmt: skip
        c = np.ascontiguousarray(col)
        h.update(b"%s%d;" % (c.dtype.str.encode(), c.size))
        h.update(c.data)
    h.update("\0".join(g.names).encode("utf-8", "surrogatepass"))
    return h.digest()


def _template(gi: int, shift: int, maybe_path: np.ndarray) -> tuple[list[str], list[str]]:
    """Rank ``gi``'s task events and structure events, each split into a list where literal
    text alternates with placeholders for its rank, its pid, its launch arrow ids and, for the
    tasks in ``maybe_path``, whether the task is on the critical path."""
    result = _RESULT
    assert result is not None
    g = result.graphs[gi]
    tids, _ = track_tids(g.processors)
    s, e = result.starts(gi).astype(np.int64), result.ends(gi).astype(np.int64)
    _, perm = g.processor_order()
    flag = np.full(g.num_tasks, "", dtype=object)
    flag[maybe_path] = [_PATH.format(i) for i in maybe_path.tolist()]
    tasks = _task_events(g, perm, tids, flag, s, e, shift)
    structure = _span_events(result, gi, perm, tids, s, e, shift) + _launch_events(
        g, tids, s, shift
    )
    return _FIELDS.split(",".join(tasks)), _FIELDS.split(",".join(structure))


def _fill(parts: list[str], fields: dict[str, str]) -> str:
    """A template's text with a rank's own numbers in place of its placeholders."""
    return "".join(map(fields.get, parts, parts))


def _task_events(
    g: Any, perm: np.ndarray, tids: np.ndarray, flag: np.ndarray, s: np.ndarray, e: np.ndarray,
    shift: int,
) -> list[str]:  # fmt: skip
    t = g.tasks
    kinds = [json.dumps(k.name.lower()) for k in TaskKind]
    names = [json.dumps(n) for n in g.names]
    pi = t.processor_idx[perm]
    ss, ee = s[perm], e[perm]
    return [
        f'{{"args":{{{cp}"rank":{_RANK},"recorded_ts_us":{rec!r},"task_idx":{ti}}},'
        f'"cat":{kinds[kind]},"dur":{dur!r},"name":{names[ni]},"ph":"X",'
        f'"pid":{_PID},"tid":{tid},"ts":{ts!r}}}'
        for ti, cp, ni, kind, tid, ts, dur, rec in zip(
            perm.tolist(), flag[perm].tolist(), t.name_idx[perm].tolist(), t.kind[perm].tolist(),
            tids[pi].tolist(), us_list(ss + shift), us_list(ee - ss), us_list(t.ts_ns[perm]), strict=True)
    ]  # fmt: skip


def _span_events(
    result: SimResult,
    gi: int,
    perm: np.ndarray,
    tids: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    shift: int,
) -> list[str]:
    """Step and parent-op spans, as :func:`lumos.report.perfetto_structure.structure_events`."""
    g = result.graphs[gi]
    a = g.annotations
    lo, hi = result.annotation_spans(gi)
    sel = np.flatnonzero((a.first_task_idx >= 0) & (a.kind != int(AnnotationKind.GPU_STEP)))
    if not sel.size:
        return []
    first, last = a.first_task_idx[sel].astype(np.int64), a.last_task_idx[sel].astype(np.int64)
    step = a.kind[sel] == int(AnnotationKind.STEP)
    start = np.where(step, lo[sel], s[first])
    end = np.where(step, hi[sel], e[last])
    n = g.num_tasks
    pos = np.empty(n, np.int64)
    pos[perm] = np.arange(n)
    proc_at = g.tasks.processor_idx[perm]
    k0, k1 = pos[first], pos[last]
    before = k0 > 0
    before[before] = proc_at[k0[before] - 1] == proc_at[k0[before]]
    start = np.where(before, np.maximum(start, e[perm[np.maximum(k0 - 1, 0)]]), start)
    after = k1 + 1 < n
    after[after] = proc_at[k1[after] + 1] == proc_at[k1[after]]
    end = np.where(after, np.minimum(end, s[perm[np.minimum(k1 + 1, n - 1)]]), end)
    q = a.processor_idx[sel]
    names = [json.dumps(x) for x in g.names]
    return [
        f'{{"args":{{"rank":{_RANK}}},"cat":{cat},"dur":{dur!r},"name":{names[ni]},"ph":"X",'
        f'"pid":{_PID},"tid":{tid},"ts":{ts!r}}}'
        for cat, ni, tid, ts, dur in zip(
            np.where(step, '"step"', '"op"').tolist(), a.name_idx[sel].tolist(),
            tids[q].tolist(), us_list(start + shift),
            us_list(np.maximum(end - start, 0)), strict=True)
    ]  # fmt: skip


def _launch_events(g: Any, tids: np.ndarray, s: np.ndarray, shift: int) -> list[str]:
    """An arrow per launch edge, from the runtime call to its GPU task (ids: ``{f[j]}``)."""
    launch = np.flatnonzero(g.edges.kind == int(DepKind.LAUNCH))
    src, dst = g.edges.src[launch], g.edges.dst[launch]
    proc = g.tasks.processor_idx
    out = []
    for j, (st, sts, dt, dts) in enumerate(zip(
            tids[proc[src]].tolist(), us_list(s[src] + shift),
            tids[proc[dst]].tolist(), us_list(s[dst] + shift), strict=True)):  # fmt: skip
        fid = _FLOW.format(j)
        out.append(f'{{"cat":"launch","id":{fid},"name":"launch","ph":"s","pid":{_PID},'
                   f'"tid":{st},"ts":{sts!r}}}')  # fmt: skip
        out.append(f'{{"bp":"e","cat":"launch","id":{fid},"name":"launch","ph":"f",'
                   f'"pid":{_PID},"tid":{dt},"ts":{dts!r}}}')  # fmt: skip
    return out


def _template_star(args: tuple[int, int, np.ndarray]) -> tuple[list[str], list[str]]:
    return _template(*args)


def rank_chunks(
    result: SimResult,
    tracks: Sequence[RankTracks],
    on_path: Sequence[np.ndarray],
    *,
    workers: int | None = None,
) -> Iterator[tuple[str, str]]:
    """Per rank in order: ``(task events, structure events)``, each comma-joined (maybe
    empty), with launch arrow ids numbered across ranks from 0. ``tracks[gi]``: the rank's
    pid and time shift (:mod:`lumos.report.perfetto_layout`); ``on_path[gi]``: the local
    indices of its tasks on the critical path."""
    global _RESULT
    graphs = result.graphs
    keys = [chunk_key(result, gi, tracks[gi].shift) for gi in range(len(graphs))]
    rep: dict[bytes, int] = {}
    parts: dict[bytes, list[np.ndarray]] = {}
    for gi, k in enumerate(keys):
        rep.setdefault(k, gi)
        parts.setdefault(k, []).append(np.asarray(on_path[gi], dtype=np.int64))
    maybe = {k: np.unique(np.concatenate(v)) for k, v in parts.items()}
    order = sorted(rep.values())
    _RESULT = result
    try:
        n = default_workers() if workers is None else workers
        # worker processes inherit the replay when they fork; elsewhere (or for one) in-process
        n = n if len(order) > 1 and _can_fork() else 1
        args = [(gi, tracks[gi].shift, maybe[keys[gi]]) for gi in order]
        made = map_ranks(_template_star, args, workers=n)
    finally:
        _RESULT = None
    templates = dict(zip(order, made, strict=True))
    flows = [_FLOW.format(j) for j in range(max((_launches(g) for g in graphs), default=0))]
    flow = 0
    for gi, g in enumerate(graphs):
        tasks, structure = templates[rep[keys[gi]]]
        n = _launches(g)
        fields = dict(zip(flows[:n], map(str, range(flow, flow + n)), strict=True))
        fields[_RANK] = str(g.rank)
        fields[_PID] = str(tracks[gi].pid)
        mine = set(on_path[gi].tolist())
        for i in maybe[keys[gi]].tolist():
            fields[_PATH.format(i)] = _ON_PATH if i in mine else ""
        flow += n
        yield _fill(tasks, fields), _fill(structure, fields)


def _launches(g: Any) -> int:
    return int((g.edges.kind == int(DepKind.LAUNCH)).sum())


def _can_fork() -> bool:
    import multiprocessing as mp

    return mp.get_start_method(allow_none=False) == "fork"
