"""``GlobalMetadata``: a Chakra file's first record, with its attribute values decoded on demand.

A file written by ``lumos convert`` keeps whole tables in its metadata (millions of integers in
packed lists), which no reader of the nodes needs: :meth:`ChakraMetadata.decode` checks the
record's framing and reads the version and each attribute's name, kind and doc string at once,
and turns the values into Python objects only when :attr:`ChakraMetadata.attrs` is first read
(all of them) or :meth:`ChakraMetadata.get` asks for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lumos.chakra.attr_table import AttrTable, attr_header
from lumos.chakra.attrs import Attr, WireError, encode_attr, read_varint, varint_bytes
from lumos.chakra.schema import ATTR_KIND_NAMES
from lumos.errors import ChakraFormatError

__all__ = ["ChakraMetadata"]


class ChakraMetadata:
    """``GlobalMetadata``: ``version``, ``attrs`` and the exact message bytes ``raw``.

    Immutable; equal when version, attributes and bytes are equal. ``ChakraMetadata(version,
    attrs, raw)`` holds what it is given; :meth:`build` makes the bytes, :meth:`decode` the
    rest (values decoded on first use)."""

    __slots__ = ("_attrs", "_heads", "_source", "_spans", "raw", "version")
    version: str
    raw: bytes
    _attrs: tuple[Attr, ...] | None
    _heads: tuple[tuple[str, str, int], ...]
    _spans: tuple[list[int], list[int]]
    _source: str | None

    def __init__(self, version: str = "", attrs: Sequence[Attr] = (), raw: bytes = b"") -> None:
        self._set(version, raw, tuple(attrs), (), ([], []), None)

    def _set(
        self,
        version: str,
        raw: bytes,
        attrs: tuple[Attr, ...] | None,
        heads: tuple[tuple[str, str, int], ...],
        spans: tuple[list[int], list[int]],
        source: str | None,
    ) -> None:
        for key, value in (("version", version), ("raw", raw), ("_attrs", attrs),
                           ("_heads", heads), ("_spans", spans), ("_source", source)):  # fmt: skip
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"ChakraMetadata is immutable (cannot set {key!r})")

    @classmethod
    def build(cls, version: str = "", attrs: tuple[Attr, ...] | list[Attr] = ()) -> ChakraMetadata:
        """Metadata with canonical bytes for ``version`` and ``attrs``."""
        raw = bytearray()
        if version:
            data = version.encode("utf-8")
            raw += b"\x0a" + varint_bytes(len(data)) + data
        for a in attrs:
            body = encode_attr(a)
            raw += b"\x12" + varint_bytes(len(body)) + body
        return cls(version, tuple(attrs), bytes(raw))

    @classmethod
    def decode(cls, raw: bytes, source: str | None = None) -> ChakraMetadata:
        """Parse ``GlobalMetadata`` bytes (unknown fields are kept in ``raw``): the framing and
        each attribute's name, doc string and kind now, raising ``WireError``; the values on
        first use, raising :class:`~lumos.errors.ChakraFormatError` naming ``source`` (the
        file) when one does not decode."""
        version, pos = "", 0
        spans: tuple[list[int], list[int]] = ([], [])
        while pos < len(raw):
            tag, pos = read_varint(raw, pos)
            fno, wt = tag >> 3, tag & 7
            if wt == 2:
                n, pos = read_varint(raw, pos)
                if pos + n > len(raw):
                    raise WireError("metadata field runs past the end of the record")
                body, pos = raw[pos : pos + n], pos + n
                if fno == 1:
                    version = body.decode("utf-8", errors="replace")
                elif fno == 2:
                    spans[0].append(pos - n)
                    spans[1].append(n)
            elif wt == 0:
                _, pos = read_varint(raw, pos)
            elif wt in (1, 5):
                pos += 8 if wt == 1 else 4
            else:
                raise WireError(f"metadata field {fno} has unsupported wire type {wt}")
        raw = bytes(raw)
        heads = tuple(attr_header(raw[o : o + n]) for o, n in zip(*spans, strict=True))
        meta = cls.__new__(cls)
        meta._set(version, raw, None, heads, spans, source)
        return meta

    @property
    def attrs(self) -> tuple[Attr, ...]:
        """Every attribute, in record order (values decoded on first read)."""
        if self._attrs is None:
            table = self._table()
            attrs = tuple(
                Attr(name, self._value(table, k, name), ATTR_KIND_NAMES.get(kind, ""), doc)
                for k, (name, doc, kind) in enumerate(self._heads)
            )
            object.__setattr__(self, "_attrs", attrs)
            return attrs
        return self._attrs

    def _table(self) -> AttrTable:
        off, ln = self._spans
        kinds = np.array([h[2] for h in self._heads], dtype=np.int8)
        blob = np.frombuffer(self.raw, dtype=np.uint8)
        return AttrTable.decode(blob, np.array(off, np.int64), np.array(ln, np.int64), kinds)

    def _value(self, table: AttrTable, row: int, name: str) -> Any:
        try:
            return table.value(row)
        except WireError as exc:
            problem = f"GlobalMetadata attribute {name!r} does not decode: {exc}"
            raise ChakraFormatError(self._source, problem) from None

    def get(self, name: str, default: Any = None) -> Any:
        """Value of the last metadata attribute called ``name`` (decoding only that one)."""
        if self._attrs is not None:
            for a in reversed(self._attrs):
                if a.name == name:
                    return a.value
            return default
        for k in range(len(self._heads) - 1, -1, -1):
            if self._heads[k][0] == name:
                off, ln = self._spans
                kind = np.array([self._heads[k][2]], dtype=np.int8)
                blob = np.frombuffer(self.raw, dtype=np.uint8)
                one = AttrTable.decode(
                    blob, np.array(off[k : k + 1]), np.array(ln[k : k + 1]), kind
                )
                return self._value(one, 0, name)
        return default

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChakraMetadata):
            return NotImplemented
        return (self.version, self.raw, self.attrs) == (other.version, other.raw, other.attrs)

    def __hash__(self) -> int:
        return hash((self.version, self.raw))

    def __repr__(self) -> str:
        names = [h[0] for h in self._heads] if self._attrs is None else [a.name for a in self.attrs]
        return f"ChakraMetadata(version={self.version!r}, attrs={names!r}, {len(self.raw)} bytes)"
