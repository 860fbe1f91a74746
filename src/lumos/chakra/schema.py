"""Chakra schema facts: node types, collective kinds, attribute value kinds, file naming.

The wire schema is ``et_def.proto`` beside this module (MLCommons ``ChakraProtoMsg``, proto3).
Everything here is plain Python: the codec in :mod:`lumos.chakra._wire` works from these numbers,
so no generated protobuf code (and no protobuf runtime version) is involved in reading or writing.

Attribute value kinds are named after the ``AttributeProto`` oneof member that carries them
(``"int64_val"``, ``"string_list"``, ...); the kind's number is its protobuf field number.
"""

from __future__ import annotations

from enum import IntEnum
from importlib import resources

__all__ = [
    "ATTR_KIND_BY_NAME",
    "ATTR_KIND_NAMES",
    "INTEGER_KINDS",
    "CollectiveCommType",
    "NodeType",
    "proto_text",
]


class NodeType(IntEnum):
    """``ChakraProtoMsg.NodeType``."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveCommType(IntEnum):
    """``ChakraProtoMsg.CollectiveCommType`` (the value of the ``comm_type`` attribute)."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


# AttributeProto oneof members by field number: odd = scalar, the next even = its list.
ATTR_KIND_NAMES: dict[int, str] = {}
for _i, _t in enumerate(
    (
        "double",
        "float",
        "int32",
        "int64",
        "uint32",
        "uint64",
        "sint32",
        "sint64",
        "fixed32",
        "fixed64",
        "sfixed32",
        "sfixed64",
        "bool",
        "string",
        "bytes",
    )
):
    ATTR_KIND_NAMES[3 + 2 * _i] = f"{_t}_val"
    ATTR_KIND_NAMES[4 + 2 * _i] = f"{_t}_list"
ATTR_KIND_BY_NAME: dict[str, int] = {v: k for k, v in ATTR_KIND_NAMES.items()}

#: Scalar kinds holding an integer (bool excluded): any of them is accepted for comm attributes.
INTEGER_KINDS: frozenset[int] = frozenset(
    ATTR_KIND_BY_NAME[f"{t}_val"]
    for t in (
        "int32",
        "int64",
        "uint32",
        "uint64",
        "sint32",
        "sint64",
        "fixed32",
        "fixed64",
        "sfixed32",
        "sfixed64",
    )
)


def proto_text() -> str:
    """The text of the shipped ``et_def.proto``."""
    return resources.files("lumos.chakra").joinpath("et_def.proto").read_text(encoding="utf-8")
