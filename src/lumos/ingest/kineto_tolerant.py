"""The slow, forgiving path for Kineto files the fast typed decoder rejects.

Real traces sometimes carry odd types (a string tid, a float id, ``args`` that is not an
object). The fast path fails on those; this path decodes generically, coerces or drops each
offending field, counts what it changed in ``diagnostics``, and decodes the cleaned document
with the typed decoder. It never guesses a time: an event without a numeric ``ts`` is dropped
(and counted).
"""

from __future__ import annotations

from typing import Any

import msgspec

from lumos.errors import TraceFormatError
from lumos.ingest.kineto_schema import RawArgs, RawTrace

__all__ = ["decode_tolerant"]

_INT_ARGS = {f.encode_name for f in msgspec.structs.fields(RawArgs) if f.type is int}
_STR_ARGS = {f.encode_name for f in msgspec.structs.fields(RawArgs) if f.type is str}


def _bump(diagnostics: dict[str, int], key: str) -> None:
    diagnostics[key] = diagnostics.get(key, 0) + 1


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
                out[k] = v
            elif (isinstance(v, float) and v.is_integer()) or (
                isinstance(v, str) and v.strip().lstrip("-").isdigit()
            ):
                out[k] = int(v)
            else:
                _bump(diagnostics, "arg_id_not_an_integer")
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
    for key in ("pid", "tid"):
        v = e.get(key)
        if isinstance(v, bool) or v is None:
            continue
        out[key] = v if isinstance(v, int | str) else str(v)
    if "id" in e:
        v = e["id"]
        out["id"] = v if isinstance(v, int | str) and not isinstance(v, bool) else str(v)
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


def decode_tolerant(raw: bytes, where: str, diagnostics: dict[str, int]) -> RawTrace:
    """Decode a Kineto document whose field types are off; raises ``TraceFormatError``."""
    try:
        doc = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(where, f"invalid JSON: {exc}") from None
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
