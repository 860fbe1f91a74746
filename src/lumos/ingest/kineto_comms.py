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

Message sizes
-------------
``in_bytes`` / ``out_bytes`` are the raw input and output messages as the trace records them
(-1 when unknown): "In/Out msg nelems" x "dtype" of ``record_param_comms`` where present, else
the tensors' "Input Dims" x "Input type". Metadata always wins over dims. A ``c10d::<op>`` takes
``(output, input, ...)`` for the ops that have both (``_allgather_base_``, ``allgather_``,
``_reduce_scatter_base_``, ``reduce_scatter_``, ``alltoall_base_``, ``alltoall_``, ``gather_``,
``scatter_``, their ``_coalesced``/``_into_tensor`` forms): its first tensor is the *output*;
``nccl:<op>``, ``gloo:<op>`` and ``record_param_comms`` list the input first.

``size_bytes`` is the size *as the collective defines it*
(:func:`lumos.ingest.comm_args.collective_size_bytes`), one
convention whatever the dialect:

================  ======================================================================
all_reduce        the tensor (input = output)
all_gather        the OUTPUT: the gathered buffer (shard x group size)
reduce_scatter    the INPUT: the full buffer before scattering (shard x group size)
all_to_all        what this rank sends in total (the input; the output when only it is known)
broadcast/reduce  the tensor
gather, scatter   the full buffer at the root (shard x group size): gather's output there,
                  scatter's input there
send/recv         the message
other/unknown     the larger of input and output
================  ======================================================================

What PyTorch records, checked on real traces (``../shared/realdata``) and ProcessGroupNCCL:

* ``_allgather_base``: "In msg nelems" is the shard, "Out msg nelems" the full output. TraceLens
  ``b200/eager_trace.json.gz``: In 25136, Out 201088 = 8 x 25136 (Group size 8, BFloat16), while
  the enclosing ``c10d::_allgather_base_`` has "Input Dims" ``[[8, 25136], [1, 25136]]``
  (output first). Size: 201088 x 2 = 402,176 bytes. The 1.0.2 Chakra ET agrees (in 1, out 2,
  group 2). HTA ``trace_filter/sampled_rank-0`` (no metadata): ``c10d::_allgather_base_`` dims
  ``[[1073741824], [16777216]]`` int8, ``nccl:_all_gather_base`` dims ``[[16777216]]``.
* ``_reduce_scatter_base`` / ``reduce_scatter_tensor``: ProcessGroupNCCL records "In msg nelems"
  = shard x group size (the full input) and "Out msg nelems" = the shard. No real trace here
  has one; the earlier rule took the ``c10d`` op's first tensor (the output shard) as the input,
  which is how a 587.2 MB reduce-scatter came out as 73.4 MB.
* ``all_to_all`` / ``all_to_allv``: "In msg nelems" is the input numel, "Out msg nelems" the
  output's; "In/Out split size" count dim-0 rows per peer (not elements) and sum to the first
  dim, so they add nothing the msg nelems do not say. DLRM rank 2 (param ``dlrm_*.tar.gz``): the
  ET's ``all_to_allv`` has in 3392 (splits 96+224+288+1664+592+96+192+240), out 2304 (8 x 288)
  int32; the Kineto trace (no metadata) has ``c10d::alltoall_base_`` dims ``[[2304], [3392]]``
  and ``nccl:all_to_all`` dims ``[[3392]]``. Size: 3392 x 4 = 13,568 bytes, not 9,216.
* ``allreduce`` and ``broadcast``: In = Out (HTA ``nccl_data``: 2049000 Float = 8,196,000
  bytes; TraceLens MI300 RCCL: 2873320 BFloat16 = 5,746,640 bytes); the ETs (1.0.3, 1.1.0)
  carry the same numbers.
* ``gather`` / ``scatter``: ProcessGroupNCCL records In = the per-rank shard and Out = shard x
  group size for *both* (for scatter, "In" is the output shard), so their size is the larger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lumos.ingest.comm_args import as_int, collective_size_bytes, dims_at, dims_bytes, ranks_of
from lumos.ingest.comm_names import dtype_size_bytes, normalize_collective
from lumos.ingest.kineto_schema import Category, EventMeta

if TYPE_CHECKING:
    from lumos.ingest.kineto import Events
    from lumos.ingest.kineto_meta import TraceMeta

__all__ = ["Collectives", "build_collectives", "collective_size_bytes"]

_PREFIXES = ("record_param_comms", "c10d::", "nccl:", "gloo:", "rccl:")
_HOST_CATS = (int(Category.CPU_OP), int(Category.USER_ANNOTATION))
#: ``c10d::<op>`` ops whose schema is ``(output, input, ...)``: their first tensor is the output.
_C10D_OUT_IN = frozenset(
    {
        "c10d::_allgather_base_",
        "c10d::allgather_",
        "c10d::allgather_coalesced_",
        "c10d::allgather_into_tensor_coalesced_",
        "c10d::_reduce_scatter_base_",
        "c10d::reduce_scatter_",
        "c10d::reduce_scatter_tensor_coalesced_",
        "c10d::alltoall_base_",
        "c10d::alltoall_",
        "c10d::gather_",
        "c10d::scatter_",
    }
)


