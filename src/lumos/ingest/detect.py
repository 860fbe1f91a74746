"""Recognize a trace file's kind by its content, not its name, and expand paths to files.

Kinds: ``kineto`` (Chrome-trace JSON with ``traceEvents``), ``pytorch_et`` (PyTorch Execution
Trace JSON with ``nodes``), ``chakra`` (length-prefixed protobuf records), or ``None``.
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path
from typing import Literal

from lumos._io import iter_heads, read_bytes, read_payload, read_stream_input
from lumos.errors import InputError, NoTracesError

__all__ = ["TraceKind", "TraceRef", "expand_paths", "sniff_kind"]

TraceKind = Literal["kineto", "pytorch_et", "chakra"]
_KEYS = (b'"traceEvents"', b'"nodes"', b'"schema"')
_COLON = re.compile(rb"\s*:")
_SKIP_NAMES = {"run.json", "MANIFEST.json", "replay.json"}
# what lumos writes beside the ETs of a convert or a synthetic sample (never a trace; their
# "nodes" counts would read as a PyTorch ET's key)
_SKIP_SUFFIXES = (".convert.json", ".sample.json")


def sniff_kind(payload: bytes) -> TraceKind | None:
    """The kind of a decompressed payload, judged from its first 64 KiB.

    JSON is an object whose first key follows (``{`` then ``"`` or ``}``) or an array of
    objects (``[`` then ``{`` or ``]``), whitespace allowed: a Chakra file's first byte is its
    metadata record's length, which is ``[`` for a 91-byte record and ``{`` for a 123-byte one,
    followed by field 1's tag (``0x0a``, a newline) and a length byte."""
    head = payload[:65536].lstrip()
    if _json_start(head):
        keys = {k.strip(b'"') for k in _KEYS if _is_key(head, k)}
        if b"traceEvents" in keys or (head[:1] == b"[" and _is_event_list(head)):
            return "kineto"
        if b"nodes" in keys or b"schema" in keys:
            return "pytorch_et"
        return None
    if payload and payload[0] < 0x80 and len(payload) > 1 and payload[1] in (0x0A, 0x12):
        return "chakra"  # varint length, then field 1 or 2 (length-delimited) of a message
    if payload[:1] and payload[0] >= 0x80 and b"\x0a" in payload[1:6]:
        return "chakra"
    return None


def _is_event_list(head: bytes) -> bool:
    """A bare JSON array is a Chrome trace when it is empty or its events have a phase
    (``"ph"``); any other list of objects (a manifest, a report) is not."""
    return head[1:].lstrip()[:1] in (b"]", b"") or _is_key(head, b'"ph"')


def _json_start(head: bytes) -> bool:
    """Whether ``head`` (whitespace stripped) opens a JSON object or an array of objects."""
    rest = head[1:].lstrip()[:1]
    if head[:1] == b"{":
        return rest in (b'"', b"}", b"")
    return head[:1] == b"[" and rest in (b"{", b"]", b"")


def _is_key(head: bytes, key: bytes) -> bool:
    """Whether ``key`` (quoted) occurs in ``head`` followed by a colon (bytes.find: far faster
    than a regex scan over the 64 KiB)."""
    i = head.find(key)
    while i >= 0:
        if _COLON.match(head, i + len(key)):
            return True
        i = head.find(key, i + 1)
    return False


class TraceRef:
    """One trace found on disk: a file, or a member of a tar archive."""

    __slots__ = ("data", "kind", "member", "path")

    def __init__(
        self, path: Path, member: str | None, kind: TraceKind, data: bytes | None = None
    ) -> None:
        self.path = path
        self.member = member
        self.kind = kind
        self.data = data  # the raw bytes of a pipe, which can be read only once

    def __repr__(self) -> str:
        return self.where

    @property
    def where(self) -> str:
        """How errors and reports name it."""
        return f"{self.path}::{self.member}" if self.member else str(self.path)

    def read(self) -> bytes:
        """The decompressed payload."""
        return read_bytes(self.path, self.member, data=self.data)

    def payload(self) -> bytes | mmap.mmap:
        """The decompressed payload, a big plain file memory-mapped (:func:`read_payload`)."""
        return read_payload(self.path, self.member, data=self.data)


def _refs_of_file(path: Path) -> list[TraceRef]:
    """Sniff a file (or each member of a tar archive, read once in stream order) from its first
    64 KiB only; a pipe is read once into memory, a device is refused."""
    data = read_stream_input(path)
    refs = []
    for member, head in iter_heads(path, data=data):
        if member is None and not head.strip():
            raise InputError(path, "empty file")
        kind = sniff_kind(head)
        if kind is not None:
            refs.append(TraceRef(path, member, kind, data))
    return sorted(refs, key=lambda r: r.member or "")


def expand_paths(paths: list[str | os.PathLike[str]]) -> list[TraceRef]:
    """Every trace under ``paths`` (files, directories searched recursively, tar archives).

    A file given explicitly that is not a trace raises ``InputError``; directories skip
    non-trace files silently but raise ``NoTracesError`` when they hold no trace at all.
    """
    refs: list[TraceRef] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found: list[TraceRef] = []
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                if (
                    f.name in _SKIP_NAMES
                    or f.name.startswith(".")
                    or f.name.endswith(_SKIP_SUFFIXES)
                ):
                    continue
                try:
                    found.extend(_refs_of_file(f))
                except InputError:
                    continue
            if not found:
                raise NoTracesError(p, "directory holds no Kineto, PyTorch ET or Chakra trace")
            refs.extend(found)
        elif p.exists():
            found = list(_refs_of_file(p))
            if not found:
                raise InputError(
                    p, "not a trace lumos recognizes (Kineto JSON, PyTorch ET JSON, Chakra .et)"
                )
            refs.extend(found)
        else:
            raise InputError(p, "no such file or directory")
    return refs
