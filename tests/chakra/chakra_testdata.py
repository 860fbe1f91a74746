"""Chakra test data: real files read in place from the realdata folder (tests/realdata.py),
every attribute kind, and strategies for generated traces (hypothesis).

Names of real files are realdata paths (strings), resolved inside the tests with
:func:`realdata`, so the tests are collected, and skipped with a reason, where the folder is
absent. The gzipped ``chakra.0.et`` is made in a temporary folder by the ``chakra0_gz`` fixture
(conftest.py).
"""

from __future__ import annotations

from hypothesis import strategies as st
from tests.realdata import TRACES, astra_custom, astra_micro, astra_micro_files, realdata

from lumos.chakra import attr
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.attrs import Attr, IOInfo
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.schema import ATTR_KIND_NAMES

__all__ = [
    "ATTRS",
    "CHAKRA0",
    "EVERY_KIND",
    "NAMES",
    "NODES",
    "UNKNOWN",
    "astra_custom",
    "astra_micro",
    "astra_micro_files",
    "realdata",
]

#: upstream's PyTorch-converted Chakra ET (plain, as upstream ships it)
CHAKRA0 = TRACES["chakra_pytorch_converted"]

# every oneof member, with the values that each decode step treats apart
EVERY_KIND = [
    attr("d", 1.5), attr("dnan", float("nan")), attr("dneg0", -0.0), attr("dinf", float("-inf")),
    attr("f", 0.25, "float_val"), attr("fnan", float("nan"), "float_val"),
    attr("i32", -3, "int32_val"), attr("i32max", 2**31 - 1, "int32_val"),
    attr("i64", -(2**40)), attr("u32", 2**32 - 1, "uint32_val"),
    attr("u64", 2**64 - 1, "uint64_val"), attr("s32", -7, "sint32_val"),
    attr("s64", -(2**63), "sint64_val"), attr("fx32", 2**32 - 1, "fixed32_val"),
    attr("fx64", 2**64 - 1, "fixed64_val"), attr("sfx32", -9, "sfixed32_val"),
    attr("sfx64", -(2**63), "sfixed64_val"), attr("b", True), attr("b0", False),
    attr("s", "héllo"), attr("by", b"\x00\xff"), attr("dl", [1.0, 2.5]), attr("il", [1, -2, 3]),
    attr("fl", [0.5], "float_list"), attr("u64l", [0, 2**63], "uint64_list"),
    attr("bl", [True, False]), attr("sl", ["a", "", "c"]), attr("byl", [b"x"]),
    attr("empty", [], "int64_list"), Attr("doc", 5, "int64_val", "a doc string"),
    Attr("nokind", None, ""), attr("", 7),
]  # fmt: skip


def _values(kind: str) -> st.SearchStrategy:
    base, _, shape = kind.rpartition("_")
    i32, i64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
    u32, u64 = (0, 2**32 - 1), (0, 2**64 - 1)
    bounds = {"int32": i32, "int64": i64, "uint32": u32, "uint64": u64, "sint32": i32,
              "sint64": i64, "fixed32": u32, "fixed64": u64, "sfixed32": i32,
              "sfixed64": i64}  # fmt: skip
    one: st.SearchStrategy
    if base in bounds:
        one = st.integers(*bounds[base])
    elif base in ("double", "float"):
        one = st.floats(width=64 if base == "double" else 32)
    else:
        one = {"bool": st.booleans(), "string": st.text(max_size=6),
               "bytes": st.binary(max_size=6)}[base]  # fmt: skip
    return one if shape == "val" else st.lists(one, max_size=4)


NAMES = st.sampled_from(["", "a", "op", "é", "aten::mm"])
ATTRS = st.sampled_from(sorted(ATTR_KIND_NAMES.values())).flatmap(
    lambda kind: st.builds(Attr, NAMES, _values(kind), st.just(kind))
)
UNKNOWN = st.sampled_from(
    [b"", _v(100 << 3) + _v(2**64 - 1), _v(99 << 3 | 1) + bytes(8), _v(11 << 3 | 2) + b"\x01z",
     b"\x05\x00\x00\x00\x00"]  # the last one: field 0, fixed32
)  # fmt: skip
#: keyword arguments of ``ChakraTraceBuilder.add_node`` for up to 8 nodes
NODES = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 2**64 - 1), "name": NAMES, "type": st.integers(-128, 127)},
        optional={
            "ctrl_deps": st.lists(st.integers(0, 2**64 - 1), max_size=4),
            "data_deps": st.lists(st.integers(0, 2**64 - 1), max_size=4),
            "start_time_micros": st.integers(0, MAX_MICROS),
            "duration_micros": st.integers(0, MAX_MICROS),
            "inputs": st.builds(IOInfo, st.text(max_size=4), st.text(max_size=4)),
            "outputs": st.builds(IOInfo, st.text(max_size=4)),
            "attrs": st.lists(ATTRS, max_size=5),
            "unknown": UNKNOWN,
        },
    ),
    max_size=8,
)


def mutate(raw: bytes, data: st.DataObject, ops: tuple[int, int], cut: int, insert: int) -> bytes:
    """``raw`` after a number of edits in ``ops`` (inclusive) drawn from ``data``: a byte
    overwritten, up to ``cut`` bytes cut, or up to ``insert`` random bytes inserted."""
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(*ops))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(0, len(out)))
        if op == "flip" and pos < len(out):
            out[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del out[pos : pos + data.draw(st.integers(1, cut))]
        else:
            out[pos:pos] = data.draw(st.binary(min_size=1, max_size=insert))
    return bytes(out)


class Uncompiled:
    """A numba dispatcher that has compiled nothing (for the tests of which codec is used)."""

    def __init__(self) -> None:
        self.overloads: dict = {}
