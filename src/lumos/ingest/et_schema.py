"""What a PyTorch Execution Trace (ET) JSON file looks like, as typed decoders.

Two node layouts exist in the wild and one file never mixes them, but we decide per field by
presence, never by the ``schema`` string:

========================  ===========================================  ===========================
field                     schema 1.0.1 (2023)                          1.0.2-chakra.0.0.4 and newer
========================  ===========================================  ===========================
parent                    ``parent``                                   ``ctrl_deps``
rf_id, tid, op_schema...  node keys                                    ``attrs`` [{name,type,value}]
inputs / outputs          ``inputs`` list + ``input_shapes``,          ``inputs`` {values, shapes,
                          ``input_types`` (and ``output_*``)           types[, strides]}
========================  ===========================================  ===========================

``inputs``/``outputs`` and their shape/type lists stay undecoded (:class:`msgspec.Raw`) at load
time: the reader copies their bytes into one blob and decodes a node's arguments only on demand.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lumos.ingest.kineto_schema import I64

__all__ = ["RawAttr", "RawET", "RawIO", "RawNode"]

# msgspec cannot put Raw in a union, so an absent field is an empty Raw (and JSON null is b"null").
_ABSENT = msgspec.Raw()


class RawAttr(msgspec.Struct, frozen=True, gc=False):
    """One entry of a newer node's ``attrs`` list."""

    name: str
    type: str = ""
    value: Any = None


class RawNode(msgspec.Struct, frozen=True, gc=False):
    """One ET node with every field optional except ``id`` (validated by the reader)."""

    id: I64
    name: str = ""
    ctrl_deps: I64 | list[I64] | None = None
    parent: I64 | None = None
    rf_id: I64 | None = None
    tid: I64 | None = None
    fw_parent: I64 | None = None
    fw_tid: I64 | None = None
    seq_id: I64 | None = None
    scope: I64 | None = None
    op_schema: str | None = None
    inputs: msgspec.Raw = _ABSENT
    input_shapes: msgspec.Raw = _ABSENT
    input_types: msgspec.Raw = _ABSENT
    outputs: msgspec.Raw = _ABSENT
    output_shapes: msgspec.Raw = _ABSENT
    output_types: msgspec.Raw = _ABSENT
    attrs: list[RawAttr] | None = None
    # Written by ET+Kineto linkers (``lumos link -o``, upstream ``chakra_trace_link``): a node
    # with ``cat`` is a GPU activity under its op; ``ts`` marks a host op carrying Kineto timing.
    cat: str | None = None
    ts: I64 | float | None = None


class RawET(msgspec.Struct, frozen=True):
    """The top-level ET object; ``nodes`` is the only required field."""

    nodes: list[RawNode]
    schema: str = ""
    pid: I64 | None = None
    time: str = ""
    start_ts: I64 | float | None = None
    finish_ts: I64 | float | None = None
    distributedInfo: dict[str, Any] | None = None  # the file's spelling


class RawIO(msgspec.Struct, frozen=True):
    """The newer ``inputs``/``outputs`` object form."""

    values: list[Any] = []
    shapes: list[Any] = []
    types: list[Any] = []
    strides: list[Any] | None = None
