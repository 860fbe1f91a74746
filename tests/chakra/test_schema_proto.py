"""The schema tables of :mod:`lumos.chakra.schema` against the shipped ``et_def.proto`` text."""

from __future__ import annotations

import re

from lumos.chakra.schema import ATTR_KIND_BY_NAME, CollectiveCommType, NodeType, proto_text


def _block(text: str, head: str) -> str:
    start = text.index(head)
    return text[start : text.index("}", start)]


def test_tables_match_the_shipped_proto():
    """Every ``AttributeProto`` oneof member's field number, as the ``.proto`` text declares it
    (``<type> <name> = <number>;``), is the kind number lumos writes; the two enums list the same
    names and values. The text is parsed here, not derived from the tables."""
    text = proto_text()
    oneof = _block(text, "oneof value {")
    declared = {m[2]: int(m[3]) for m in re.finditer(r"(\w+)\s+(\w+)\s*=\s*(\d+);", oneof)}
    assert len(declared) == 30
    assert declared["int64_val"] == 9 and declared["sint64_val"] == 17
    assert declared == ATTR_KIND_BY_NAME
    for enum, head in ((NodeType, "enum NodeType {"),
                       (CollectiveCommType, "enum CollectiveCommType {")):  # fmt: skip
        values = dict(re.findall(r"(\w+)\s*=\s*(\d+);", _block(text, head)))
        assert {k: int(v) for k, v in values.items()} == {m.name: int(m) for m in enum}
