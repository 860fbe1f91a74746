"""The slow, forgiving path for Kineto files the fast typed decoder rejects.

Real traces sometimes carry odd types (a string tid, a float id, ``args`` that is not an
object). The fast path fails on those; this path decodes generically, coerces or drops each
offending field, counts what it changed in ``diagnostics``, and decodes the cleaned document
with the typed decoder. It never guesses a time: an event without a numeric ``ts`` is dropped
(and counted).
"""

from __future__ import annotations

import mmap
from typing import Annotated, Any, get_args, get_origin

import msgspec

from lumos.errors import TraceFormatError
from lumos.ingest.kineto_schema import RawArgs, RawTrace

__all__ = ["NESTED_TOO_DEEP", "decode_tolerant"]

#: The error for JSON nested beyond what the decoder follows (no trace nests past a few levels).
NESTED_TOO_DEEP = "JSON nested too deeply (hundreds of levels): not a trace"


def _bounds(t: Any) -> tuple[int, int] | None:
    """(low, high) of a bounded integer field type (``I64``/``I32``); None for other types."""
    if get_origin(t) is Annotated and get_args(t)[0] is int:
        meta = get_args(t)[1]
        return int(meta.ge), int(meta.le)
    return None


_INT_ARGS = {
    f.encode_name: b for f in msgspec.structs.fields(RawArgs) if (b := _bounds(f.type)) is not None
}
_I64 = (-(2**63), 2**63 - 1)
_STR_ARGS = {f.encode_name for f in msgspec.structs.fields(RawArgs) if f.type is str}


def _bump(diagnostics: dict[str, int], key: str) -> None:
    diagnostics[key] = diagnostics.get(key, 0) + 1


def _fits(v: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= v <= bounds[1]


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _clean_args(args: Any, diagnostics: dict[str, int]) -> dict[str, Any]:
    if not isinstance(args, dict):
        _bump(diagnostics, "args_not_an_object")
        return {}
    out: dict[str, Any] = {}
    for k, v in args.items():
        if k in _INT_ARGS:
            if isinstance(v, int) and not isinstance(v, bool):
                iv: int | None = v
            elif (isinstance(v, float) and v.is_integer()) or (
                isinstance(v, str) and v.strip().lstrip("-").isdigit()
            ):
                iv = int(v)
            else:
                iv = None
                _bump(diagnostics, "arg_id_not_an_integer")
            if iv is not None:
                low, high = _INT_ARGS[k]
                if low <= iv <= high:
                    out[k] = iv
                else:
                    _bump(diagnostics, f"arg_{k.replace(' ', '_').lower()}_out_of_range_dropped")
        elif k == "stream" and isinstance(v, int) and not _fits(v, _I64):
            _bump(diagnostics, "arg_stream_out_of_range_dropped")
        elif k == "stream" and (isinstance(v, bool) or not isinstance(v, int | str)):
            _bump(diagnostics, "arg_stream_not_an_integer_dropped")
        elif k in _STR_ARGS:
            out[k] = v if isinstance(v, str) else str(v)
        else:
            out[k] = v
    return out


def _clean_event(e: Any, diagnostics: dict[str, int]) -> dict[str, Any] | None:
    if not isinstance(e, dict):
        _bump(diagnostics, "event_not_an_object")
        return None
    out: dict[str, Any] = {}
    for key in ("ph", "cat", "name", "bp"):
        v = e.get(key)
        if v is not None:
            out[key] = v if isinstance(v, str) else str(v)
    for key in ("pid", "tid", "id"):
        v = e.get(key)
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int) and not _fits(v, _I64):
            _bump(diagnostics, f"{key}_out_of_range_kept_as_label")
        out[key] = v if isinstance(v, str) or (isinstance(v, int) and _fits(v, _I64)) else str(v)
    ts = _num(e.get("ts", 0.0))
    if ts is None:
        _bump(diagnostics, "event_without_numeric_ts_dropped")
        return None
    out["ts"] = ts
    if "dur" in e:
        dur = _num(e["dur"])
        if dur is None:
            _bump(diagnostics, "event_without_numeric_dur_dropped")
            return None
        out["dur"] = dur
    if "args" in e:
        out["args"] = _clean_args(e["args"], diagnostics)
    return out


def decode_tolerant(raw: bytes | mmap.mmap, where: str, diagnostics: dict[str, int]) -> RawTrace:
    """Decode a Kineto document whose field types are off; raises ``TraceFormatError``."""
    try:
        doc = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(where, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise TraceFormatError(where, NESTED_TOO_DEEP) from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TraceFormatError(where, "JSON has no 'traceEvents': not a Kineto trace")
    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise TraceFormatError(where, "'traceEvents' is not a list")
    cleaned = [c for c in (_clean_event(e, diagnostics) for e in events) if c is not None]
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    top["traceEvents"] = cleaned
    try:
        return msgspec.json.decode(msgspec.json.encode(top), type=RawTrace)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(where, f"not a Kineto trace: {exc}") from None
