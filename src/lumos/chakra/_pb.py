"""Protobuf message classes for the Chakra schema, built at run time (no generated ``_pb2``).

lumos reads and writes Chakra files with its own codec; these classes exist to cross-check
that codec against the protobuf runtime itself (tests, ``lumos chakra validate --deep``).
The ``FileDescriptorProto`` is constructed in Python from :mod:`lumos.chakra.schema` and
registered in a private descriptor pool, so it never clashes with an installed ``et_def_pb2``
and works on every protobuf runtime from 4.21 on: ``message_factory.GetMessageClass`` where it
exists (4.22+), else ``MessageFactory.GetPrototype`` (4.21).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lumos.chakra.schema import ATTR_KIND_NAMES, CollectiveCommType, NodeType
from lumos.errors import MissingDependencyError

__all__ = ["message_classes"]

_SCALAR = {
    "double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
    "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
    "sint32": 17, "sint64": 18,
}  # fmt: skip  # FieldDescriptorProto.Type numbers
_MESSAGE, _ENUM = 11, 14
_OPTIONAL, _REPEATED = 1, 3
_PKG = "ChakraProtoMsg"


def _list_name(base: str) -> str:
    return base[0].upper() + base[1:] + "List"


@cache
def message_classes() -> dict[str, Any]:
    """``{"GlobalMetadata": cls, "Node": cls, "AttributeProto": cls, "IOInfo": cls, ...}``."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as exc:  # pragma: no cover - protobuf is a core dependency
        raise MissingDependencyError("protobuf", "dev", "building Chakra message classes") from exc

    f = descriptor_pb2.FileDescriptorProto(name="lumos_chakra_et_def.proto", package=_PKG)
    f.syntax = "proto3"

    def msg(name: str, fields: list[tuple[str, int, int, int, str]], oneof: bool = False) -> None:
        m = f.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name="value")
        for fname, number, label, ftype, type_name in fields:
            fd = m.field.add(name=fname, number=number, label=label, type=ftype)
            if type_name:
                fd.type_name = f".{_PKG}.{type_name}"
            if oneof and number >= 3:
                fd.oneof_index = 0

    attr_fields: list[tuple[str, int, int, int, str]] = [
        ("name", 1, _OPTIONAL, _SCALAR["string"], ""),
        ("doc_string", 2, _OPTIONAL, _SCALAR["string"], ""),
    ]
    for number, kind in sorted(ATTR_KIND_NAMES.items()):
        base = kind.rsplit("_", 1)[0]
        if kind.endswith("_val"):
            attr_fields.append((kind, number, _OPTIONAL, _SCALAR[base], ""))
        else:
            attr_fields.append((kind, number, _OPTIONAL, _MESSAGE, _list_name(base)))
            msg(_list_name(base), [("values", 1, _REPEATED, _SCALAR[base], "")])
    msg("AttributeProto", attr_fields, oneof=True)
    msg("GlobalMetadata", [("version", 1, _OPTIONAL, _SCALAR["string"], ""),
                           ("attr", 2, _REPEATED, _MESSAGE, "AttributeProto")])  # fmt: skip
    msg("IOInfo", [(n, i, _OPTIONAL, _SCALAR["string"], "") for i, n in
                   enumerate(("values", "shapes", "types"), 1)])  # fmt: skip
    u64 = _SCALAR["uint64"]
    msg("Node", [
        ("id", 1, _OPTIONAL, u64, ""), ("name", 2, _OPTIONAL, _SCALAR["string"], ""),
        ("type", 3, _OPTIONAL, _ENUM, "NodeType"), ("ctrl_deps", 4, _REPEATED, u64, ""),
        ("data_deps", 5, _REPEATED, u64, ""), ("start_time_micros", 6, _OPTIONAL, u64, ""),
        ("duration_micros", 7, _OPTIONAL, u64, ""), ("inputs", 8, _OPTIONAL, _MESSAGE, "IOInfo"),
        ("outputs", 9, _OPTIONAL, _MESSAGE, "IOInfo"),
        ("attr", 10, _REPEATED, _MESSAGE, "AttributeProto"),
    ])  # fmt: skip
    for enum_name, members in (("NodeType", NodeType), ("CollectiveCommType", CollectiveCommType)):
        e = f.enum_type.add(name=enum_name)
        for member in members:
            e.value.add(name=member.name, number=int(member))

    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(f)
    if fd is None:  # older runtimes return None from Add
        fd = pool.FindFileByName(f.name)
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is None:  # protobuf 4.21
        factory = message_factory.MessageFactory(pool)
        get_class = factory.GetPrototype
    return {name: get_class(desc) for name, desc in fd.message_types_by_name.items()}
