"""``read_kineto``: a PyTorch profiler (Kineto) Chrome-trace file -> :class:`KinetoTrace`.

One row per duration event (``ph == "X"``) in numpy columns (listed in
:mod:`lumos.ingest.kineto_trace`), times in integer nanoseconds, names interned, every event
placed on a *processor* (a CPU thread or a GPU stream). On big payloads the ``traceEvents``
array is decoded in chunks (:mod:`lumos.ingest.kineto_split`) and folded into columns as it
goes (:mod:`lumos.ingest.kineto_columns`), so memory stays bounded on multi-GB traces.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from lumos._io import read_bytes
from lumos.errors import TraceFormatError
from lumos.ingest.kineto_columns import Accumulator
from lumos.ingest.kineto_schema import RawEvent, RawTrace
from lumos.ingest.kineto_split import split_events
from lumos.ingest.kineto_tolerant import NESTED_TOO_DEEP, decode_tolerant
from lumos.ingest.kineto_trace import Events, KinetoTrace

__all__ = [
    "CHUNK_EVENTS",
    "SPLIT_MIN_BYTES",
    "Events",
    "KinetoTrace",
    "read_kineto",
    "trace_from_bytes",
]

_DECODER = msgspec.json.Decoder(RawTrace)
_LIST_DECODER = msgspec.json.Decoder(list[RawEvent])
#: Events decoded per chunk: bounds the memory of decoded events on multi-GB traces.
CHUNK_EVENTS = 20_000
#: Payloads this big or bigger are decoded in chunks (bounded memory); smaller ones whole, which
#: is as fast and needs no compiled scan (no compile wait on a first run; see :mod:`lumos._jit`).
SPLIT_MIN_BYTES = 64 << 20


def read_kineto(path: str | os.PathLike[str], member: str | None = None) -> KinetoTrace:
    """Read a Kineto Chrome-trace JSON file (plain, gzip, or a tar ``member``).

    Raises :class:`~lumos.errors.TraceFormatError` (naming the file) when the file is not valid
    JSON, not a trace, or has no events.

    >>> from lumos.examples_data import example_trace_path
    >>> t = read_kineto(example_trace_path())
    >>> len(t.steps) > 0
    True
    """
    where = f"{Path(path)}::{member}" if member else str(path)
    return trace_from_bytes(read_bytes(path, member), where)


def trace_from_bytes(
    raw: bytes, where: str, *, split_min_bytes: int = SPLIT_MIN_BYTES
) -> KinetoTrace:
    """Parse an in-memory Kineto JSON payload; ``where`` names it in errors.

    From ``split_min_bytes`` on, the ``traceEvents`` array is decoded in chunks of
    :data:`CHUNK_EVENTS` and folded into columns as it goes, so peak memory is the payload plus
    the columns plus one chunk. Both ways give the same trace.
    """
    diagnostics: dict[str, int] = {}
    head = raw[:4096].lstrip()
    if not head:
        raise TraceFormatError(where, "empty file")
    if head[:1] not in (b"{", b"["):
        raise TraceFormatError(where, "not JSON (does not start with '{' or '[')")
    acc = Accumulator(diagnostics)
    chunked = head[:1] == b"{" and len(raw) >= split_min_bytes
    split = split_events(raw, CHUNK_EVENTS) if chunked else None
    if split is not None:
        rest, ranges, _ = split
        try:
            top = _decode_top(rest, where, diagnostics)
            for a, b in ranges:
                acc.add(_decode_chunk(b"[" + raw[a:b] + b"]", where, diagnostics))
            return acc.finish(top, where)
        except _FallBack:
            acc = Accumulator(diagnostics := {})
    top = _decode_whole(raw, head, where, diagnostics)
    acc.add(top.traceEvents)
    return acc.finish(top, where)


class _FallBack(Exception):
    """A chunk that did not decode: redo the whole document for the precise error."""


def _decode_top(rest: bytes, where: str, diagnostics: dict[str, int]) -> RawTrace:
    try:
        return _DECODER.decode(rest)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        raise _FallBack from None


def _decode_chunk(chunk: bytes, where: str, diagnostics: dict[str, int]) -> list[RawEvent]:
    try:
        return _LIST_DECODER.decode(chunk)
    except msgspec.ValidationError:
        doc = b'{"traceEvents":' + chunk + b"}"
        return decode_tolerant(doc, where, diagnostics).traceEvents
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise _FallBack from None
    except RecursionError:
        raise TraceFormatError(where, NESTED_TOO_DEEP) from None


def _decode_whole(raw: bytes, head: bytes, where: str, diagnostics: dict[str, int]) -> RawTrace:
    try:
        if head[:1] == b"[":
            return RawTrace(traceEvents=_LIST_DECODER.decode(raw))
        return _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        if "traceEvents" in str(exc) and "missing required field" in str(exc):
            raise TraceFormatError(
                where, "JSON object has no 'traceEvents': not a Kineto trace"
            ) from None
        return decode_tolerant(raw, where, diagnostics)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        raise TraceFormatError(where, NESTED_TOO_DEEP) from None
