"""Host-side collective calls of a Kineto trace, in both dialects.

NCCL (and RCCL) runs record a ``c10d::<op>`` op enclosing ``record_param_comms`` (whose args
carry "Collective name", "In/Out msg nelems", "dtype", "Group size", the process group) enclosing
an ``nccl:<op>`` annotation. Older traces have ``record_param_comms`` without metadata and take
sizes from ``nccl:<op>``'s "Input Dims". CPU runs with gloo have a short ``c10d::<op>`` on the
calling thread and a ``gloo:<op>`` span on a gloo worker thread (which includes waiting for
peers); sizes come from "Input Dims" x "Input type", p2p peer and tag from "Concrete Inputs".

One row per collective *call*: nested candidates on one thread fold into their outermost one;
a gloo worker span is joined to the n-th call of the same kind (``work_event_idx``), and worker
spans whose call is outside the trace become rows of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lumos.ingest.comm_names import dtype_size_bytes, normalize_collective
from lumos.ingest.kineto_schema import Category, EventMeta

if TYPE_CHECKING:
    from lumos.ingest.kineto import Events
    from lumos.ingest.kineto_meta import TraceMeta

__all__ = ["Collectives", "build_collectives"]

_PREFIXES = ("record_param_comms", "c10d::", "nccl:", "gloo:", "rccl:")
_HOST_CATS = (int(Category.CPU_OP), int(Category.USER_ANNOTATION))


@dataclass(frozen=True, eq=False)
class Collectives:
    """One row per host-side collective call (see the module docstring).

    ``size_bytes`` is the larger of the input and output message (the payload a cost model
    moves); ``in_bytes``/``out_bytes`` are -1 when unknown. ``seq_id``, ``peer_rank``, ``tag``
    and ``group_size`` are -1 when the trace does not say.
    """

    event_idx: np.ndarray
    work_event_idx: np.ndarray
    kind: tuple[str, ...]
    dialect: tuple[str, ...]
    size_bytes: np.ndarray
    in_bytes: np.ndarray
    out_bytes: np.ndarray
    dtype: tuple[str, ...]
    group_size: np.ndarray
    pg_name: tuple[str, ...]
    pg_desc: tuple[str, ...]
    pg_ranks: tuple[tuple[int, ...], ...]
    seq_id: np.ndarray
    peer_rank: np.ndarray
    tag: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    def counts_by_kind(self) -> dict[str, int]:
        """How many calls of each kind, sorted by kind."""
        out: dict[str, int] = {}
        for k in self.kind:
            out[k] = out.get(k, 0) + 1
        return dict(sorted(out.items()))


class _Row:
    __slots__ = (
        "dialect",
        "dtype",
        "event_idx",
        "group_size",
        "in_bytes",
        "kind",
        "out_bytes",
        "peer",
        "pg_desc",
        "pg_name",
        "pg_ranks",
        "seq",
        "tag",
        "work_idx",
    )

    def __init__(self, event_idx: int) -> None:
        self.event_idx = event_idx
        self.work_idx = -1
        self.kind = "unknown"
        self.dialect = ""
        self.dtype = ""
        self.in_bytes = -1
        self.out_bytes = -1
        self.group_size = -1
        self.pg_name = ""
        self.pg_desc = ""
        self.pg_ranks: tuple[int, ...] = ()
        self.seq = -1
        self.peer = -1
        self.tag = -1


def _as_int(v: Any) -> int:
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return -1


def _ranks(v: Any) -> tuple[int, ...]:
    if isinstance(v, str):
        try:
            v = msgspec.json.decode(v.encode())
        except msgspec.DecodeError:
            return ()
    if isinstance(v, list):
        return tuple(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    return ()


def _numel(dims: Any) -> int:
    """Elements of the first tensor (or tensor list) in an "Input Dims" value."""
    if not isinstance(dims, list) or not dims:
        return -1
    first = dims[0]
    if isinstance(first, list) and first and all(isinstance(d, list) for d in first):
        return sum(max(_numel([t]), 0) for t in first)
    if isinstance(first, list) and all(isinstance(d, int) for d in first):
        n = 1
        for d in first:
            n *= d
        return n
    return -1


def _first_type(types: Any) -> str:
    if isinstance(types, list) and types and isinstance(types[0], str):
        return types[0]
    return ""


def _absorb(row: _Row, name: str, a: EventMeta) -> None:
    """Fold the metadata of one event into a row; earlier (outer) facts win."""
    base = name.split("#", 1)[0]
    if base.startswith("gloo:"):
        row.dialect = "gloo"
    elif base.startswith(("nccl:", "rccl:")) or base == "record_param_comms":
        row.dialect = row.dialect or "nccl"
    if base != "record_param_comms" and row.kind == "unknown":
        row.kind = normalize_collective(base)
    coll = a.coll_name
    if isinstance(coll, str) and coll:
        kind = "wait" if coll == "wait" else normalize_collective(coll)
        if kind != "unknown":
            row.kind = kind
    dtype = a.dtype
    if isinstance(dtype, str) and dtype and not row.dtype:
        row.dtype = dtype
    elt = dtype_size_bytes(row.dtype) if row.dtype else 0
    in_n, out_n = _as_int(a.in_nelems), _as_int(a.out_nelems)
    if elt and in_n >= 0 and row.in_bytes < 0:
        row.in_bytes = in_n * elt
    if elt and out_n >= 0 and row.out_bytes < 0:
        row.out_bytes = out_n * elt
    if row.in_bytes < 0:
        n = _numel(a.input_dims)
        t = _first_type(a.input_type)
        e = dtype_size_bytes(t) if t else 0
        if n >= 0 and e:
            row.in_bytes = n * e
            row.dtype = row.dtype or t
    gs = _as_int(a.group_size)
    if gs > 0 and row.group_size < 0:
        row.group_size = gs
    pg = a.pg_name
    if isinstance(pg, str | int) and not row.pg_name:
        row.pg_name = str(pg)
    desc = a.pg_desc
    if isinstance(desc, str) and not row.pg_desc:
        row.pg_desc = desc
    ranks = _ranks(a.pg_ranks)
    if ranks and not row.pg_ranks:
        row.pg_ranks = ranks
    seq = _as_int(a.coll_seq)
    if seq >= 0 and row.seq < 0:
        row.seq = seq
    if base in ("c10d::send", "c10d::recv_", "c10d::recv", "c10d::recv_any_source_"):
        ci = a.concrete_inputs
        if isinstance(ci, list) and len(ci) >= 2:
            row.peer = _as_int(ci[1]) if row.peer < 0 else row.peer
            if len(ci) >= 3 and row.tag < 0:
                row.tag = _as_int(ci[2])


def build_collectives(
    names: tuple[str, ...],
    events: Events,
    args: Mapping[int, EventMeta],
    meta: TraceMeta,
    diagnostics: dict[str, int],
) -> Collectives:
    """Find every collective call; see the module docstring for the folding rules."""
    cand_names = [i for i, n in enumerate(names) if n.startswith(_PREFIXES)]
    is_cand = np.isin(events.name_idx, cand_names) & np.isin(events.cat, _HOST_CATS)
    rows: list[_Row] = []
    open_row: _Row | None = None
    open_end = -1
    open_proc = -1
    gloo_work: list[int] = []
    for i in np.flatnonzero(is_cand).tolist():
        name = names[int(events.name_idx[i])]
        proc = int(events.processor_idx[i])
        ts = int(events.ts_ns[i])
        if open_row is not None and proc == open_proc and ts < open_end:
            _absorb(open_row, name, args[i])
            if name.startswith("gloo:"):
                open_row.work_idx = i
            continue
        if name.startswith("gloo:"):
            gloo_work.append(i)
            continue
        row = _Row(i)
        _absorb(row, name, args[i])
        rows.append(row)
        open_row, open_end, open_proc = row, ts + int(events.dur_ns[i]), proc
    _join_gloo_work(rows, gloo_work, names, events, args)
    for r in rows:
        if r.kind == "unknown" and r.dialect == "nccl" and r.in_bytes < 0 and not r.pg_name:
            # a bare record_param_comms (pre-2.1 PyTorch) after a collective marks its wait
            r.kind = "wait"
    # record_param_comms also marks work.wait(): a host sync, not a collective
    rows = [r for r in rows if r.kind != "wait"]
    rows.sort(key=lambda r: (int(events.ts_ns[r.event_idx]), r.event_idx))
    pg_by_name = {pg.name: pg for pg in meta.process_groups}
    for r in rows:
        pg = pg_by_name.get(r.pg_name)
        if pg is not None:
            r.pg_ranks = r.pg_ranks or pg.ranks
            r.pg_desc = r.pg_desc or pg.desc
        if r.group_size < 0 and r.pg_ranks:
            r.group_size = len(r.pg_ranks)
    unknown = sum(r.kind == "unknown" for r in rows)
    if unknown:
        diagnostics["collective_kind_unknown"] = unknown
    return Collectives(
        event_idx=np.array([r.event_idx for r in rows], dtype=np.int64),
        work_event_idx=np.array([r.work_idx for r in rows], dtype=np.int64),
        kind=tuple(r.kind for r in rows),
        dialect=tuple(r.dialect for r in rows),
        size_bytes=np.array([max(r.in_bytes, r.out_bytes) for r in rows], dtype=np.int64),
        in_bytes=np.array([r.in_bytes for r in rows], dtype=np.int64),
        out_bytes=np.array([r.out_bytes for r in rows], dtype=np.int64),
        dtype=tuple(r.dtype for r in rows),
        group_size=np.array([r.group_size for r in rows], dtype=np.int64),
        pg_name=tuple(r.pg_name for r in rows),
        pg_desc=tuple(r.pg_desc for r in rows),
        pg_ranks=tuple(r.pg_ranks for r in rows),
        seq_id=np.array([r.seq for r in rows], dtype=np.int64),
        peer_rank=np.array([r.peer for r in rows], dtype=np.int64),
        tag=np.array([r.tag for r in rows], dtype=np.int64),
    )


def _join_gloo_work(
    rows: list[_Row],
    work: list[int],
    names: tuple[str, ...],
    events: Events,
    args: Mapping[int, EventMeta],
) -> None:
    """Pair gloo worker spans with c10d calls of the same kind, in start-time order."""
    calls_by_kind: dict[str, list[_Row]] = {}
    for r in rows:
        if r.work_idx < 0 and r.dialect != "nccl":
            calls_by_kind.setdefault(r.kind, []).append(r)
    work.sort(key=lambda i: (int(events.ts_ns[i]), i))
    cursor: dict[str, int] = {}
    for i in work:
        kind = normalize_collective(names[int(events.name_idx[i])].split("#", 1)[0])
        calls = calls_by_kind.get(kind, [])
        k = cursor.get(kind, 0)
        # a worker span can only serve a call that started before it
        if k < len(calls) and events.ts_ns[calls[k].event_idx] <= events.ts_ns[i]:
            row = calls[k]
            cursor[kind] = k + 1
            row.work_idx = i
            row.dialect = "gloo"
            _absorb(row, names[int(events.name_idx[i])], args[i])
        else:
            row = _Row(i)
            row.work_idx = i
            _absorb(row, names[int(events.name_idx[i])], args[i])
            rows.append(row)
