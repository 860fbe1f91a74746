"""``Table``: a named, typed list of rows that the analysis and diff write as CSV or JSON.

Every table lumos exports (``lumos analyze``, ``lumos diff``) is one of these: column names
with units in them (``total_ns``, ``share``), rows of plain ints, floats and strings, in the
order they are meant to be read. Writing is deterministic (floats rounded to 6 significant
digits) and atomic.

>>> t = Table("demo", ("name", "total_ns"), [("a", 3), ("b", 1)])
>>> t.to_csv()
'name,total_ns\\na,3\\nb,1\\n'
>>> t.to_dicts()[0]
{'name': 'a', 'total_ns': 3}
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos._io import atomic_outputs, atomic_write
from lumos.errors import InputError

__all__ = ["FORMATS", "Table", "read_tables", "write_tables"]

#: Output formats of :func:`write_tables`.
FORMATS = ("csv", "json")


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.6g}")
    return v


@dataclass(frozen=True, eq=False)
class Table:
    """Rows under named columns; ``rows[i][j]`` is column ``columns[j]``."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for r in self.rows:
            if len(r) != len(self.columns):
                raise ValueError(f"table {self.name}: row {r!r} does not match {self.columns}")

    def to_dicts(self) -> list[dict[str, Any]]:
        """One dict per row, keys in column order."""
        return [dict(zip(self.columns, map(_cell, r), strict=True)) for r in self.rows]

    def to_csv(self) -> str:
        """The table as CSV text (header first, ``\\n`` line ends)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow(["" if v is None else _cell(v) for v in r])
        return buf.getvalue()

    def column(self, name: str) -> list[Any]:
        """The values of one column (``[]`` for a table read back empty, without columns)."""
        if not self.rows and name not in self.columns:
            return []
        j = self.columns.index(name)
        return [r[j] for r in self.rows]


def write_tables(
    tables: Mapping[str, Table], out_dir: str | os.PathLike[str], fmt: str = "csv"
) -> list[Path]:
    """Write every table into ``out_dir``: ``<name>.csv`` each, or one ``analysis.json``
    (``{name: [row dicts]}``); atomically as a set. Returns the paths written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    out = Path(out_dir)
    names = [f"{n}.csv" for n in tables] if fmt == "csv" else ["analysis.json"]
    with atomic_outputs(out, names[-1]) as tmp:
        if fmt == "csv":
            for n, t in tables.items():
                with atomic_write(tmp / f"{n}.csv") as f:
                    f.write(t.to_csv())
        else:
            doc = {n: t.to_dicts() for n, t in tables.items()}
            with atomic_write(tmp / "analysis.json") as f:
                json.dump(doc, f, indent=1, allow_nan=False)
                f.write("\n")
    return [out / n for n in names]


def _number(v: str) -> Any:
    if v == "":
        return None
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def read_tables(folder: str | os.PathLike[str], names: Sequence[str]) -> dict[str, Table]:
    """The tables ``names`` that :func:`write_tables` wrote into ``folder`` (either format);
    raises :class:`~lumos.errors.InputError` when the folder holds neither."""
    d = Path(folder)
    out: dict[str, Table] = {}
    if (d / "analysis.json").is_file():
        try:
            doc = json.loads((d / "analysis.json").read_text())
        except (OSError, ValueError) as exc:
            raise InputError(str(d / "analysis.json"), f"not an analysis file: {exc}") from None
        for n in names:
            rows = doc.get(n, [])
            cols = tuple(rows[0]) if rows else ()
            out[n] = Table(n, cols, [tuple(r[c] for c in cols) for r in rows])
        return out
    for n in names:
        p = d / f"{n}.csv"
        if not p.is_file():
            raise InputError(str(d), f"no {n}.csv or analysis.json here (write it with "
                             "`lumos analyze` or `lumos replay --analysis`)")  # fmt: skip
        with p.open(newline="") as f:
            r = list(csv.reader(f))
        cols = tuple(r[0]) if r else ()
        out[n] = Table(n, cols, [tuple(_number(v) for v in row) for row in r[1:]])
    return out
