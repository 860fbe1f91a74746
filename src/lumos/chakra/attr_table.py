"""Attribute values as one columnar table, decoded in compiled code (:mod:`._wire_attr`).

:class:`AttrTable` holds the values of many ``AttributeProto`` messages (a trace's node
attributes, or the metadata's) without a Python object per value: attribute row ``k`` has its
values in rows ``ptr[k]:ptr[k+1]`` of ``val``/``val_len`` (one row for a scalar, one per item
for a list; see :mod:`lumos.chakra._wire_attr` for what the two columns hold per kind).
Python values are made only for the attribute asked for (:meth:`AttrTable.value`), and typed
NumPy arrays without any (:meth:`AttrTable.array`).

>>> import numpy as np
>>> from lumos.chakra.attrs import attr, encode_attr
>>> body = np.frombuffer(encode_attr(attr("sizes", [4, -2, 9])), dtype=np.uint8)
>>> t = AttrTable.decode(body, np.array([0]), np.array([body.size]), np.array([10], np.int8))
>>> t.value(0), t.array(0).dtype
([4, -2, 9], dtype('int64'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.chakra import _wire, _wire_attr
from lumos.chakra.attrs import Attr, WireError, read_varint
from lumos.chakra.schema import ATTR_KIND_NAMES
from lumos.errors import ChakraFormatError

__all__ = ["AttrRows", "AttrTable", "attr_header", "attrs_from_spans"]

# how the values of each oneof field number (index) become Python values
_SIGNED, _UNSIGNED, _FLOAT, _BOOL, _STRING, _BYTES = range(6)
_CATEGORY = [_SIGNED] * 33
for _k in (3, 4, 5, 6):
    _CATEGORY[_k] = _FLOAT
for _k in (13, 14, 21, 22):  # uint64, fixed64
    _CATEGORY[_k] = _UNSIGNED
for _k, _c in ((27, _BOOL), (28, _BOOL), (29, _STRING), (30, _STRING), (31, _BYTES), (32, _BYTES)):
    _CATEGORY[_k] = _c
_DTYPE = {_SIGNED: np.int64, _UNSIGNED: np.uint64, _FLOAT: np.float64}


@dataclass(frozen=True, eq=False)
class AttrTable:
    """Values of attribute rows ``0..n-1`` (``kind``: oneof field number per row, 0 = no value;
    ``bad``: the :mod:`lumos.chakra._wire` error code of a row that does not decode, else 0)."""

    blob: np.ndarray
    kind: np.ndarray
    ptr: np.ndarray
    val: np.ndarray
    val_len: np.ndarray
    bad: np.ndarray

    @classmethod
    def decode(
        cls, blob: np.ndarray, off: np.ndarray, ln: np.ndarray, kind: np.ndarray
    ) -> AttrTable:
        """Decode the attribute bodies ``blob[off[k]:off[k]+ln[k]]`` whose oneof kinds are
        ``kind`` (as :func:`lumos.chakra._wire.decode_nodes` found them)."""
        n = off.shape[0]
        off = np.ascontiguousarray(off, dtype=np.int64)
        ln = np.ascontiguousarray(ln, dtype=np.int64)
        kind = np.asarray(kind, dtype=np.int8)
        blob = np.ascontiguousarray(blob, dtype=np.uint8)
        ptr = np.zeros(n + 1, dtype=np.int64)
        bad = np.zeros(n, dtype=np.int8)
        none = np.zeros(0, dtype=np.int64)
        _wire_attr.decode_attr_values(blob, off, ln, False, ptr, none, none, bad)
        np.cumsum(ptr, out=ptr)
        total = int(ptr[-1])
        val = np.empty(total, dtype=np.int64)
        val_len = np.empty(total, dtype=np.int64)
        _wire_attr.decode_attr_values(blob, off, ln, True, ptr, val, val_len, bad)
        return cls(blob, kind, ptr, val, val_len, bad)

    def _check(self, k: int) -> int:
        code = int(self.bad[k])
        if code:
            raise WireError(_wire.ERROR_TEXT[code].replace(" {value}", ""))
        return int(self.kind[k])

    def value(self, k: int) -> Any:
        """The Python value of row ``k`` as :func:`lumos.chakra.attrs.decode_attr` gives it (a
        list for a list kind, None without a value); raises ``WireError`` when it is malformed."""
        kind = self._check(k)
        if kind == 0:
            return None
        values = self._list(kind, int(self.ptr[k]), int(self.ptr[k + 1]))
        return values if kind % 2 == 0 else values[0]

    def array(self, k: int) -> np.ndarray:
        """The values of row ``k`` as a NumPy array: int64 (uint64 for uint64/fixed64), float64,
        bool, or an object array of ``str``/``bytes``."""
        kind = self._check(k)
        lo, hi = int(self.ptr[k]), int(self.ptr[k + 1])
        cat = _CATEGORY[kind]
        v = self.val[lo:hi]
        if cat in _DTYPE:
            return v.view(_DTYPE[cat])
        if cat == _BOOL:
            return v != 0
        out = np.empty(hi - lo, dtype=object)
        out[:] = self._list(kind, lo, hi)
        return out

    def _list(self, kind: int, lo: int, hi: int) -> list[Any]:
        cat = _CATEGORY[kind]
        v = self.val[lo:hi]
        if cat == _SIGNED:
            return v.tolist()
        if cat in _DTYPE:
            return v.view(_DTYPE[cat]).tolist()
        if cat == _BOOL:
            return (v != 0).tolist()
        if lo == hi:
            return []
        offs = v.tolist()
        ends = (v + self.val_len[lo:hi]).tolist()
        first = min(offs)
        chunk = self.blob[first : max(ends)].tobytes()
        raw = [chunk[o - first : e - first] for o, e in zip(offs, ends, strict=True)]
        if cat == _BYTES:
            return raw
        try:
            return [b.decode("utf-8") for b in raw]
        except UnicodeDecodeError:
            raise WireError("string attribute is not valid UTF-8") from None


class AttrRows:
    """A trace's attribute rows as their values, kinds and doc strings are read one at a time
    (by :class:`~lumos.chakra.trace.ChakraTrace` and its attribute views): the columns it needs
    and the value table (:class:`AttrTable`, decoded on first use), without a reference to the
    trace, so that views holding it do not keep their trace alive in a reference cycle."""

    __slots__ = ("_table", "blob", "kinds", "lengths", "node_id", "offsets", "path", "ptr")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 kinds: np.ndarray, ptr: np.ndarray, node_id: np.ndarray,
                 path: str | None) -> None:  # fmt: skip
        self.blob, self.offsets, self.lengths, self.kinds = blob, offsets, lengths, kinds
        self.ptr, self.node_id, self.path = ptr, node_id, path
        self._table: AttrTable | None = None

    @property
    def table(self) -> AttrTable:
        """Every row's value (decoded on first use: :meth:`AttrTable.decode`)."""
        if self._table is None:
            self._table = AttrTable.decode(self.blob, self.offsets, self.lengths, self.kinds)
        return self._table

    def kind(self, k: int) -> str:
        """The oneof member that carries row ``k``'s value (``""`` for none)."""
        return ATTR_KIND_NAMES.get(int(self.kinds[k]), "")

    def value(self, k: int) -> Any:
        """The Python value of row ``k``; ``ChakraFormatError`` naming its node when it does
        not decode."""
        try:
            return self.table.value(k)
        except WireError as exc:
            raise self._error(k, exc) from None

    def doc(self, k: int) -> str:
        """``doc_string`` of row ``k``."""
        o, n = int(self.offsets[k]), int(self.lengths[k])
        try:
            return attr_header(self.blob[o : o + n].tobytes())[1]
        except WireError as exc:
            raise self._error(k, exc) from None

    def _error(self, k: int, exc: WireError) -> ChakraFormatError:
        idx = int(np.searchsorted(self.ptr, k, side="right") - 1)
        return ChakraFormatError(
            self.path,
            f"node id {int(self.node_id[idx])} (row {idx}): attribute does not decode: {exc}",
        )