@dataclass(frozen=True, eq=False)
class Collectives:
    """One row per host-side collective call (see the module docstring).

    ``size_bytes`` is the size as the collective defines it (all-gather: its output,
    reduce-scatter: its input, all-to-all: what this rank sends; the module docstring has the
    whole table); ``in_bytes``/``out_bytes`` are the raw input and output messages. All three
    are -1 when unknown. ``seq_id``, ``peer_rank``, ``tag``
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
        "dims_in",
        "dims_in_type",
        "dims_out",
        "dims_out_type",
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
        self.in_bytes = -1  # from "In msg nelems" x dtype
        self.out_bytes = -1
        self.dims_in = -1  # numel from "Input Dims" (fallback)
        self.dims_in_type = ""
        self.dims_out = -1
        self.dims_out_type = ""
        self.group_size = -1
        self.pg_name = ""
        self.pg_desc = ""
        self.pg_ranks: tuple[int, ...] = ()
        self.seq = -1
        self.peer = -1
        self.tag = -1


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
    in_n, out_n = as_int(a.in_nelems), as_int(a.out_nelems)
    if elt and in_n >= 0 and row.in_bytes < 0:
        row.in_bytes = in_n * elt
    if elt and out_n >= 0 and row.out_bytes < 0:
        row.out_bytes = out_n * elt
    # "Input Dims": a fallback for what the metadata does not say (outer facts win)
    out_first = base in _C10D_OUT_IN
    in_pos = 1 if out_first else 0
    if row.dims_in < 0:
        row.dims_in, row.dims_in_type = dims_at(a, in_pos)
    elif not dtype_size_bytes(row.dims_in_type):
        # a c10d call's "TensorList" has the count, not the element type: an inner span of
        # the same count (gloo's worker span says "float") names it
        n, t = dims_at(a, in_pos)
        if n == row.dims_in and dtype_size_bytes(t):
            row.dims_in_type = t
    if out_first and row.dims_out < 0:
        row.dims_out, row.dims_out_type = dims_at(a, 0)
    gs = as_int(a.group_size)
    if gs > 0 and row.group_size < 0:
        row.group_size = gs
    pg = a.pg_name
    if isinstance(pg, str | int) and not row.pg_name:
        row.pg_name = str(pg)
    desc = a.pg_desc
    if isinstance(desc, str) and not row.pg_desc:
        row.pg_desc = desc
    ranks = ranks_of(a.pg_ranks)
    if ranks and not row.pg_ranks:
        row.pg_ranks = ranks
    seq = as_int(a.coll_seq)
    if seq >= 0 and row.seq < 0:
        row.seq = seq
    if base in ("c10d::send", "c10d::recv_", "c10d::recv", "c10d::recv_any_source_"):
        # (tensors, [process group,] peer, tag): the process group is recorded as "" by the
        # torch versions that pass it (["", "", "2", "0"] sends to rank 2)
        ci = a.concrete_inputs
        ints = [as_int(x) for x in ci[1:] if x != ""] if isinstance(ci, list) else []
        if ints and row.peer < 0:
            row.peer = ints[0]
        if len(ints) >= 2 and row.tag < 0:
            row.tag = ints[1]


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
        _settle_bytes(r)
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
        size_bytes=np.array(
            [collective_size_bytes(r.kind, r.in_bytes, r.out_bytes, r.group_size) for r in rows],
            dtype=np.int64,
        ),
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


def _settle_bytes(row: _Row) -> None:
    """Fill in/out bytes the metadata left unknown from the tensors' dims."""
    if row.in_bytes < 0:
        row.in_bytes = dims_bytes(row.dims_in, row.dims_in_type, row.dtype)
    if row.out_bytes < 0:
        row.out_bytes = dims_bytes(row.dims_out, row.dims_out_type, row.dtype)
    if not row.dtype:
        t = row.dims_in_type or row.dims_out_type
        row.dtype = t if t and dtype_size_bytes(t) else ""


#: The kinds of call a gloo worker span of a kind serves: gloo runs a reduce-scatter
#: (``_reduce_scatter_base_``, as FSDP issues it) as an all-reduce of the whole buffer, and
#: its worker span says ``gloo:all_reduce``.
_GLOO_SERVES = {"all_reduce": ("all_reduce", "reduce_scatter")}


def _join_gloo_work(
    rows: list[_Row],
    work: list[int],
    names: tuple[str, ...],
    events: Events,
    args: Mapping[int, EventMeta],
) -> None:
    """Pair gloo worker spans with c10d calls of a kind they run (:data:`_GLOO_SERVES`), in
    start-time order: each span takes the earliest-started call not yet served among those
    kinds that started before it."""
    calls_by_kind: dict[str, list[_Row]] = {}
    for r in rows:
        if r.work_idx < 0 and r.dialect != "nccl":
            calls_by_kind.setdefault(r.kind, []).append(r)
    work.sort(key=lambda i: (int(events.ts_ns[i]), i))
    cursor: dict[str, int] = {}
    for i in work:
        kind = normalize_collective(names[int(events.name_idx[i])].split("#", 1)[0])
        pending = []  # (start, event, kind) of the next call of each kind it may serve
        for c in _GLOO_SERVES.get(kind, (kind,)):
            calls = calls_by_kind.get(c, [])
            k = cursor.get(c, 0)
            if k < len(calls):
                pending.append((int(events.ts_ns[calls[k].event_idx]), calls[k].event_idx, c))
        first = min(pending, default=None)
        # a worker span can only serve a call that started before it
        if first is not None and first[0] <= events.ts_ns[i]:
            c = first[2]
            row = calls_by_kind[c][cursor.get(c, 0)]
            cursor[c] = cursor.get(c, 0) + 1
            row.work_idx = i
            row.dialect = "gloo"
            _absorb(row, names[int(events.name_idx[i])], args[i])
        else:
            row = _Row(i)
            row.work_idx = i
            _absorb(row, names[int(events.name_idx[i])], args[i])
            rows.append(row)
