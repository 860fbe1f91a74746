"""Text exports of a Chakra trace: JSON / JSON Lines (``jsonize``), Graphviz dot and GraphML
(``visualize``). Pure Python, streamed node by node, always valid JSON / XML.

JSON layout: ``{"metadata": {...}, "nodes": [{...}, ...]}``; with JSON Lines the first line is
``{"metadata": ...}`` and each further line one node. Attributes keep their kind:
``{"name": ..., "kind": "int64_val", "value": ...}``; bytes are hex strings, non-finite floats
are the strings "NaN", "Infinity", "-Infinity" (JSON has no literal for them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import IO, Any
from xml.sax.saxutils import escape, quoteattr

from lumos.chakra.attrs import Attr
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import ChakraMetadata, ChakraNode, ChakraTrace
from lumos.chakra.view import AttrView, NodeView

__all__ = ["node_to_json", "write_dot", "write_graphml", "write_json"]


def _value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v


def _attrs(attrs: tuple[Attr, ...] | tuple[AttrView, ...]) -> list[dict[str, Any]]:
    return [{"name": a.name, "kind": a.kind, "value": _value(a.value)} for a in attrs]


def _meta(md: ChakraMetadata) -> dict[str, Any]:
    return {"version": md.version, "attr": _attrs(md.attrs)}


def node_to_json(n: ChakraNode | NodeView) -> dict[str, Any]:
    """One node as a JSON-ready dict (field names as in et_def.proto)."""
    out: dict[str, Any] = {
        "id": n.id, "name": n.name,
        "type": n.type.name if isinstance(n.type, NodeType) else int(n.type),
        "ctrl_deps": list(n.ctrl_deps), "data_deps": list(n.data_deps),
        "start_time_micros": n.start_time_micros, "duration_micros": n.duration_micros,
    }  # fmt: skip
    for key, io in (("inputs", n.inputs), ("outputs", n.outputs)):
        if io is not None:
            out[key] = {"values": io.values, "shapes": io.shapes, "types": io.types}
    out["attr"] = _attrs(n.attrs)
    return out


def write_json(trace: ChakraTrace, f: IO[str], *, jsonl: bool = False) -> None:
    """Stream ``trace`` as JSON (one document) or JSON Lines to the text file ``f``."""
    dump = json.dumps
    if jsonl:
        f.write(dump({"metadata": _meta(trace.metadata)}, allow_nan=False) + "\n")
        for n in trace.iter_nodes():
            f.write(dump(node_to_json(n), allow_nan=False) + "\n")
        return
    f.write('{"metadata": ' + dump(_meta(trace.metadata), allow_nan=False) + ', "nodes": [')
    for i, n in enumerate(trace.iter_nodes()):
        f.write(("\n" if i == 0 else ",\n") + dump(node_to_json(n), allow_nan=False))
    f.write("\n]}\n")


def _edges(trace: ChakraTrace) -> Iterator[tuple[int, int, str]]:
    for i in range(trace.num_nodes):
        dst = int(trace.node_id[i])
        for d in trace.data_deps_of(i).tolist():
            yield int(d), dst, "data"
        for d in trace.ctrl_deps_of(i).tolist():
            yield int(d), dst, "ctrl"


def _type_name(t: int) -> str:
    return NodeType(t).name if t in NodeType._value2member_map_ else str(t)


def _dot_label(*lines: str) -> str:
    """A quoted DOT label, one line per argument (DOT's own ``\\n`` line break, not an escaped
    backslash: JSON quoting would show a literal backslash-n).

    >>> _dot_label('a "b"', "c")
    '"a \\\\"b\\\\"\\\\nc"'
    """
    quoted = (ln.replace("\\", "\\\\").replace('"', '\\"') for ln in lines)
    return '"' + "\\n".join(quoted) + '"'


def write_dot(trace: ChakraTrace, f: IO[str]) -> None:
    """Graphviz dot: one box per node (id, name, type, duration), data deps solid, ctrl dashed."""
    f.write("digraph chakra {\n  node [shape=box, fontsize=10];\n")
    for i in range(trace.num_nodes):
        label = _dot_label(
            f"{int(trace.node_id[i])}: {trace.name_of(i)}",
            f"{_type_name(int(trace.node_type[i]))} {int(trace.duration_micros[i])} us",
        )
        f.write(f"  n{int(trace.node_id[i])} [label={label}];\n")
    for src, dst, kind in _edges(trace):
        style = "" if kind == "data" else " [style=dashed]"
        f.write(f"  n{src} -> n{dst}{style};\n")
    f.write("}\n")


def write_graphml(trace: ChakraTrace, f: IO[str]) -> None:
    """GraphML with node attributes name/type/duration_micros and an edge attribute kind."""
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            '  <key id="name" for="node" attr.name="name" attr.type="string"/>\n'
            '  <key id="type" for="node" attr.name="type" attr.type="string"/>\n'
            '  <key id="dur" for="node" attr.name="duration_micros" attr.type="long"/>\n'
            '  <key id="kind" for="edge" attr.name="kind" attr.type="string"/>\n'
            '  <graph id="chakra" edgedefault="directed">\n')  # fmt: skip
    for i in range(trace.num_nodes):
        nid = int(trace.node_id[i])
        f.write(f'    <node id="n{nid}"><data key="name">{escape(trace.name_of(i))}</data>'
                f'<data key="type">{_type_name(int(trace.node_type[i]))}</data>'
                f'<data key="dur">{int(trace.duration_micros[i])}</data></node>\n')  # fmt: skip
    for k, (src, dst, kind) in enumerate(_edges(trace)):
        f.write(f'    <edge id="e{k}" source="n{src}" target="n{dst}">'
                f"<data key={quoteattr('kind')}>{kind}</data></edge>\n")  # fmt: skip
    f.write("  </graph>\n</graphml>\n")
