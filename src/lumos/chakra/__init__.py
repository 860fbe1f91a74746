"""Chakra execution traces: the only package in lumos that knows the Chakra protobuf schema."""

from lumos.chakra.attrs import Attr, IOInfo, attr
from lumos.chakra.io import rank_files, read_chakra, write_chakra
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import MISSING, ChakraMetadata, ChakraNode, ChakraTrace, ChakraWorkload
from lumos.chakra.view import AttrView, NodeView

__all__ = [
    "MISSING",
    "Attr",
    "AttrView",
    "ChakraMetadata",
    "ChakraNode",
    "ChakraTrace",
    "ChakraWorkload",
    "CollectiveCommType",
    "IOInfo",
    "NodeType",
    "NodeView",
    "attr",
    "rank_files",
    "read_chakra",
    "write_chakra",
]
