"""Plain-text rendering of summary fields for the terminal (no Python reprs).

>>> print("\\n".join(field_lines({"nodes": 3, "by_type": {"COMP": 2, "COMM": 1}, "pgs": [],
...                               "top": [{"name": "aten::mm", "count": 4}]})))
  nodes: 3
  by type: COMP 2, COMM 1
  pgs: none
  top:
    name      count
    aten::mm      4
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["field_lines"]


def _scalar(v: Any) -> str:
    return "-" if v is None else str(v)


def _table(rows: list[Mapping[str, Any]], indent: str) -> list[str]:
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    cells = [[_scalar(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    numeric = [all(isinstance(r.get(c), int | float) for r in rows) for c in cols]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w)
                 for v, w, num in zip(values, width, numeric, strict=True)]  # fmt: skip
        return (indent + "  ".join(parts)).rstrip()

    return [line(cols), *(line(row) for row in cells)]


def field_lines(fields: Mapping[str, Any], indent: str = "  ") -> list[str]:
    """One line per field (``key: value``; underscores read as spaces): a mapping of scalars
    inline (``k v, k v``), a list of scalars comma-separated, a list of mappings as an aligned
    table under the key, an empty container as ``none``."""
    out = []
    for key, v in fields.items():
        label = f"{indent}{key.replace('_', ' ')}:"
        if isinstance(v, Mapping | list | tuple) and not v:
            out.append(f"{label} none")
        elif isinstance(v, Mapping) and all(not isinstance(x, Mapping | list) for x in v.values()):
            out.append(f"{label} " + ", ".join(f"{k} {_scalar(x)}" for k, x in v.items()))
        elif isinstance(v, list | tuple) and all(isinstance(x, Mapping) for x in v):
            out.append(label)
            out.extend(_table(list(v), indent + "  "))
        elif isinstance(v, list | tuple) and all(not isinstance(x, Mapping | list) for x in v):
            out.append(f"{label} " + ", ".join(map(_scalar, v)))
        elif isinstance(v, Mapping):
            out.append(label)
            out.extend(field_lines(v, indent + "  "))
        else:
            out.append(f"{label} {_scalar(v)}")
    return out
