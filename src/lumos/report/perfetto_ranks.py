"""The Perfetto trace of a multi-rank replay, written rank by rank: ranks that share structure
are formatted once, the others in parallel processes.

Byte for byte what :func:`lumos.report.perfetto.to_chrome_trace` gives (compact JSON, sorted
keys): per rank its track metadata and task events, then per rank its step / op spans and launch
arrows (:mod:`lumos.report.perfetto_structure`), then the critical path's arrows. A rank's task
and structure events (its *chunk*) depend on its graph's tables, its simulated times and its time
shift, and on three numbers that differ between ranks: the rank, its track pids
(``(rank + 1) * 1000 + k``) and the id of its first launch arrow. Ranks whose chunks depend on
equal tables and times (a digest of them is the *chunk key*: re-stamped builds of one trace, see
:mod:`lumos.shared_builds`, that the simulation timed alike) share one *template*: the chunk
formatted once with those three numbers left as placeholders, split at them, and joined per rank
with its own numbers.
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
from lumos.report.perfetto_structure import us_list
from lumos.sim.result import SimResult

__all__ = ["rank_chunks"]

#: Placeholders while a template is formatted (JSON text never holds raw control characters):
#: the rank, track pid ``k`` and launch arrow ``j`` of the rank.
_RANK, _PID, _FLOW = "\x01", "\x02{}\x03", "\x04{}\x05"
_FIELDS = re.compile("(\x01|\x02\\d+\x03|\x04\\d+\x05)")

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


def _template(gi: int, shift: int) -> tuple[list[str], list[str]]:
    """Rank ``gi``'s task events and structure events, each split into a list where literal
    text alternates with placeholders for its rank, its track pids and its launch arrow ids."""
    result = _RESULT
    assert result is not None
    g = result.graphs[gi]
    p = g.processors
    raw = list(dict.fromkeys(p.pid.tolist()))  # track k: the k-th distinct recorded pid
    pid = np.array([_PID.format(raw.index(v)) for v in p.pid.tolist()], dtype=object)
    s, e = result.starts(gi).astype(np.int64), result.ends(gi).astype(np.int64)
    _, perm = g.processor_order()
    tasks = _task_events(g, perm, pid, s, e, shift)
    structure = _span_events(result, gi, perm, pid, s, e, shift) + _launch_events(g, pid, s, shift)
    return _FIELDS.split(",".join(tasks)), _FIELDS.split(",".join(structure))


def _fill(parts: list[str], fields: dict[str, str]) -> str:
    """A template's text with a rank's own numbers in place of its placeholders."""
    return "".join(map(fields.get, parts, parts))


def _task_events(
    g: Any, perm: np.ndarray, pid: np.ndarray, s: np.ndarray, e: np.ndarray, shift: int
) -> list[str]:
    t, p = g.tasks, g.processors
    kinds = [json.dumps(k.name.lower()) for k in TaskKind]
    names = [json.dumps(n) for n in g.names]
    pi = t.processor_idx[perm]
    ss, ee = s[perm], e[perm]
    return [
        f'{{"args":{{"rank":{_RANK},"recorded_ts_us":{rec!r},"task_idx":{ti}}},'
        f'"cat":{kinds[kind]},"dur":{dur!r},"name":{names[ni]},"ph":"X",'
        f'"pid":{pp},"tid":{tid},"ts":{ts!r}}}'
        for ti, ni, kind, pp, tid, ts, dur, rec in zip(
            perm.tolist(), t.name_idx[perm].tolist(), t.kind[perm].tolist(), pid[pi].tolist(),
            p.tid[pi].tolist(), us_list(ss + shift), us_list(ee - ss), us_list(t.ts_ns[perm]), strict=True)
    ]  # fmt: skip


def _span_events(
    result: SimResult,
    gi: int,
    perm: np.ndarray,
    pid: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    shift: int,
) -> list[str]:
    """Step and parent-op spans, as :func:`lumos.report.perfetto_structure.structure_events`."""
    g = result.graphs[gi]
    a, p = g.annotations, g.processors
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
        f'"pid":{pp},"tid":{tid},"ts":{ts!r}}}'
        for cat, ni, pp, tid, ts, dur in zip(
            np.where(step, '"step"', '"op"').tolist(), a.name_idx[sel].tolist(),
            pid[q].tolist(), p.tid[q].tolist(), us_list(start + shift),
            us_list(np.maximum(end - start, 0)), strict=True)
    ]  # fmt: skip


def _launch_events(g: Any, pid: np.ndarray, s: np.ndarray, shift: int) -> list[str]:
    """An arrow per launch edge, from the runtime call to its GPU task (ids: ``{f[j]}``)."""
    launch = np.flatnonzero(g.edges.kind == int(DepKind.LAUNCH))
    src, dst = g.edges.src[launch], g.edges.dst[launch]
    proc = g.tasks.processor_idx
    tid = g.processors.tid
    out = []
    for j, (sp, st, sts, dp, dt, dts) in enumerate(zip(
            pid[proc[src]].tolist(), tid[proc[src]].tolist(), us_list(s[src] + shift),
            pid[proc[dst]].tolist(), tid[proc[dst]].tolist(), us_list(s[dst] + shift),
            strict=True)):  # fmt: skip
        fid = _FLOW.format(j)
        out.append(f'{{"cat":"launch","id":{fid},"name":"launch","ph":"s","pid":{sp},'
                   f'"tid":{st},"ts":{sts!r}}}')  # fmt: skip
        out.append(f'{{"bp":"e","cat":"launch","id":{fid},"name":"launch","ph":"f","pid":{dp},'
                   f'"tid":{dt},"ts":{dts!r}}}')  # fmt: skip
    return out


def _template_star(args: tuple[int, int]) -> tuple[list[str], list[str]]:
    return _template(*args)


def rank_chunks(
    result: SimResult,
    shifts: Sequence[int],
    track_pids: Sequence[Sequence[int]],
    *,
    workers: int | None = None,
) -> Iterator[tuple[str, str]]:
    """Per rank in order: ``(task events, structure events)``, each comma-joined (maybe
    empty), with launch arrow ids numbered across ranks from 0. ``shifts[gi]`` is the rank's
    time shift and ``track_pids[gi]`` its track pids in order of first appearance (as
    :mod:`lumos.report.perfetto` numbers them)."""
    global _RESULT
    graphs = result.graphs
    keys = [chunk_key(result, gi, shifts[gi]) for gi in range(len(graphs))]
    rep: dict[bytes, int] = {}
    for gi, k in enumerate(keys):
        rep.setdefault(k, gi)
    order = sorted(rep.values())
    _RESULT = result
    try:
        n = default_workers() if workers is None else workers
        # worker processes inherit the replay when they fork; elsewhere (or for one) in-process
        n = n if len(order) > 1 and _can_fork() else 1
        made = map_ranks(_template_star, [(gi, shifts[gi]) for gi in order], workers=n)
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
        for track, v in enumerate(track_pids[gi]):
            fields[_PID.format(track)] = str(v)
        flow += n
        yield _fill(tasks, fields), _fill(structure, fields)


def _launches(g: Any) -> int:
    return int((g.edges.kind == int(DepKind.LAUNCH)).sum())


def _can_fork() -> bool:
    import multiprocessing as mp

    return mp.get_start_method(allow_none=False) == "fork"
