"""Collective metadata of PyTorch ET ``record_param_comms`` nodes, in one columnar table.

Two dialects carry the same facts:

* schema 1.1.0 and newer write node ``attrs``: ``collective_name``, ``dtype``, ``in_msg_nelems``,
  ``out_msg_nelems``, ``in_split_size``/``out_split_size`` (JSON strings), ``global_rank_start``,
  ``global_rank_stride``, ``pg_name``, ``pg_desc``, ``pg_size``;
* every version writes the ``record_param_comms`` arguments positionally::

      [tensors..., seq, pg, rank, "<collective>", in_splits, out_splits, (start, stride,)? (size)?]

  where ``pg`` is a ``[name, desc]`` pair (1.1.0+) or an opaque integer (older; not a name).

Attributes win over positions; what neither gives stays unknown (-1 or ""), never guessed.
Message sizes come from attributes, else from the numel of the tensors the node takes and returns
(a tensor value is ``[tensor_id, storage_id, offset, numel, itemsize, device]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["COMM_ATTR_NAMES", "CommTable", "build_comm_table", "comm_kind", "iter_tensors"]

COMM_ATTR_NAMES: frozenset[str] = frozenset(
    {
        "collective_name",
        "dtype",
        "in_msg_nelems",
        "out_msg_nelems",
        "in_split_size",
        "out_split_size",
        "global_rank_start",
        "global_rank_stride",
        "pg_name",
        "pg_desc",
        "pg_size",
    }
)

_COMM_PREFIXES: tuple[str, ...] = ("c10d::", "nccl:", "gloo:", "rccl:", "ucc:", "mpi:")


def comm_kind(name: str) -> str | None:
    """The communication kind of a node name, or None for compute.

    >>> comm_kind("record_param_comms"), comm_kind("nccl:all_reduce"), comm_kind("aten::mm")
    ('record_param_comms', 'nccl', None)
    """
    if name == "record_param_comms":
        return name
    for prefix in _COMM_PREFIXES:
        if name.startswith(prefix):
            return prefix.rstrip(":")
    return None


def _is_tensor(v: Any) -> bool:
    return (
        isinstance(v, list)
        and len(v) >= 6
        and all(type(x) is int for x in v[:5])
        and isinstance(v[5], str)
    )


def iter_tensors(value: Any) -> Iterator[list[Any]]:
    """Every tensor value nested anywhere inside an argument value (lists of lists included)."""
    if _is_tensor(value):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from iter_tensors(v)


@dataclass(frozen=True, slots=True, eq=False)
class CommTable:
    """One row per ``record_param_comms`` node that names a collective (``wait`` rows included).

    Integer columns use -1 for unknown; string columns index :attr:`strings` ("" = unknown).
    Split sizes are CSR: row ``i`` owns ``in_split[in_split_ptr[i]:in_split_ptr[i + 1]]``.
    """

    node_idx: np.ndarray  # int32, position of the node in the HostTrace
    collective_idx: np.ndarray  # int32 -> strings, e.g. "allreduce", "all_to_allv", "wait"
    pg_name_idx: np.ndarray  # int32 -> strings
    pg_desc_idx: np.ndarray  # int32 -> strings
    dtype_idx: np.ndarray  # int32 -> strings, e.g. "Float" or "float"
    seq: np.ndarray  # int64, the collective sequence number on its group
    rank: np.ndarray  # int64, this rank within the group as recorded
    in_nelems: np.ndarray  # int64
    out_nelems: np.ndarray  # int64
    elem_size_bytes: np.ndarray  # int64
    group_size: np.ndarray  # int64
    rank_start: np.ndarray  # int64, first global rank of the group
    rank_stride: np.ndarray  # int64
    in_split_ptr: np.ndarray  # int64, len rows + 1
    in_split: np.ndarray  # int64
    out_split_ptr: np.ndarray  # int64
    out_split: np.ndarray  # int64
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.node_idx.shape[0])

    @property
    def in_size_bytes(self) -> np.ndarray:
        """Input message size per row (-1 when numel or element size is unknown)."""
        ok = (self.in_nelems >= 0) & (self.elem_size_bytes >= 0)
        return np.where(ok, self.in_nelems * self.elem_size_bytes, -1)

    @property
    def out_size_bytes(self) -> np.ndarray:
        """Output message size per row (-1 when unknown)."""
        ok = (self.out_nelems >= 0) & (self.elem_size_bytes >= 0)
        return np.where(ok, self.out_nelems * self.elem_size_bytes, -1)

    def collective(self, row: int) -> str:
        """The collective name of ``row``."""
        return self.strings[int(self.collective_idx[row])]

    def pg_name(self, row: int) -> str:
        """The process-group name of ``row`` ("" when the trace does not say)."""
        return self.strings[int(self.pg_name_idx[row])]

    def group_ranks(self, row: int) -> list[int] | None:
        """Global ranks of the group of ``row``, when start, stride and size are all known."""
        start, stride, size = (
            int(self.rank_start[row]),
            int(self.rank_stride[row]),
            int(self.group_size[row]),
        )
        if start < 0 or stride < 0 or size < 0:
            return None
        return [start + stride * i for i in range(size)]


class _Strings:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {"": 0}

    def id(self, s: str) -> int:
        return self.ids.setdefault(s, len(self.ids))


def _int(v: Any) -> int:
    return v if type(v) is int else -1


def _int_list(v: Any) -> list[int]:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    if isinstance(v, list) and all(type(x) is int for x in v):
        return v
    return []


def _nelems(values: Sequence[Any]) -> tuple[int, int]:
    """(total numel, itemsize of the first tensor) over tensor arguments; -1 when none."""
    total, itemsize = 0, -1
    found = False
    for v in values:
        for t in iter_tensors(v):
            found = True
            total += t[3]
            if itemsize < 0:
                itemsize = t[4]
    return (total if found else -1), itemsize


def _row(
    values: Sequence[Any], types: Sequence[Any], out_values: Sequence[Any], attrs: Mapping[str, Any]
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "collective": "",
        "pg_name": "",
        "pg_desc": "",
        "dtype": "",
        "seq": -1,
        "rank": -1,
        "in_nelems": -1,
        "out_nelems": -1,
        "elem_size_bytes": -1,
        "group_size": -1,
        "rank_start": -1,
        "rank_stride": -1,
        "in_split": [],
        "out_split": [],
    }
    k = next((i for i, t in enumerate(types) if t == "String"), -1)
    if 0 <= k < len(values) and isinstance(values[k], str):
        row["collective"] = values[k]
        if k >= 3:
            row["seq"] = _int(values[k - 3])
            row["rank"] = _int(values[k - 1])
            pg = values[k - 2]
            if isinstance(pg, list) and len(pg) == 2 and all(isinstance(x, str) for x in pg):
                row["pg_name"], row["pg_desc"] = pg
        if k + 2 < len(values):
            row["in_split"] = _int_list(values[k + 1])
            row["out_split"] = _int_list(values[k + 2])
        tail = [_int(v) for v in values[k + 3 :]]
        if len(tail) >= 3:
            row["rank_start"], row["rank_stride"], row["group_size"] = tail[:3]
        elif len(tail) == 1:
            row["group_size"] = tail[0]
        tensor_args = values[: max(k - 3, 0)]
    else:
        tensor_args = values
    row["in_nelems"], row["elem_size_bytes"] = _nelems(tensor_args)
    row["out_nelems"], out_itemsize = _nelems(out_values)
    if row["elem_size_bytes"] < 0:
        row["elem_size_bytes"] = out_itemsize
    for t in types:
        if isinstance(t, str) and "Tensor(" in t:
            row["dtype"] = t[t.index("Tensor(") + 7 :].split(")")[0]
            break
    # Attributes are the observer's own reading of the call: they override positions.
    for src, dst in (
        ("collective_name", "collective"),
        ("dtype", "dtype"),
        ("pg_name", "pg_name"),
        ("pg_desc", "pg_desc"),
    ):
        if isinstance(attrs.get(src), str):
            row[dst] = attrs[src]
    for src, dst in (
        ("in_msg_nelems", "in_nelems"),
        ("out_msg_nelems", "out_nelems"),
        ("pg_size", "group_size"),
        ("global_rank_start", "rank_start"),
        ("global_rank_stride", "rank_stride"),
    ):
        if type(attrs.get(src)) is int:
            row[dst] = attrs[src]
    for src, dst in (("in_split_size", "in_split"), ("out_split_size", "out_split")):
        if src in attrs:
            row[dst] = _int_list(attrs[src])
    return row


def build_comm_table(
    rows: Sequence[tuple[int, Sequence[Any], Sequence[Any], Sequence[Any], Mapping[str, Any]]],
) -> CommTable:
    """Build the table from ``(node_idx, in_values, in_types, out_values, comm_attrs)`` tuples.

    Rows that name no collective at all (neither by argument nor attribute) are skipped.
    """
    strings = _Strings()
    int_keys = (
        "seq",
        "rank",
        "in_nelems",
        "out_nelems",
        "elem_size_bytes",
        "group_size",
        "rank_start",
        "rank_stride",
    )
    str_keys = ("collective", "pg_name", "pg_desc", "dtype")
    cols: dict[str, list[int]] = {k: [] for k in ("node_idx", *str_keys, *int_keys)}
    in_split: list[int] = []
    out_split: list[int] = []
    in_ptr, out_ptr = [0], [0]
    for node_idx, values, types, out_values, attrs in rows:
        r = _row(values, types, out_values, attrs)
        if not r["collective"]:
            continue
        cols["node_idx"].append(node_idx)
        for key in str_keys:
            cols[key].append(strings.id(r[key]))
        for key in int_keys:
            cols[key].append(r[key])
        in_split.extend(r["in_split"])
        out_split.extend(r["out_split"])
        in_ptr.append(len(in_split))
        out_ptr.append(len(out_split))

    def i32(key: str) -> np.ndarray:
        return np.asarray(cols[key], dtype=np.int32)

    def i64(key: str) -> np.ndarray:
        return np.asarray(cols[key], dtype=np.int64)

    return CommTable(
        node_idx=i32("node_idx"),
        collective_idx=i32("collective"),
        pg_name_idx=i32("pg_name"),
        pg_desc_idx=i32("pg_desc"),
        dtype_idx=i32("dtype"),
        seq=i64("seq"),
        rank=i64("rank"),
        in_nelems=i64("in_nelems"),
        out_nelems=i64("out_nelems"),
        elem_size_bytes=i64("elem_size_bytes"),
        group_size=i64("group_size"),
        rank_start=i64("rank_start"),
        rank_stride=i64("rank_stride"),
        in_split_ptr=np.asarray(in_ptr, dtype=np.int64),
        in_split=np.asarray(in_split, dtype=np.int64),
        out_split_ptr=np.asarray(out_ptr, dtype=np.int64),
        out_split=np.asarray(out_split, dtype=np.int64),
        strings=tuple(strings.ids),
    )
