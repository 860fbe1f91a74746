"""``read_kineto``: a PyTorch profiler (Kineto) Chrome-trace file -> :class:`KinetoTrace`.

One row per duration event (``ph == "X"``) in numpy columns (listed in
:mod:`lumos.ingest.kineto_trace`), times in integer nanoseconds, names interned, every event
placed on a *processor* (a CPU thread or a GPU stream). Small payloads are decoded whole by
typed decoders and folded into columns (:mod:`lumos.ingest.kineto_columns`). Big ones are read a
chunk of events at a time by a compiled scan (:mod:`lumos.ingest.kineto_scan`) whose rows are
folded in per unique string rather than per event (:mod:`lumos.ingest.kineto_fold`); a chunk
the scan cannot read exactly is decoded the small way. Memory stays bounded on multi-GB traces
and both ways give the same trace.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import numpy as np

from lumos._io import MAP_MIN_BYTES, read_payload
from lumos.errors import TraceFormatError
from lumos.ingest.kineto_columns import Accumulator
from lumos.ingest.kineto_fold import ScanState, Unsupported, fold_scanned
from lumos.ingest.kineto_scan import FLOAT_FIELDS, INT_FIELDS, MALFORMED, UNSUPPORTED, scan
from lumos.ingest.kineto_schema import RawEvent, RawTrace
from lumos.ingest.kineto_tolerant import NESTED_TOO_DEEP, decode_tolerant
from lumos.ingest.kineto_trace import Events, KinetoTrace

__all__ = [
    "CHUNK_EVENTS",
    "COMPILED_SCAN_MIN_BYTES",
    "SPLIT_MIN_BYTES",
    "Events",
    "KinetoTrace",
    "read_kineto",
    "trace_from_bytes",
]

_DECODER = msgspec.json.Decoder(RawTrace)
_LIST_DECODER = msgspec.json.Decoder(list[RawEvent])
#: Events scanned per chunk: bounds the memory of scanned rows on multi-GB traces.
CHUNK_EVENTS = 65_536
#: Payloads this big or bigger are read by the compiled scan, a chunk of events at a time;
#: smaller ones are decoded whole by the typed decoders, which are as fast or faster there.
#: Measured on seven kinds of real trace cut to their first events (time of the whole decode
#: over the scan's): 0.6-2.3x at 128 KiB, 1.1-2.9x at 1 MiB on six of them; the seventh, a 2021
#: trace whose thread ids are strings (the fold reads those events one by one), 0.5-0.85x up to
#: 4 MiB and 1.25x whole (35 MB) ...
COMPILED_SCAN_MIN_BYTES = 1 << 20
#: ... and this big or bigger they always are (bounded memory), whatever the thresholds above:
#: one the scan refuses is then validated in constant memory before it is decoded whole.
SPLIT_MIN_BYTES = MAP_MIN_BYTES
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


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
    return trace_from_bytes(read_payload(path, member), where)


def trace_from_bytes(
    raw: bytes | mmap.mmap, where: str, *, split_min_bytes: int | None = None
) -> KinetoTrace:
    """Parse a Kineto JSON payload (bytes, or a memory-mapped file); ``where`` names it in
    errors.

    From ``split_min_bytes`` on (by default :data:`COMPILED_SCAN_MIN_BYTES`, or
    :data:`SPLIT_MIN_BYTES` where that is lower), the ``traceEvents`` array is scanned in chunks
    of :data:`CHUNK_EVENTS` and folded into columns as it goes, so peak memory is the payload
    plus the columns plus one chunk. Both ways give the same trace.
    """
    if split_min_bytes is None:
        split_min_bytes = min(SPLIT_MIN_BYTES, COMPILED_SCAN_MIN_BYTES)
    diagnostics: dict[str, int] = {}
    head = raw[:4096].lstrip()
    if not head:
        raise TraceFormatError(where, "empty file")
    if head[:1] not in (b"{", b"["):
        raise TraceFormatError(where, "not JSON (does not start with '{' or '[')")
    if head[:1] == b"{" and len(raw) >= split_min_bytes:
        try:
            return _scan_payload(raw, where, diagnostics)
        except _FallBack:
            diagnostics = {}
            if len(raw) >= SPLIT_MIN_BYTES:
                _refuse_invalid_json(raw, where)
    acc = Accumulator(diagnostics)
    top = _decode_whole(raw, head, where, diagnostics)
    acc.add(top.traceEvents)
    return acc.finish(top, where)


def _scan_payload(raw: bytes | mmap.mmap, where: str, diagnostics: dict[str, int]) -> KinetoTrace:
    """Read a ``{"traceEvents": [...], ...}`` payload a chunk of events at a time."""
    m = _KEY.search(raw, 0, min(len(raw), 1 << 20)) or _KEY.search(raw)
    if m is None:
        raise _FallBack
    acc = Accumulator(diagnostics)
    state = ScanState()
    buf = np.frombuffer(raw, dtype=np.uint8)
    ints = np.empty(CHUNK_EVENTS * len(INT_FIELDS), dtype=np.int64)
    floats = np.empty(CHUNK_EVENTS * len(FLOAT_FIELDS), dtype=np.float64)
    pos = m.end()
    released = pos - pos % mmap.PAGESIZE
    while True:
        state.reserve(CHUNK_EVENTS)
        n, sep, status, done = scan(buf, pos, CHUNK_EVENTS, ints, floats, *state.arrays())
        if status == MALFORMED:
            raise _FallBack
        folded = False
        if status != UNSUPPORTED:
            try:
                fold_scanned(acc, state, raw, ints, floats, n)
                folded = True
            except Unsupported:
                pass
        if not folded and n:
            acc.add(_decode_chunk(b"[" + raw[pos:sep] + b"]", where, diagnostics))
        if done:
            break
        pos = sep + 1
        released = _release(raw, released, pos)
    top = _decode_top(raw[: m.end()] + raw[sep:], where, diagnostics)
    return acc.finish(top, where)


def _release(raw: bytes | mmap.mmap, start: int, upto: int) -> int:
    """Drop the scanned pages ``[start, upto)`` of a mapped file from this process's memory
    (they stay in the page cache, and a later read of a string there maps them again), so that
    a multi-GB trace does not count in full against the process while its columns grow.
    Returns where the next release starts (a page boundary)."""
    end = upto - upto % mmap.PAGESIZE
    if isinstance(raw, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") and end > start:
        raw.madvise(mmap.MADV_DONTNEED, start, end - start)
        return end
    return start


def _refuse_invalid_json(raw: bytes | mmap.mmap, where: str) -> None:
    """Raise the JSON error of a big payload (a trace cut short while it was written, say)
    after validating it in constant memory, rather than decoding gigabytes into events first
    only to fail at the end. A valid payload returns (the scan refused something else)."""
    with _json_errors(where):
        msgspec.json.decode(raw, type=msgspec.Raw)


@contextmanager
def _json_errors(where: str) -> Iterator[None]:
    """Invalid JSON (syntax, encoding, nesting) as one :class:`TraceFormatError` naming it."""
    try:
        yield
    except msgspec.DecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        raise TraceFormatError(where, NESTED_TOO_DEEP) from None


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


def _decode_whole(
    raw: bytes | mmap.mmap, head: bytes, where: str, diagnostics: dict[str, int]
) -> RawTrace:
    with _json_errors(where):
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