def attr_header(b: bytes) -> tuple[str, str, int]:
    """``(name, doc_string, kind)`` of one ``AttributeProto`` body, values skipped."""
    name, doc, kind, pos = "", "", 0, 0
    while pos < len(b):
        tag, pos = read_varint(b, pos)
        fno, wt = tag >> 3, tag & 7
        if wt == 0:
            pos = read_varint(b, pos)[1]
        elif wt == 2:
            n, pos = read_varint(b, pos)
            if pos + n > len(b):
                if 4 <= fno <= 32 and fno % 2 == 0:
                    raise WireError(f"attribute {name or '?'!r}: list runs past its message")
                raise WireError("string past end of message")
            if fno in (1, 2):
                try:
                    s = b[pos : pos + n].decode("utf-8")
                except UnicodeDecodeError:
                    raise WireError("string attribute is not valid UTF-8") from None
                name, doc = (s, doc) if fno == 1 else (name, s)
            pos += n
        elif wt in (1, 5):
            pos += 8 if wt == 1 else 4
        else:
            raise WireError(f"unsupported wire type {wt}")
        if 3 <= fno <= 32:
            kind = fno
    return name, doc, kind


def attrs_from_spans(blob: np.ndarray, off: list[int], ln: list[int]) -> tuple[Attr, ...]:
    """Whole :class:`Attr` objects for the bodies ``blob[off[k]:off[k]+ln[k]]`` (for the few
    messages read whole, such as the metadata: their list values are decoded in one compiled
    pass); raises ``WireError``."""
    heads = [attr_header(blob[o : o + n].tobytes()) for o, n in zip(off, ln, strict=True)]
    kinds = np.array([h[2] for h in heads], dtype=np.int8)
    table = AttrTable.decode(blob, np.array(off, np.int64), np.array(ln, np.int64), kinds)
    return tuple(
        Attr(name, table.value(k), ATTR_KIND_NAMES.get(kind, ""), doc)
        for k, (name, doc, kind) in enumerate(heads)
    )
